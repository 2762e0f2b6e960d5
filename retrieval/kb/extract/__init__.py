"""Extractors: a passage → its triples, entities, events and propositions (OpenIE import, spaCy rules, LLM)."""
