"""Prompt-lookup drafts for the embedded server: guess the next tokens by copying them from
the request, and let one batched forward pass check the guesses.

Most of what the methods and the extractor ask the model to write is copied from what they
sent: entity names and phrases of a passage in triples, the question's words in a rewritten
query, an event's words in a summary. Writing runs at ~22 tokens/s on 2 cores because each
token reads all weights once; a forward pass over a few tokens reads them once too, so when
the model would have written the guessed tokens anyway, several come for about the price of
one. Decoding stays greedy under the grammar: a guess is kept only where it equals the token
the model picks. The reply is not token for token the one written without drafts, though: a
pass over several tokens rounds differently from a pass over one, which flips near-ties, and
a small model's JSON has many (the same 20 passages: 3,916 tokens and 91 triples with drafts,
4,481 and 107 without). So drafts are a setting (LLMSettings.draft_tokens), on only where
their output was measured: extraction (docs/llm-indexing.md, "Prompt-lookup drafts").

llama-cpp-python's own prompt-lookup draft searches the whole token history and takes the
*first* earlier occurrence of the last two tokens, which on our prompts is usually in the fixed
instructions or the demonstration; this one prefers the most recent occurrence of the longest
suffix (up to `max_ngram` tokens), looking in the conversation after the system prompt, so a
name being copied continues from the passage or the reply itself.

The library asks for logits of every token of every batch once a draft model is set (a
prompt of 600 tokens then computes and copies 600 × 151,936 logits); `eval_keeping_draft_logits`
limits that to the draft-checking batches, the only ones whose logits are read. patches.py
installs both in the server's child.
"""
from __future__ import annotations

from typing import Any

import numpy as np

IM_START = 151644  # Qwen2.5's <|im_start|>: the chat template opens every message with it

# A batch of at most this many tokens is a draft check (one sampled token plus the guesses)
# or a short prompt suffix; its logits are kept.
_SMALL_BATCH = 16


class PromptLookupDraft:
    """Stands in for llama_cpp.llama_speculative.LlamaPromptLookupDecoding."""

    def __init__(self, max_ngram_size: int = 3, num_pred_tokens: int = 3, min_ngram: int = 1):
        self.max_ngram = max_ngram_size
        self.num_pred = num_pred_tokens
        self.min_ngram = min_ngram

    def __call__(self, input_ids: np.ndarray, /, **kwargs: Any) -> np.ndarray:
        ids = np.asarray(input_ids)
        n = ids.shape[0]
        if self.num_pred <= 0 or n < 2:
            return np.array([], dtype=np.intc)
        starts = np.flatnonzero(ids == IM_START)
        lo = int(starts[1]) if starts.shape[0] > 1 else 0  # skip the system message
        hay = ids[lo:n - 1]  # a match must have at least one token after it
        for size in range(min(self.max_ngram, hay.shape[0]), self.min_ngram - 1, -1):
            tail = ids[n - size:]
            windows = np.lib.stride_tricks.sliding_window_view(hay, size)
            hits = np.flatnonzero(np.all(windows == tail, axis=1))
            if hits.shape[0]:
                # The most recent match (the tail itself, ending at n, is not in hay's windows);
                # it ends at n - 2 at the latest, so at least one token follows it.
                start = lo + int(hits[-1]) + size
                return ids[start:start + self.num_pred].astype(np.intc)
        return np.array([], dtype=np.intc)


def eval_keeping_draft_logits(self, tokens) -> bool:
    """Llama.eval as patches.py installs it: logits of every token only for the last batch of a
    draft check; True when this call was one."""
    self._ctx.kv_cache_seq_rm(-1, self.n_tokens, -1)
    tokens = list(tokens)
    checked = False
    for i in range(0, len(tokens), self.n_batch):
        batch = tokens[i:i + self.n_batch]
        n_past, n_tokens = self.n_tokens, len(batch)
        last = i + self.n_batch >= len(tokens)
        # Logits of every token only where drafts are checked; a long prompt needs its
        # last token's alone (the samplers read llama.cpp's outputs by negative index).
        every = self._logits_all and last and n_tokens <= _SMALL_BATCH
        checked = checked or every
        self._batch.set_batch(batch=batch, n_past=n_past, logits_all=every)
        self._ctx.decode(self._batch)
        self.input_ids[n_past:n_past + n_tokens] = batch
        self.n_tokens += n_tokens
        self._requires_eval = False
    return checked
