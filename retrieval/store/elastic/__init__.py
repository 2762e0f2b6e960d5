"""The Elasticsearch backend: `mappings` (index layout, GRIEVER App. A.1), `queries` (request
bodies, pure), `store` (the SearchStore over a cluster), `sync` (push a built KB, bulk)."""
from .store import ElasticStore, parse_spec
from .sync import push_kb

__all__ = ["ElasticStore", "parse_spec", "push_kb"]
