"""Compact JSON answers (retrieval/llm/compact.py): a marked schema's grammar allows no
whitespace between JSON tokens in the embedded server; endpoints never see the mark."""
from __future__ import annotations

import json

import pytest

from retrieval.llm import compact

SCHEMA = {"type": "object", "required": ["triples"], "properties": {"triples": {
    "type": "array", "maxItems": 4,
    "items": {"type": "array", "minItems": 3, "maxItems": 3, "items": {"type": "string", "maxLength": 40}}}}}


def test_the_compact_grammar_differs_from_llamas_only_in_the_space_rule():
    from llama_cpp import llama_grammar

    spaced = llama_grammar.json_schema_to_gbnf(json.dumps(SCHEMA))
    tight = compact.compact_gbnf(spaced)
    changed = [(a, b) for a, b in zip(spaced.splitlines(), tight.splitlines()) if a != b]
    assert changed == [('space ::= " "?', 'space ::= ""')]
    with pytest.raises(ValueError, match="space"):
        compact.compact_gbnf('root ::= "{" "}"')


def test_the_mark_reaches_the_embedded_server_and_no_endpoint():
    from retrieval.llm.backends import EmbeddedLlamaCpp, OpenAICompatible
    from retrieval.llm.settings import LLMSettings

    marked = compact.mark(SCHEMA)
    assert marked[compact.MARK] is True and compact.MARK not in SCHEMA  # the task's schema is not changed
    endpoint = OpenAICompatible(LLMSettings(backend="openai", base_url="http://127.0.0.1:9/v1", model="m"))
    sent = endpoint.response_format(marked, "triples")
    assert sent["json_schema"]["schema"] == SCHEMA
    endpoint._format_mode = "json_object"
    assert endpoint.response_format(marked, "triples") == {"type": "json_object"}
    embedded = EmbeddedLlamaCpp.__new__(EmbeddedLlamaCpp)  # no server needed to ask its request format
    assert embedded.response_format(marked, "triples") == {"type": "json_object", "schema": marked}
    assert compact.unmark(SCHEMA) is SCHEMA and compact.unmark(None) is None


def test_installing_the_patch_twice_wraps_the_librarys_builder_once():
    from llama_cpp import llama_chat_format

    from retrieval.llm import patches

    original = llama_chat_format._grammar_for_json_schema
    try:
        patches.install("compact_json")
        once = llama_chat_format._grammar_for_json_schema
        patches.install("compact_json")  # idempotent: the builder is not wrapped again
        assert llama_chat_format._grammar_for_json_schema is once
        assert once._hoptrace == "compact_json" and once._hoptrace_inner is original
    finally:
        llama_chat_format._grammar_for_json_schema = original

# The real model under the compact grammar: test_llm_patches.py, in the embedded server's child as
# the methods use it (no whitespace, fewer tokens than the same answer spaced, the unmarked grammar
# unchanged). This file ran the 1.5B in-process for it (~18 CPU s of the suite): the suite's 0.5B
# wrote an empty list to its question, but not to the child test's.
