"""Greedy decoding under a JSON grammar without checking the whole vocabulary at every token.

llama-cpp-python samples through one chain: penalties → grammar → greedy. The grammar step
tests every one of the 151,936 vocabulary entries of Qwen2.5 against the grammar at every
token, ~40 ms a token on 2 cores, which made a grammar-constrained reply ~1.5x slower to write
than a free one (measured: 112–124 ms a token against 78–81). Every LLM step here runs at
temperature 0 with a grammar, so that cost was on every output token of every method.

llama.cpp's own sampler (common_sampler) avoids it the same way as below: take the model's
first choice without the grammar, ask the grammar about that one token, and only when the
grammar rejects it filter the whole vocabulary. Greedy decoding makes this exact: if the
overall best token is allowed, it is also the best allowed token, so the output is the same
token for token (tests/test_llm_sampling.py compares both on real replies). patches.py puts it
in place of the library's sampler for greedy, grammar-constrained replies. A schema with an
early-stop mark ends its reply sooner; the tokens before the end are the same (early_stop.py).
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np

from .early_stop import stop_watch


class GreedyGrammarSampler:
    """Stands in for llama-cpp-python's LlamaSampler where Llama.sample() uses it."""

    def __init__(self, llama: Any, chain: Any, grammar: Any):
        import llama_cpp

        self._lib = llama_cpp
        self._chain = chain  # the library's own chain without the grammar (penalties → greedy)
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        if not self._grammar:
            raise ValueError("llama.cpp rejected the grammar")
        self._n_vocab = llama._n_vocab
        self._data = (llama_cpp.llama_token_data * self._n_vocab)()
        self._view = np.ctypeslib.as_array(self._data)  # structured (id, logit, p) view, no copy
        self._ids = np.arange(self._n_vocab, dtype=np.int32)
        self._all = llama_cpp.llama_token_data_array(data=self._data, size=self._n_vocab, selected=-1, sorted=False)
        self._one_data = (llama_cpp.llama_token_data * 1)()
        self._one = llama_cpp.llama_token_data_array(data=self._one_data, size=1, selected=-1, sorted=False)
        self._stop = stop_watch(llama, grammar)  # a marked schema may end the reply early

    def _fill(self, logits: np.ndarray) -> None:
        self._view["id"] = self._ids
        self._view["logit"] = logits
        self._view["p"] = 0.0
        self._all.size, self._all.selected, self._all.sorted = self._n_vocab, -1, False

    def _pick(self) -> int:
        self._lib.llama_sampler_apply(self._chain.sampler, ctypes.byref(self._all))
        return int(self._data[self._all.selected].id)

    def _allowed(self, token: int) -> bool:
        self._one_data[0].id, self._one_data[0].logit, self._one_data[0].p = token, 0.0, 0.0
        self._one.size, self._one.selected, self._one.sorted = 1, -1, False
        self._lib.llama_sampler_apply(self._grammar, ctypes.byref(self._one))
        return not math.isinf(self._one_data[0].logit)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        if self._stop is not None:
            forced = self._stop.forced()
            if forced is not None:
                return forced  # the reply ends: nothing more to check against the grammar
        ptr = self._lib.llama_get_logits_ith(ctx.ctx, idx)
        logits = np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))
        self._fill(logits)
        token = self._pick()
        if not self._allowed(token):
            # Penalties and the grammar commute (a penalised -inf stays -inf), so filtering
            # first and then running the chain equals the library's penalties → grammar → greedy.
            self._fill(logits)
            self._lib.llama_sampler_apply(self._grammar, ctypes.byref(self._all))
            token = self._pick()
        self._lib.llama_sampler_accept(self._grammar, token)
        self._chain.accept(token)
        if self._stop is not None:
            self._stop.seen(token)
        return token

    def __del__(self) -> None:
        if getattr(self, "_grammar", None):
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None
