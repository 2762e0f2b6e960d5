"""String normalisation of entity names (the exact-match half of same_as derivation)."""
from __future__ import annotations

import re
import unicodedata

_ARTICLE = re.compile(r"^(the|a|an)\s+")
_PUNCT = re.compile(r"[^\w\s]")
_SPACE = re.compile(r"\s+")


def normalize_entity(name: str) -> str:
    """'The  North-Star ' and 'north star' → 'north star': case, accents, punctuation, articles."""
    s = unicodedata.normalize("NFKD", name)
    s = "".join(c for c in s if not unicodedata.combining(c)).lower()
    s = _PUNCT.sub(" ", s)
    s = _SPACE.sub(" ", s).strip()
    return _ARTICLE.sub("", s)
