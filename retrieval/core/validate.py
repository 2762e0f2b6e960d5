"""Checks on untrusted text (questions typed by users, passages from uploaded corpora)."""
from __future__ import annotations

from .errors import InputError

# Long enough for any benchmark question (MuSiQue's longest is under 300 characters),
# short enough that an accidental paste of a document is refused rather than embedded.
MAX_QUESTION_CHARS = 2000


def check_question(text: object) -> str:
    """Return the question stripped, or raise InputError saying what is wrong with it."""
    if not isinstance(text, str):
        raise InputError(f"question must be text, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise InputError("question is empty (only whitespace was given)")
    if len(stripped) > MAX_QUESTION_CHARS:
        raise InputError(
            f"question is {len(stripped):,} characters long; the limit is {MAX_QUESTION_CHARS:,}"
        )
    if "\x00" in stripped:
        raise InputError("question contains a NUL character")
    return stripped
