"""Trace persistence (runs, stages, LLM calls in SQLite). The record types live in retrieval.trace."""
