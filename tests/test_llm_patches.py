"""The patches of llama-cpp-python's internals (retrieval/llm/patches.py) are checked before they
are applied, refused loudly when the library changed, and seen to work in the real child:
each test of the real child fails when its patch is silently inactive."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from retrieval.llm import patches

ROOT = Path(__file__).resolve().parents[1]


def test_the_installed_library_passes_every_check():
    assert patches.problems() == []


def _altered_copy(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """llama_cpp copied whole into tmp_path, with one edit; first on PYTHONPATH it shadows the
    installed package in a child process."""
    import llama_cpp

    src = Path(llama_cpp.__file__).parent
    dst = tmp_path / "site" / "llama_cpp"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    path = dst / file
    text = path.read_text()
    assert old in text, f"{file} no longer holds {old!r}: update this test's edit"
    path.write_text(text.replace(old, new))
    return tmp_path / "site"


ALTERATIONS = {
    # A renamed keyword would send every reply back to the stock sampler without a word.
    "renamed keyword": ("llama.py", "        grammar: Optional[LlamaGrammar] = None,\n    ):\n        sampler = ",
                        "        grammar_: Optional[LlamaGrammar] = None,\n    ):\n        grammar = grammar_\n       "
                        " sampler = ",
                        "Llama._init_sampler lacks parameter(s) grammar"),
    # Grammars that stop passing through the builder would ignore the compact and stop marks.
    "grammar builder bypassed": ("llama_chat_format.py", "        return _grammar_for_json_schema(\n            "
                                                         "json.dumps(response_format",
                                 "        return _grammar_for_json_schema_v2(\n            json.dumps(response_format",
                                 "llama_chat_format._grammar_for_response_format no longer contains "
                                 "'_grammar_for_json_schema('"),
    "another version": ("__init__.py", f'__version__ = "{patches.PINNED}"', '__version__ = "0.3.99"',
                        f"llama-cpp-python is 0.3.99, the patches were written for {patches.PINNED}"),
}


@pytest.mark.parametrize("case", list(ALTERATIONS))
def test_a_child_on_an_altered_library_refuses_to_start_and_names_what_changed(tmp_path, case):
    file, old, new, named = ALTERATIONS[case]
    site = _altered_copy(tmp_path, file, old, new)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    # No --model: a child that got past its checks would fail later, on the missing model.
    out = subprocess.run([sys.executable, "-m", "retrieval.llm.child", str(os.getpid())], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == patches.REFUSED, out.stderr[-2000:]
    assert "hoptrace: the embedded LLM server refuses to start" in out.stderr
    assert named in out.stderr, out.stderr


@pytest.mark.slow
def test_the_app_reports_the_childs_refusal_with_what_changed(tmp_path, monkeypatch):
    """Through EmbeddedLlamaCpp.start, as the app starts it: the refusal, not a bare exit code."""
    from retrieval.llm.backends import EmbeddedLlamaCpp
    from retrieval.llm.errors import LLMUnavailable
    from retrieval.llm.settings import LLMSettings

    file, old, new, named = ALTERATIONS["renamed keyword"]
    site = _altered_copy(tmp_path, file, old, new)
    monkeypatch.setenv("HOPTRACE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT)]))
    server = EmbeddedLlamaCpp(LLMSettings.parse("local:qwen2.5-coder-0.5b"))
    with pytest.raises(LLMUnavailable) as e:
        server.start(wait_s=120)
    msg = str(e.value)
    assert f"exited with code {patches.REFUSED}" in msg and named in msg, msg
    assert "llama_server.log" in msg
    assert server.health().startswith(f"exited with code {patches.REFUSED}")


@pytest.mark.slow
def test_a_child_whose_port_was_taken_starts_again_on_another(tmp_path, monkeypatch):
    """The port picked for the child is taken before it binds (another server picked it too):
    the child exits saying so, and start() tries a new port instead of failing the app."""
    import socket

    from retrieval.llm import backends
    from retrieval.llm.settings import LLMSettings

    monkeypatch.setenv("HOPTRACE_HOME", str(tmp_path))
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = held.getsockname()[1]
    ports = iter([taken])
    real = backends.free_port
    monkeypatch.setattr(backends, "free_port", lambda: next(ports, None) or real())
    server = backends.EmbeddedLlamaCpp(LLMSettings.parse("local:qwen2.5-coder-0.5b"))
    try:
        server.start(wait_s=120)
        assert server.port != taken and server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert str(server._client.base_url).startswith(server.base_url)
        assert backends.PORT_IN_USE in (tmp_path / "llama_server.log").read_text()
        assert server.health().startswith("pid ")
    finally:
        server.stop()
        held.close()


def test_a_childs_status_is_checked_for_version_build_and_every_patch():
    good = {"hoptrace_child": True, "llama_cpp": patches.PINNED, "system_info": "AVX2 = 1 | AMX_INT8 = 0",
            "patches": {name: True for name in patches.PATCHES}}
    assert patches.status_problems(good, frozenset({"avx2", "amx_tile"})) == []
    assert patches.status_problems({"object": "list"}) == \
        ["the server on the child's port is not HopTrace's child (no patch status)"]
    bad = {**good, "llama_cpp": "0.3.40", "system_info": "AMX_INT8 = 1",
           "patches": {**good["patches"], "fast_sampler": False, "drafts": False}}
    assert patches.status_problems(bad, frozenset({"amx_tile"})) == [
        f"it runs llama-cpp-python 0.3.40, expected {patches.PINNED}",
        "its llama.cpp was built with AMX, which crashes on this CPU: run `bash scripts/setup.sh`",
        "patch(es) not in place: fast_sampler, drafts"]
    # AMX in the build is only wrong where the CPU has AMX tiles.
    assert patches.status_problems({**good, "system_info": "AMX_INT8 = 1"}, frozenset({"avx2"})) == []


def test_the_header_names_a_model_server_that_died_after_it_was_ready():
    from ui.state import AppState

    llm = SimpleNamespace(describe=lambda: "embedded llama.cpp · qwen2.5-coder-1.5b", health=lambda: "")
    state = SimpleNamespace(llm=llm, llm_status="ready")
    assert AppState.llm_line(state) == "embedded llama.cpp · qwen2.5-coder-1.5b (ready)"
    llm.health = lambda: "pid 4242, llama-cpp-python 0.3.36, 6 patches checked, log llama_server.log"
    assert AppState.llm_line(state) == ("embedded llama.cpp · qwen2.5-coder-1.5b (ready · pid 4242, "
                                        "llama-cpp-python 0.3.36, 6 patches checked, log llama_server.log)")
    llm.health = lambda: "exited with code -9, its log kept in llama_server.log"
    assert AppState.llm_line(state) == ("embedded llama.cpp · qwen2.5-coder-1.5b "
                                        "(server exited with code -9, its log kept in llama_server.log)")


# --- the real child: each test fails when its patch is in place but silently does nothing ---------

SCHEMA = {"type": "object", "required": ["facts"], "properties": {"facts": {
    "type": "array", "maxItems": 3, "items": {"type": "array", "minItems": 3, "maxItems": 3,
                                              "items": {"type": "string", "maxLength": 40}}}}}
# A spaced example, as the methods' prompts show: only the grammar can hold the model to compact.
ASK = [{"role": "user", "content": 'Give 3 facts about Lyon as JSON {"facts": [["s", "p", "o"], ...]}.'}]


@pytest.fixture(scope="module")
def child():
    from retrieval.llm.backends import EmbeddedLlamaCpp
    from retrieval.llm.settings import LLMSettings

    return EmbeddedLlamaCpp.shared(LLMSettings.parse("local"))


def _used(server) -> dict:
    return server.status()["used"]


@pytest.mark.slow
def test_the_real_child_passed_its_start_up_check_with_every_patch_in_place(child):
    status = child.status()
    assert status["llama_cpp"] == patches.PINNED and status["pid"] == child.proc.pid
    assert status["patches"] == {name: True for name in patches.PATCHES}
    assert child.checked == f"llama-cpp-python {patches.PINNED}, {len(patches.PATCHES)} patches checked"
    assert child.health().startswith(f"pid {child.proc.pid}, ")


@pytest.mark.slow
def test_the_fast_sampler_writes_every_greedy_grammar_reply_and_only_those(child):
    before = _used(child)
    greedy = child.complete(ASK, max_tokens=200, temperature=0.0, seed=0, schema=SCHEMA)
    middle = _used(child)
    child.complete(ASK, max_tokens=8, temperature=0.7, seed=0, schema=SCHEMA)
    after = _used(child)
    assert json.loads(greedy.text)["facts"], greedy.text
    assert middle.get("fast_sampler_replies", 0) == before.get("fast_sampler_replies", 0) + 1
    # Sampling at temperature > 0 is the library's own chain: the fast path is exact only for greedy.
    assert after.get("fast_sampler_replies", 0) == middle["fast_sampler_replies"]
    assert after.get("stock_sampler_grammar_replies", 0) == middle.get("stock_sampler_grammar_replies", 0) + 1


@pytest.mark.slow
def test_a_compact_marked_reply_from_the_real_child_has_no_whitespace(child):
    from retrieval.llm import compact

    before = _used(child)
    tight = child.complete(ASK, max_tokens=200, temperature=0.0, seed=0, schema=compact.mark(SCHEMA)).text
    spaced = child.complete(ASK, max_tokens=40, temperature=0.0, seed=0, schema=SCHEMA).text
    value = json.loads(tight)
    assert value["facts"], tight
    assert tight.strip() == json.dumps(value, separators=(",", ":"), ensure_ascii=False), tight
    assert ", " in spaced or ": " in spaced, spaced  # unmarked: the library's grammar, spaces allowed
    assert _used(child)["compact_json_grammars"] == before.get("compact_json_grammars", 0) + 1
    # What the mark is for: the same answer costs fewer tokens written without spaces.
    assert child.count_tokens(tight) < child.count_tokens(json.dumps(value, ensure_ascii=False)), tight


@pytest.mark.slow
def test_drafts_are_proposed_and_checked_on_a_prompt_longer_than_n_batch(monkeypatch):
    """Extraction's setting (drafts on), a prompt longer than the server's n_batch (512): the
    prompt is read in several batches, the drafts are still checked, and the reply parses."""
    monkeypatch.setenv("HOPTRACE_LLM_CACHE", "0")
    from retrieval.kb.extract.llm import extraction_settings
    from retrieval.llm.backends import EmbeddedLlamaCpp
    from retrieval.llm.settings import LLMSettings

    server = EmbeddedLlamaCpp.shared(extraction_settings(LLMSettings.parse("local"), 3))
    passage = ("The Treaty of Westphalia was signed in 1648 in Osnabrück and Münster by the Holy Roman "
               "Empire, the Kingdom of France and the Swedish Empire, ending the Thirty Years' War. ")
    messages = [{"role": "system", "content": "You copy names from passages exactly."},
                {"role": "user", "content": passage * 14 + "List the three signatories named above, "
                 'exactly as written, as JSON {"names": [...]}.'}]
    assert server.count_prompt(messages) > 600
    schema = {"type": "object", "required": ["names"], "properties": {"names": {
        "type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 60}}}}
    before = _used(server)
    reply = server.complete(messages, max_tokens=60, temperature=0.0, seed=0, schema=schema)
    after = _used(server)
    names = json.loads(reply.text)["names"]
    assert any("France" in n or "Swedish" in n or "Roman" in n for n in names), reply.text
    assert after["draft_tokens_proposed"] > before.get("draft_tokens_proposed", 0)
    assert after["draft_check_batches"] > before.get("draft_check_batches", 0)
