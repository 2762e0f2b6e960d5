"""Recall at an equal context budget: `bench --budget T` → `recall@{T}tok`.

Methods return passages of different lengths, so recall@k compares different amounts of text.
Here a ranking is read in order and a passage counts while the reader's context still holds it:
each passage as the answer step shows it ("Title: …\\ntext", retrieval/methods/answer.py),
counted with the reader's own tokenizer, separators included; the first passage that does not
fit ends the count (the reader reads a prefix of the ranking, never a passage cut in half or one
skipped for a shorter one further down).
"""
from __future__ import annotations

import functools
from typing import Callable, Optional, Sequence

from .metrics import recall_at

SEPARATOR = "\n\n"   # between passages in the reader's prompt (answer.py answer_messages)


def passage_text(title: str, text: str) -> str:
    return f"Title: {title}\n{text}"


def fit_count(texts: Sequence[str], budget: int, count: Callable[[str], int]) -> int:
    """How many of `texts`, in order, fit in `budget` tokens (separators counted)."""
    used, sep = 0, count(SEPARATOR)
    for i, t in enumerate(texts):
        cost = count(t) + (sep if i else 0)
        if used + cost > budget:
            return i
        used += cost
    return len(texts)


def recall_within(ranked: Sequence[str], gold: Sequence[str], fit: int) -> float:
    """Recall over the passages that fit: recall@k with k = the fitted prefix."""
    return recall_at(ranked, gold, fit)


def metric_name(budget: int) -> str:
    return f"recall@{budget}tok"


def reader_tokenizer(llm) -> tuple[Callable[[str], int], str]:
    """(count tokens, which tokenizer): the reader's own — the embedded model's GGUF vocabulary —
    and for an endpoint, whose tokenizer HopTrace cannot load offline, Qwen2.5's, said so."""
    backend = getattr(llm, "backend", None) if llm is not None else None
    if llm is not None and llm.settings.backend == "local":
        return backend.count_tokens, f"{llm.settings.model}'s own tokenizer"
    from ..llm.models import DEFAULT_MODEL, gguf_token_counter, model_file

    count = gguf_token_counter(model_file(DEFAULT_MODEL))
    if llm is None:
        return count, f"{DEFAULT_MODEL}'s tokenizer (no reader is configured: the embedded default's)"
    return count, f"{DEFAULT_MODEL}'s tokenizer ({llm.settings.model}'s own is not available offline)"


def fitter(store, budget: int, count: Callable[[str], int]) -> Callable[[Sequence[str]], int]:
    """A function: a ranking's passage ids → how many of them fit in `budget` tokens. Each
    passage is read and each text counted once, however many rankings hold it."""
    texts: dict[str, str] = {}
    counted = functools.lru_cache(maxsize=None)(count)

    def fit(ranked: Sequence[str]) -> int:
        todo = [p for p in ranked if p not in texts]
        if todo:
            texts.update({p.id: passage_text(p.title, p.text) for p in store.passages(todo)})
        return fit_count([texts.get(p, "") for p in ranked], budget, counted)

    return fit


def check_budget(budget: Optional[int]) -> None:
    from ..core.errors import ConfigError

    if budget is not None and budget < 1:
        raise ConfigError(f"--budget must be a positive number of tokens, got {budget}")
