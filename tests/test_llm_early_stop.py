"""Early stop (retrieval/llm/early_stop.py): a marked schema's reply ends once the text matches
the mark's pattern (the embedded server's stream is closed there); what comes before is what the
model writes without the mark."""
from __future__ import annotations

import json
import re

import pytest
from embedded import TEST_MODEL

from retrieval.llm import compact, early_stop
from retrieval.methods.grasp.prompts import DONE_ANSWERED, evaluate_messages, evaluate_schema, parse_evaluation


def test_the_done_pattern_matches_a_closed_answer_after_done_only():
    done = '{"observations": ["Ilona Varga built it."], "action": "DONE", "answer": "Ilona Varga"'
    assert re.search(DONE_ANSWERED, done)
    assert not re.search(DONE_ANSWERED, done[:-1])                   # the answer is still being written
    assert not re.search(DONE_ANSWERED, done[:-1] + '\\"')           # an escaped quote does not close it
    again = '{"observations": ["x"], "action": "QUERY_AGAIN", "answer": ""'
    assert not re.search(DONE_ANSWERED, again)
    # An observation quoting a DONE reply: its quotes are escaped inside the JSON string.
    quoting = json.dumps({"observations": ['"action": "DONE", "answer": "b"']})[:-1] + ', "action": "QUERY_AGAIN"'
    assert not re.search(DONE_ANSWERED, quoting)


def test_the_mark_reaches_no_endpoint():
    from retrieval.llm.backends import OpenAICompatible
    from retrieval.llm.settings import LLMSettings

    schema = evaluate_schema(2)
    assert schema[early_stop.MARK] == DONE_ANSWERED
    plain = compact.unmark(schema)
    assert early_stop.MARK not in plain and plain["properties"]["observations"]["maxItems"] == 2
    both = compact.mark(schema)
    assert compact.unmark(both) == plain  # every HopTrace mark goes, not only the compact one
    endpoint = OpenAICompatible(LLMSettings(backend="openai", base_url="http://127.0.0.1:9/v1", model="m"))
    assert endpoint.response_format(schema, "evaluate")["json_schema"]["schema"] == plain
    with pytest.raises(re.error):
        early_stop.mark({}, "(unclosed")
    with pytest.raises(ValueError, match="empty"):
        early_stop.mark({}, "")


def test_an_ended_reply_is_closed_at_the_end_of_the_match_and_a_whole_one_is_left_alone():
    schema = evaluate_schema(2)
    head = '{"observations": ["Ilona Varga built it."], "action": "DONE", "answer": "Ilona Varga"'
    # The token that closed the answer may carry the next separator, even a quote (`", "`).
    for tail in ("", ",", ', "', ",\n  "):
        closed = early_stop.close(head + tail, schema)
        assert closed == head + "}" and parse_evaluation(json.loads(closed))["answer"] == "Ilona Varga"
    whole = head + ', "next_statement": "", "next_keywords": []}'
    assert early_stop.close(whole, schema) == whole
    assert early_stop.close(head + ",", compact.unmark(schema)) == head + ","  # no mark: not touched
    cut = '{"observations": ["Ilona'  # cut off before the pattern: left for the repair request
    assert early_stop.close(cut, schema) == cut


@pytest.mark.slow
def test_the_real_model_ends_a_done_reply_after_its_answer_and_writes_the_same_before_it():
    """On llama-server, as the agent asks: the marked reply's stream is closed at the answer; it
    is the whole reply's beginning, token for token, and parses to the same decision."""
    from retrieval.llm.errors import LLMUnavailable
    from retrieval.llm.server import LlamaServer, server_binary
    from retrieval.llm.settings import LLMSettings

    try:
        server_binary()
    except LLMUnavailable as e:
        pytest.skip(str(e))
    srv = LlamaServer.shared(LLMSettings(backend="local", model=TEST_MODEL, n_ctx=2048, cache=False))
    messages = evaluate_messages(
        "In which city was the inventor of the Varga loom born?", "Who invented the Varga loom?", [], [],
        [("Varga loom", "The Varga loom is a hand loom invented by the weaver Ilona Varga in 1921. She was "
                        "born in Szeged and later taught weaving in Budapest.")], True)
    # One observation: the model copies the passage into each, and a second copy was ~33 tokens of
    # each reply that the mark's check does not need (issue 72: the suite's time).
    marked = evaluate_schema(1)
    full = srv.complete(messages, max_tokens=200, temperature=0.0, seed=0, schema=compact.unmark(marked))
    short = srv.complete(messages, max_tokens=200, temperature=0.0, seed=0, schema=marked)
    whole, ended = parse_evaluation(json.loads(full.text)), parse_evaluation(json.loads(short.text))
    assert whole["action"] == "DONE" and "Varga" in whole["answer"], full.text
    assert full.text.startswith(short.text[:-1]), (short.text, full.text)   # short ends with the added "}"
    assert {k: ended[k] for k in ("observations", "action", "answer")} == \
        {k: whole[k] for k in ("observations", "action", "answer")}
    assert ended["next_statement"] == "" and ended["next_keywords"] == []
    assert short.tokens_out < full.tokens_out, (short.text, full.text)
