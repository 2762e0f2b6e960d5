"""The knowledge base: one SQLite file per corpus, its schema, the build pipeline and its extractors."""
