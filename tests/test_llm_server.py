"""The embedded model on llama.cpp's own llama-server (retrieval/llm/server.py): a GGUF file given
by path, the start-up check and what it stores of the server's build, each kind of request kept
in its own slot (pins.py), a port taken before the server binds it, a server that will not start,
and the header's line for a server that died."""
from __future__ import annotations

import json
import os
import socket
import stat
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from embedded import TEST_MODEL

from retrieval.core.errors import ConfigError
from retrieval.llm import LLMSettings, early_stop
from retrieval.llm.errors import LLMUnavailable
from retrieval.llm.models import model_file


def test_a_model_file_by_path_is_checked_and_named(tmp_path):
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


def test_a_missing_binary_is_named_with_the_command_that_builds_it(tmp_path, monkeypatch):
    from retrieval.llm.server import server_binary

    monkeypatch.setenv("HOPTRACE_LLAMA_SERVER", str(tmp_path / "no-such-server"))
    with pytest.raises(LLMUnavailable, match=r"no llama-server binary at HOPTRACE_LLAMA_SERVER=.*no-such-server: "
                                             r"run `bash scripts/build_llama_server.sh`"):
        server_binary()


def test_a_build_without_git_history_is_named_by_the_source_it_was_built_from(tmp_path):
    """The image's build reports b0-unknown (its tree has no git history): the stamp that
    scripts/build_llama_server.sh leaves beside the binary names the pinned source instead."""
    from retrieval.llm.server import LlamaServer

    srv = LlamaServer.__new__(LlamaServer)   # no process: only the name is asked
    srv.binary = tmp_path / "llama-server"
    srv.props = {"build_info": "b0-unknown"}
    assert srv.server == "llama-server b0-unknown"
    (tmp_path / "llama-server.built-from").write_text("llama-cpp-python 0.3.36 sha256:832d | -DGGML_NATIVE=ON | ab\n")
    assert srv.server == "llama-server b0-unknown (llama.cpp of llama-cpp-python 0.3.36)"
    srv.props = {"build_info": "b1-0c1e570"}
    assert srv.server == "llama-server b1-0c1e570"


