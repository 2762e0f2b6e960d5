"""Prompt-cache states without the logits, for the embedded server's child (patches.py
`_slim_states` puts these in place of Llama.save_state / load_state)."""
from __future__ import annotations


def slim_save(self):
    """Llama.save_state without the logits, so the server's RAM prompt cache holds what it counts.

    llama-cpp-python's save_state copies the logits of every prompt token (151,936 floats a
    token for Qwen2.5: ~180 MB for 300 tokens, ~600 MB for 1,000) into each cached state,
    while LlamaRAMCache counts only the KV bytes against --cache_size. A 1 GB cache so held
    ~23 GB after 25 agent runs and the kernel killed the server (measured 2026-11-22). The
    logits are never read back: after load_state, generate() replays at least one token
    (_requires_eval) to refresh them before sampling. So states keep no logits.
    """
    import ctypes

    import llama_cpp
    import numpy as np
    from llama_cpp.llama import LlamaState

    size = int(llama_cpp.llama_state_get_size(self._ctx.ctx))
    buf = (ctypes.c_uint8 * size)()
    n = int(llama_cpp.llama_state_get_data(self._ctx.ctx, buf, size))
    if n > size:
        raise RuntimeError("Failed to copy llama state data")
    return LlamaState(scores=np.zeros((0, self.scores.shape[1]), dtype=np.single),
                      input_ids=self.input_ids.copy(), n_tokens=self.n_tokens,
                      llama_state=ctypes.string_at(buf, n), llama_state_size=n, seed=self._seed)


def slim_load(self, state) -> None:
    """Llama.load_state for a state of slim_save's: no logits to restore."""
    import ctypes

    import llama_cpp

    self.input_ids = state.input_ids.copy()
    self.n_tokens = state.n_tokens
    self._requires_eval = True  # generate() refreshes the logits before sampling
    self._seed = state.seed
    data = (ctypes.c_uint8 * state.llama_state_size).from_buffer_copy(state.llama_state)
    if llama_cpp.llama_state_set_data(self._ctx.ctx, data, state.llama_state_size) != state.llama_state_size:
        raise RuntimeError("Failed to set llama state data")
