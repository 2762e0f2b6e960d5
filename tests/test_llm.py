"""The LLM layer without a model: JSON repair, the response cache, settings, call records."""
import pytest
from llm_double import ScriptedBackend, scripted_llm

from retrieval.llm import LLMOutputError, LLMSettings, LLMUnavailable, parse_json
from retrieval.llm.cache import CachedReply, ResponseCache, cache_key
from retrieval.llm.client import LLM
from retrieval.trace.model import Stage


@pytest.mark.parametrize("text, expected", [
    ('{"a": 1}', {"a": 1}),
    ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
    ('Sure! Here it is: {"a": "x"} Hope that helps.', {"a": "x"}),
    ('{"a": [1, 2,],}', {"a": [1, 2]}),
    ("{'triples': [('A', 'b', 'C')]}", {"triples": [["A", "b", "C"]]}),
    ('[["A", "b", "C"]] and more text', [["A", "b", "C"]]),
])
def test_tolerant_json_parsing(text, expected):
    assert parse_json(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "no json here", '{"a": ', "{'a': undefined_name}"])
def test_unparsable_output_names_the_problem(text):
    with pytest.raises(ValueError) as e:
        parse_json(text)
    assert str(e.value)


def test_one_repair_request_then_a_clear_error():
    llm, backend = scripted_llm({"read": ["I cannot answer in JSON, sorry.", '{"triples": [["A", "b", "C"]]}']})
    st = Stage("read", "read")
    assert llm.json(st, "read", [{"role": "user", "content": "x"}], {"type": "object"}) == {"triples": [["A", "b",
                                                                                                         "C"]]}
    assert backend.purposes() == ["read", "read (repair)"]
    # the repair request shows the model its own answer and what was wrong with it
    repair_msgs = backend.requests[1][1]
    assert repair_msgs[-2] == {"role": "assistant", "content": "I cannot answer in JSON, sorry."}
    assert "cannot be used" in repair_msgs[-1]["content"]
    assert [c.purpose for c in st.llm_calls] == ["read", "read (repair)"]
    assert st.tokens_in == sum(c.tokens_in for c in st.llm_calls) > 0

    llm, _ = scripted_llm({"read": ["garbage", "still garbage"]})
    with pytest.raises(LLMOutputError) as e:
        llm.json(Stage("r", "r"), "read", [{"role": "user", "content": "x"}], {"type": "object"})
    assert "after one repair request" in str(e.value)


def test_an_answer_cut_off_at_the_token_limit_is_asked_again_sampling_not_shown_back():
    looping = '{"triples": [["A", "b", "C"], ["A", "b", "C"], ["A", "b", "C"], ["A", "b'
    llm, backend = scripted_llm({"read": [looping, '{"triples": [["A", "b", "C"]]}']})
    msgs = [{"role": "user", "content": "x"}]

    def need_triples(v):  # as the extraction tasks check: the tolerant parser finds an inner list
        if not isinstance(v, dict) or "triples" not in v:
            raise ValueError("expected an object with triples")
        return v

    assert llm.json(None, "read", msgs, {"type": "object"}, need_triples, max_tokens=10) == {"triples": [["A", "b",
                                                                                                          "C"]]}
    assert backend.purposes() == ["read", "read (repair)"]
    assert backend.requests[1][1] == msgs  # the loop is not fed back into the prompt
    (t0, s0), (t1, s1) = backend.sampling
    assert t1 > 0 and (t1, s1) != (t0, s0)  # greedy decoding would write the same loop again


def test_validator_failure_also_triggers_the_repair():
    def need_answer(v):
        if "answer" not in v:
            raise ValueError("missing key 'answer'")
        return v["answer"]
    llm, backend = scripted_llm({"answer": ['{"foo": 1}', '{"answer": "Paris"}']})
    assert llm.json(None, "answer", [{"role": "user", "content": "q"}], {"type": "object"}, need_answer) == "Paris"
    assert "missing key 'answer'" in backend.requests[1][1][-1]["content"]