def test_a_server_that_exits_at_start_is_reported_with_its_last_words(tmp_path, monkeypatch):
    """A binary that is not a working llama-server: the app's error says its exit code, its
    last log lines and where the log is, not a bare timeout."""
    from retrieval.llm.server import LlamaServer

    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'error: unknown argument: --slot-prompt-similarity' >&2\nexit 7\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("HOPTRACE_LLAMA_SERVER", str(fake))
    monkeypatch.setenv("HOPTRACE_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    server = LlamaServer(LLMSettings.parse(f"local:{TEST_MODEL}"))
    with pytest.raises(LLMUnavailable) as e:
        server.start(wait_s=60)
    msg = str(e.value)
    assert "llama-server exited with code 7" in msg and "unknown argument: --slot-prompt-similarity" in msg, msg
    assert "llama_server.log" in msg and server.health().startswith("exited with code 7")


def test_the_header_names_a_model_server_that_died_after_it_was_ready():
    from ui.state import AppState

    llm = SimpleNamespace(describe=lambda: "embedded llama.cpp · qwen2.5-coder-1.5b", health=lambda: "")
    state = SimpleNamespace(llm=llm, llm_status="ready")
    assert AppState.llm_line(state) == "embedded llama.cpp · qwen2.5-coder-1.5b (ready)"
    llm.health = lambda: "pid 4242, llama-server b1-0c1e570, 1 slot(s), log llama_server.log"
    assert AppState.llm_line(state) == ("embedded llama.cpp · qwen2.5-coder-1.5b (ready · pid 4242, "
                                        "llama-server b1-0c1e570, 1 slot(s), log llama_server.log)")
    llm.health = lambda: "exited with code -9, its log kept in llama_server.log"
    assert AppState.llm_line(state) == ("embedded llama.cpp · qwen2.5-coder-1.5b "
                                        "(server exited with code -9, its log kept in llama_server.log)")


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
    assert server.props["build_info"] and server.checked.startswith(f"llama-server {server.props['build_info']}")
    assert server.server == f"llama-server {server.props['build_info']}"
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


def test_each_purpose_keeps_its_slot_until_the_least_recently_used_one_is_needed():
    from retrieval.llm.pins import SlotPins

    pins = SlotPins(2)
    a = pins.take("entities")
    pins.give_back(a)
    b = pins.take("rerank")
    pins.give_back(b)
    assert a != b and pins.take("entities") == a   # back to its own slot
    assert pins.take("entities") == b              # its own is busy (two at once): another free one
    assert pins.take("answer") == -1               # every slot busy: the server picks
    pins.give_back(a)
    pins.give_back(b)
    assert pins.take("answer") == a                # a new purpose takes the least recently used
    pins.give_back(a)
    assert pins.take("entities") == b


@pytest.mark.slow
def test_a_purpose_resumes_after_its_instructions_though_another_came_between(server):
    """Two kinds of request alternate, each its instructions then a long text of its own, as a
    method's steps do. The first kind's second request reads its text only: its instructions stay
    in its slot. (One slot re-reads them: the RAM cache skips a prompt that shares under a quarter.)"""
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
    rules = {p: f"You count for task {p}. " + " ".join(f"Rule {i}: reply with a number." for i in range(16))
             for p in ("a", "b")}

    def ask(purpose: str, n: int) -> int:
        text = " ".join(f"Item {n}.{i} is {purpose}{i * n}." for i in range(50))
        raw = server.complete([{"role": "system", "content": rules[purpose]},
                               {"role": "user", "content": f'{text}\nReply {{"n": {n}}}.'}],
                              max_tokens=8, temperature=0.0, seed=0, schema=schema, name=purpose)
        return json.loads(raw.text)["n"]

    def read() -> float:   # prompt tokens the server has computed so far (its /metrics counter)
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as r:
            line = next(x for x in r.read().decode().splitlines() if x.startswith("llamacpp:prompt_tokens_total"))
        return float(line.split()[-1])

    t0 = read()
    ask("a", 1)
    t1 = read()
    ask("b", 2)
    t2 = read()
    assert ask("a", 3) == 3
    first, again = t1 - t0, read() - t2
    assert first - again > 100, (first, again)   # the instructions (~130 tokens) not read again
    assert server.pins.n_slots >= 2 and "--no-cache-idle-slots" in server.server_command()


@pytest.mark.slow
def test_a_server_whose_port_was_taken_starts_again_on_another(tmp_path, monkeypatch):
    """The port picked for the server is taken before it binds (another server picked it too):
    the server exits saying so, and start() tries a new port instead of failing the app."""
    from retrieval.llm import server as server_module
    from retrieval.llm.server import PORT_IN_USE, LlamaServer, server_binary

    try:
        server_binary()
    except LLMUnavailable as e:
        pytest.skip(str(e))
    monkeypatch.setenv("HOPTRACE_HOME", str(tmp_path))
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = held.getsockname()[1]
    ports = iter([taken])
    real = server_module.free_port
    monkeypatch.setattr(server_module, "free_port", lambda: next(ports, None) or real())
    srv = LlamaServer(LLMSettings(backend="local", model=TEST_MODEL, n_ctx=512, cache=False))
    try:
        srv.start(wait_s=120)
        assert srv.port != taken and srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
        assert str(srv._client.base_url).startswith(srv.base_url)
        assert PORT_IN_USE in (tmp_path / "llama_server.log").read_text()
        assert srv.health().startswith(f"pid {srv.proc.pid}, llama-server ")
    finally:
        srv.stop()
        held.close()
    assert not os.path.exists(f"/proc/{srv.proc.pid}") or srv.proc.poll() is not None
