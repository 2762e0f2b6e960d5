"""Relevance judgments where no gold exists: TREC pools of an experiment's runs, graded 0–3 by a
person, by the answer rule or by an LLM judge, kept as qrels with their source, and the measures
and validity figures computed from them."""