def test_response_cache_is_a_real_sqlite_file_and_makes_repeats_free(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    backend = ScriptedBackend({"read": ['{"x": 1}']})  # one answer only: a second request would fail
    llm = LLM(LLMSettings(backend="openai", model=backend.model), backend=backend, cache=cache)
    msgs = [{"role": "user", "content": "hello"}]
    first, second = Stage("a", "a"), Stage("b", "b")
    assert llm.json(first, "read", msgs, {"type": "object"}) == llm.json(second, "read", msgs, {"type": "object"})
    assert len(backend.requests) == 1 and len(cache) == 1
    assert not first.llm_calls[0].cached and second.llm_calls[0].cached
    assert second.llm_calls[0].tokens_in == first.llm_calls[0].tokens_in  # cached calls still report their cost
    # the key covers model, messages and parameters
    k = cache_key("m", msgs, {"t": 0})
    assert k != cache_key("m2", msgs, {"t": 0}) != cache_key("m", msgs, {"t": 1})
    # ... and the endpoint: a second server of the same model name asks its own server, not the cache
    other_backend = ScriptedBackend({"read": ['{"x": 2}']})
    other = LLM(LLMSettings(backend="openai", model=backend.model, base_url="http://127.0.0.1:9/v1"),
                backend=other_backend, cache=cache)
    assert llm.endpoint != other.endpoint
    assert other.json(Stage("c", "c"), "read", msgs, {"type": "object"}) == {"x": 2}
    assert len(other_backend.requests) == 1 and len(cache) == 2
    reopened = ResponseCache(tmp_path / "cache.sqlite")
    reopened.put("k", "m", {}, CachedReply("t", 1, 2, 3.0))
    assert reopened.get("k").tokens_out == 2 and len(reopened) == 3


def test_settings_parse_specs_and_reject_bad_ones(monkeypatch):
    monkeypatch.delenv("HOPTRACE_LLM_MODEL")   # the suite's model (tests/embedded.py); a user's default is the 1.5B
    assert LLMSettings.parse("local").model == "qwen2.5-coder-1.5b"
    monkeypatch.setenv("HOPTRACE_LLM_MODEL", "qwen2.5-coder-0.5b")
    assert LLMSettings.parse("local").model == "qwen2.5-coder-0.5b"
    monkeypatch.delenv("HOPTRACE_LLM_MODEL")   # an endpoint without a model name must be refused below
    assert LLMSettings.parse("local:qwen2.5-coder-0.5b").model == "qwen2.5-coder-0.5b"
    assert LLMSettings.parse("none").backend == "none"
    s = LLMSettings.parse("http://127.0.0.1:8000/v1/", model="qwen")
    assert (s.backend, s.base_url, s.max_concurrency) == ("openai", "http://127.0.0.1:8000/v1", 4)
    assert LLMSettings.parse("local").max_concurrency == 1
    with pytest.raises(LLMUnavailable, match="needs a model name"):
        LLMSettings.parse("http://127.0.0.1:8000/v1", model=None)
    with pytest.raises(LLMUnavailable, match="unknown embedded model"):
        LLMSettings.parse("local:gpt-9")
    with pytest.raises(LLMUnavailable, match="unknown LLM spec"):
        LLMSettings.parse("ftp://x")


def test_unreachable_endpoint_fails_with_a_clear_error():
    import socket

    from retrieval.llm import LLMCallError, get_llm
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    llm = get_llm(LLMSettings.parse(f"http://127.0.0.1:{port}/v1", model="m", max_retries=0, timeout_s=5,
                                    cache=False))
    st = Stage("r", "r")
    with pytest.raises(LLMCallError, match="cannot connect"):
        llm.json(st, "read", [{"role": "user", "content": "x"}], {"type": "object"})
    assert st.llm_calls[0].error


def test_an_answer_cut_off_at_max_tokens_says_so():
    # the double counts a token per 4 characters, so both answers exceed 8 tokens
    llm, _ = scripted_llm({"cut": ['{"items": ["a", "a", "a", "a", "a", "a"', '{"items": ["a", "a", "a", "a"']})

    def has_items(value):
        if not isinstance(value, dict) or "items" not in value:
            raise ValueError("no items")
        return value

    with pytest.raises(LLMOutputError, match="cut off at the 8-token limit"):
        llm.json(None, "cut", [{"role": "user", "content": "list"}], {"type": "object"}, validate=has_items,
                 max_tokens=8)


@pytest.mark.slow
def test_the_default_model_is_assembled_checked_and_answers(monkeypatch):
    """The suite runs its LLM tests on the 0.5B (tests/embedded.py); what every user runs is the
    1.5B: assembled from its part packages with its size and SHA-256 checked, started as the
    server child, answering a schema-constrained request."""
    from retrieval.llm import get_llm
    from retrieval.llm.models import DEFAULT_MODEL, MODELS, model_file

    monkeypatch.delenv("HOPTRACE_LLM_MODEL")
    monkeypatch.setenv("HOPTRACE_LLM_CACHE", "0")
    assert DEFAULT_MODEL == "qwen2.5-coder-1.5b"
    path = model_file()
    assert path.stat().st_size == MODELS[DEFAULT_MODEL].size
    llm = get_llm(LLMSettings.parse("local")).start()
    try:
        schema = {"type": "object", "properties": {"capital": {"type": "string"}}, "required": ["capital"]}
        out = llm.json(None, "default model check",
                       [{"role": "user", "content": "What is the capital of France? Answer as JSON."}], schema,
                       max_tokens=20)
        assert "paris" in out["capital"].lower()
        assert "qwen2.5-coder-1.5b" in llm.describe()
    finally:
        llm.stop()   # the suite's other tests use the 0.5B: this one's memory goes back
