"""llama.cpp's own llama-server as the embedded backend (retrieval/llm/server.py, opt-in with
HOPTRACE_LLM_SERVER=llama-server), and a GGUF file given by path. The server tests run where
`bash scripts/build_llama_server.sh` has built the binary."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from embedded import TEST_MODEL

from retrieval.core.errors import ConfigError
from retrieval.llm import LLMSettings, early_stop
from retrieval.llm.choose import embedded_server
from retrieval.llm.errors import LLMUnavailable
from retrieval.llm.models import model_file


def test_a_model_file_by_path_is_checked_and_named(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="nowhere.gguf cannot be read"):
        LLMSettings.parse("local", model=str(tmp_path / "nowhere.gguf"))
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    with pytest.raises(ConfigError, match=r"notes.gguf is not a GGUF file"):
        LLMSettings.parse("local", model=str(text))
    with pytest.raises(LLMUnavailable, match="or a GGUF file's path"):
        LLMSettings.parse("local:llama-9b")
    copy = tmp_path / "copy.gguf"
    copy.symlink_to(model_file(TEST_MODEL))
    assert LLMSettings.parse(f"local:{copy}").model == str(model_file(TEST_MODEL).resolve())
    monkeypatch.setenv("HOPTRACE_LLM_SERVER", "ollama")
    with pytest.raises(ConfigError, match="HOPTRACE_LLM_SERVER must be one of"):
        embedded_server()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from retrieval.llm.server import LlamaServer, server_binary

    try:
        server_binary()
    except LLMUnavailable as e:
        pytest.skip(str(e))
    copy = tmp_path_factory.mktemp("model") / "my-model.gguf"
    copy.symlink_to(model_file(TEST_MODEL))
    srv = LlamaServer(LLMSettings(backend="local", model=str(copy), n_ctx=2048, cache=False))
    srv.start()
    yield srv
    srv.stop()


@pytest.mark.slow
def test_the_server_answers_schema_bound_from_a_gguf_given_by_path(server):
    assert server.props["build_info"] and server.checked.startswith("llama-server")
    assert server.props["build_info"] in server.describe()
    assert Path(server.props["model_path"]) == model_file(TEST_MODEL).resolve()   # the file behind the path given
    schema = {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}
    raw = server.complete([{"role": "user", "content": 'What is 2 + 2? Answer as {"answer": "..."}.'}],
                          max_tokens=20, temperature=0.0, seed=0, schema=schema)
    assert isinstance(json.loads(raw.text)["answer"], str) and raw.tokens_in > 10 and raw.tokens_out > 0
    assert server.count_tokens("hello world") in (2, 3)


@pytest.mark.slow
def test_a_done_reply_ends_at_its_mark(server):
    schema = early_stop.mark({"type": "object", "required": ["action", "answer", "next"],
                              "properties": {"action": {"type": "string", "enum": ["DONE", "AGAIN"]},
                                             "answer": {"type": "string"}, "next": {"type": "string"}}},
                             r'"action":\s*"DONE",\s*"answer":\s*"[^"]*"')
    raw = server.complete([{"role": "user", "content": 'Paris is the capital of France. Reply DONE with the '
                                                       'capital as {"action": "DONE", "answer": "...", "next": ""}.'}],
                          max_tokens=60, temperature=0.0, seed=0, schema=schema)
    value = json.loads(raw.text)
    assert value["action"] == "DONE" and "next" not in value
