"""Search stores behind one interface; `open_store` picks the backend from a spec string."""
from __future__ import annotations

from typing import Optional

from ..core.paths import resolve_kb
from .base import Filter, Hit, SearchStore, rrf

__all__ = ["Filter", "Hit", "SearchStore", "rrf", "open_store"]


def open_store(spec: str, embed_model: Optional[str] = None) -> SearchStore:
    """`demo`, a KB name or a .sqlite path → the embedded SQLite store;
    `es+http://host:9200/prefix` → the Elasticsearch store holding that KB."""
    if spec.startswith("es+"):
        from .elastic import ElasticStore

        return ElasticStore(spec, embed_model)
    from .sqlite import SQLiteStore

    return SQLiteStore(resolve_kb(spec), embed_model)
