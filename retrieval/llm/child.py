"""Entry point of the embedded llama.cpp server's child process: the server, plus a watchdog
that ends it as soon as its parent is gone, and the patches of patches.py (slim prompt-cache
states, below; fast grammar sampling; the schema marks; prompt-lookup drafts), each checked
first: a child whose library changed refuses to start and says what changed.

A child started with Popen outlives a parent that is killed (SIGKILL, a crash, or SIGTERM,
which skips atexit handlers), keeping ~2 GB of memory and both cores busy. PR_SET_PDEATHSIG
is not enough either: it fires when the *thread* that started the child exits, and the app
starts the model from a short-lived thread. So the child watches its parent's pid and exits
when it changes (the orphan is re-parented). ctypes releases the GIL during decoding, so the
watchdog runs even while the model computes.

    python -m retrieval.llm.child PARENT_PID <llama_cpp.server arguments>
"""
from __future__ import annotations

import os
import sys
import threading
import time


def watch(parent: int, every_s: float = 0.5) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(0)  # no cleanup to wait for: the parent that wanted the answers is gone
        time.sleep(every_s)


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

    import numpy as np
    import llama_cpp
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


def main() -> None:
    parent = int(sys.argv[1])
    threading.Thread(target=watch, args=(parent,), daemon=True, name="parent-watchdog").start()
    from . import patches

    try:
        patches.apply()
    except patches.PatchRefused as e:
        # One line the app reads back from the log (backends.py), then the details.
        print(f"hoptrace: {e}", file=sys.stderr, flush=True)
        sys.exit(patches.REFUSED)
    import llama_cpp

    print(f"hoptrace: child {os.getpid()} of {parent}: llama-cpp-python {llama_cpp.__version__}, "
          f"patches in place: {', '.join(n for n, on in patches.active().items() if on)}", file=sys.stderr, flush=True)
    from llama_cpp.server.__main__ import main as serve  # after patches: it imports create_app by name

    sys.argv = ["llama_cpp.server", *sys.argv[2:]]
    serve()


if __name__ == "__main__":
    main()
