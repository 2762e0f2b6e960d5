"""Compact JSON answers (retrieval/llm/compact.py, gbnf.py): a marked schema goes to the embedded
server as our own grammar, which allows no whitespace between JSON tokens and nothing the schema
does not; endpoints never see the mark."""
from __future__ import annotations

import json
import re

import pytest
from embedded import TEST_MODEL

from retrieval.kb.extract.llm.tasks import JOINT
from retrieval.llm import compact
from retrieval.llm.gbnf import compact_grammar, schema_grammar

SCHEMA = {"type": "object", "required": ["triples"], "properties": {"triples": {
    "type": "array", "maxItems": 4,
    "items": {"type": "array", "minItems": 3, "maxItems": 3, "items": {"type": "string", "maxLength": 40}}}}}


def test_the_grammar_holds_every_bound_of_the_schema_and_no_space():
    g = compact_grammar(SCHEMA)
    rules = dict(line.split(" ::= ", 1) for line in g.splitlines())
    assert rules["root"] == '"{" "\\"triples\\"" ":" root-triples "}"'
    assert rules["root-triples-item-item"] == '"\\"" char{0,40} "\\""'
    assert rules["root-triples-item"] == '"[" root-triples-item-item ("," root-triples-item-item){2,2} "]"'
    assert rules["root-triples"] == '"[" (root-triples-item ("," root-triples-item){0,3})? "]"'
    assert "space" not in g and '" "?' not in g and "\\n" not in g   # no rule lets whitespace in
    # Optional properties: any of them, in the schema's order, each at most once.
    opt = compact_grammar({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}})
    rules = dict(line.split(" ::= ", 1) for line in opt.splitlines())
    assert rules["root"] == '"{" (root-opt)? "}"'
    assert rules["root-opt"] == '"\\"a\\"" ":" integer ("," "\\"b\\"" ":" boolean)? | "\\"b\\"" ":" boolean'
    assert compact_grammar({"type": "string", "enum": ["DONE", "QUERY_AGAIN"]}).splitlines()[0] == \
        'root ::= "\\"DONE\\"" | "\\"QUERY_AGAIN\\""'


def test_the_methods_grammar_allows_one_optional_space_where_json_does_and_no_more():
    """The spacing the methods were measured with on llama-cpp-python's server: one optional
    space after every value and after `{`, `[`, `,` and `:` (llama-server's own grammar allows
    newlines and indentation too, which the model took: docs/measurements/llama-server.md)."""
    rules = dict(line.split(" ::= ", 1) for line in schema_grammar(SCHEMA).splitlines())
    assert rules["space"] == '" "?'
    assert rules["root"] == '"{" space "\\"triples\\"" space ":" space root-triples "}" space'
    assert rules["root-triples-item-item"] == '"\\"" char{0,40} "\\"" space'
    assert rules["root-triples"] == ('"[" space (root-triples-item ("," space root-triples-item){0,3})? "]" space')
    assert "\\n" not in schema_grammar(SCHEMA)


@pytest.mark.parametrize("schema, says", [
    ({"type": "string", "pattern": "^a"}, "string keyword(s) pattern not supported"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True},
     "additionalProperties other than false"),
    ({"anyOf": [{"type": "string"}]}, "type None is not one the compact grammar writes"),
    ({"type": "array", "minItems": 3, "maxItems": 2}, "maxItems 2 is below minItems 3"),
    ({"type": "object", "properties": {}, "required": ["a"]}, "required a not among its properties"),
])
def test_a_keyword_the_grammar_cannot_honour_is_refused_by_name(schema, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        compact_grammar(schema)


def test_the_mark_reaches_the_embedded_server_as_a_grammar_and_no_endpoint_sees_it():
    from retrieval.llm.backends import OpenAICompatible
    from retrieval.llm.server import LlamaServer
    from retrieval.llm.settings import LLMSettings

    marked = compact.mark(SCHEMA)
    assert marked[compact.MARK] is True and compact.MARK not in SCHEMA  # the task's schema is not changed
    endpoint = OpenAICompatible(LLMSettings(backend="openai", base_url="http://127.0.0.1:9/v1", model="m"))
    assert endpoint.format_kwargs(marked, "triples") == \
        {"response_format": {"type": "json_schema", "json_schema": {"name": "triples", "schema": SCHEMA}}}
    endpoint._format_mode = "json_object"
    assert endpoint.response_format(marked, "triples") == {"type": "json_object"}
    embedded = LlamaServer.__new__(LlamaServer)  # no server needed to ask its request format
    embedded._format_mode = "json_schema"
    assert embedded.format_kwargs(marked, "triples") == {"extra_body": {"grammar": compact_grammar(SCHEMA)}}
    assert embedded.format_kwargs(SCHEMA, "triples") == {"extra_body": {"grammar": schema_grammar(SCHEMA)}}
    # A schema ours cannot write goes to the server as a schema, for its own grammar.
    odd = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}
    assert embedded.format_kwargs(odd, "odd")["response_format"]["json_schema"]["schema"] == odd
    assert compact.unmark(SCHEMA) is SCHEMA and compact.unmark(None) is None
    compact_grammar(compact.unmark(JOINT.schema))   # the one-read extraction's schema is one it writes


@pytest.mark.slow
def test_a_compact_marked_reply_from_the_real_server_has_no_whitespace_and_fewer_tokens():
    from retrieval.llm.errors import LLMUnavailable
    from retrieval.llm.server import LlamaServer, server_binary
    from retrieval.llm.settings import LLMSettings

    try:
        server_binary()
    except LLMUnavailable as e:
        pytest.skip(str(e))
    srv = LlamaServer.shared(LLMSettings(backend="local", model=TEST_MODEL, n_ctx=2048, cache=False))
    # A spaced example, as the methods' prompts show: only the grammar holds the model to compact.
    ask = [{"role": "user", "content": 'Give 3 facts about Lyon as JSON {"triples": [["s", "p", "o"], ...]}.'}]
    # At least two: left free, the suite's 0.5B writes an empty list here.
    schema = {**SCHEMA, "properties": {"triples": {**SCHEMA["properties"]["triples"], "minItems": 2}}}
    spaced = srv.complete(ask, max_tokens=120, temperature=0.0, seed=0, schema=schema)
    tight = srv.complete(ask, max_tokens=120, temperature=0.0, seed=0, schema=compact.mark(schema))
    value = json.loads(tight.text)
    assert tight.text == json.dumps(value, separators=(",", ":"), ensure_ascii=False), tight.text
    assert 2 <= len(value["triples"]) <= 4 and all(len(t) == 3 for t in value["triples"])
    assert tight.tokens_out <= spaced.tokens_out, (spaced.text, tight.text)
