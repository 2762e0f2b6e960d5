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


@pytest.mark.slow
def test_the_real_model_writes_a_marked_answer_without_spaces_and_an_unmarked_one_as_before():
    from llama_cpp import Llama, llama_chat_format

    from retrieval.llm import patches
    from retrieval.llm.backends import server_threads
    from retrieval.llm.models import DEFAULT_MODEL, model_file

    # The default 1.5B (DEFAULT_MODEL): under the compact grammar the suite's 0.5B writes an empty list,
    # which would make the token count below compare nothing.
    llm = Llama(str(model_file(DEFAULT_MODEL)), n_ctx=1024, n_threads=server_threads(), verbose=False)
    # A spaced example, as the methods' prompts still show: the grammar alone must hold the model.
    messages = [{"role": "user", "content": 'Give 3 facts about Lyon as JSON {"triples": [["s", "p", "o"], ...]}.'}]

    def write(schema: dict) -> str:
        llm.reset()
        out = llm.create_chat_completion(messages, max_tokens=80, temperature=0.0,
                                         response_format={"type": "json_object", "schema": schema})
        return out["choices"][0]["message"]["content"]

    original = llama_chat_format._grammar_for_json_schema
    try:
        patches.install("compact_json")
        patches.install("compact_json")  # idempotent
        tight, spaced = write(compact.mark(SCHEMA)), write(SCHEMA)
    finally:
        llama_chat_format._grammar_for_json_schema = original
    value = json.loads(tight)
    assert value["triples"], tight
    assert tight.strip() == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert ", " in spaced or ": " in spaced, spaced  # unmarked: llama-cpp-python's grammar, spaces allowed
    def n(s):
        return len(llm.tokenize(s.encode(), add_bos=False))

    assert n(tight) < n(spaced), (tight, spaced)
