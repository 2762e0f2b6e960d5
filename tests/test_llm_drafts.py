"""N-gram drafts for extraction (llama-server's ngram-simple speculation): when they are on, what
the server is asked for, and that a real model under a grammar still writes valid JSON with them."""
from __future__ import annotations

import os

import pytest

from retrieval.kb.extract.llm import BUILD_DRAFT_TOKENS, extraction_settings
from retrieval.llm import LLMSettings
from retrieval.llm.backends import server_threads


def test_drafts_are_on_for_embedded_extraction_and_off_for_the_methods(monkeypatch):
    monkeypatch.delenv("HOPTRACE_DRAFT_TOKENS", raising=False)
    local = LLMSettings.parse("local")
    assert local.draft_tokens == 0 and local.speed_key == local.model
    build = extraction_settings(local)
    assert build.draft_tokens == BUILD_DRAFT_TOKENS and build.speed_key == f"{local.model}+draft{BUILD_DRAFT_TOKENS}"
    assert extraction_settings(local, 0).draft_tokens == 0
    none = LLMSettings.parse("none")
    assert extraction_settings(none) is none
    monkeypatch.setenv("HOPTRACE_DRAFT_TOKENS", "5")
    assert LLMSettings.parse("local").draft_tokens == 5
    assert extraction_settings(LLMSettings.parse("local")).draft_tokens == 5
    monkeypatch.setenv("HOPTRACE_DRAFT_TOKENS", "many")
    with pytest.raises(Exception, match="HOPTRACE_DRAFT_TOKENS must be a whole number"):
        LLMSettings.parse("local")


def test_the_server_command_asks_for_drafts_only_when_on(monkeypatch, tmp_path):
    from retrieval.core.errors import ConfigError
    from retrieval.llm.server import LlamaServer

    monkeypatch.delenv("HOPTRACE_DRAFT_TOKENS", raising=False)
    monkeypatch.delenv("HOPTRACE_LLM_SLOTS", raising=False)
    monkeypatch.delenv("HOPTRACE_LLAMA_SERVER_ARGS", raising=False)
    monkeypatch.delenv("HOPTRACE_LLM_PROMPT_SLOTS", raising=False)
    monkeypatch.delenv("HOPTRACE_LLM_CTX", raising=False)
    fake = tmp_path / "llama-server"   # the command is only built here, never run
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("HOPTRACE_LLAMA_SERVER", str(fake))
    off = LlamaServer(LLMSettings.parse("local")).server_command()
    on = LlamaServer(extraction_settings(LLMSettings.parse("local"), 4)).server_command()
    assert "--spec-type" not in off
    assert off[off.index("-t") + 1] == off[off.index("-tb") + 1] == str(server_threads())
    # Four slots, one a kind of request (pins.py), each with its own 8,192-token context.
    assert off[off.index("-np") + 1] == "4" and off[off.index("-c") + 1] == str(4 * 8192)
    assert off[off.index("--cache-ram") + 1] == "1024" and "--no-cache-idle-slots" in off
    monkeypatch.setenv("HOPTRACE_LLM_PROMPT_SLOTS", "1")
    monkeypatch.setenv("HOPTRACE_LLM_CTX", "16384")
    one = LlamaServer(LLMSettings.parse("local")).server_command()
    assert one[one.index("-np") + 1] == "1" and one[one.index("-c") + 1] == "16384"
    assert one[one.index("--slot-prompt-similarity") + 1] == "0"   # every request through the RAM cache
    monkeypatch.delenv("HOPTRACE_LLM_PROMPT_SLOTS")
    monkeypatch.delenv("HOPTRACE_LLM_CTX")
    i = on.index("--spec-type")
    assert on[i + 1:i + 4] == ["ngram-simple", "--spec-ngram-simple-size-m", "4"]
    # More slots: the server decodes that many sequences at once, and the client sends as many.
    monkeypatch.setenv("HOPTRACE_LLM_SLOTS", "3")
    three = LlamaServer(LLMSettings.parse("local")).server_command()
    assert three[three.index("-np") + 1] == "4" and LLMSettings.parse("local").max_concurrency == 3
    monkeypatch.setenv("HOPTRACE_LLM_SLOTS", "6")
    six = LlamaServer(LLMSettings.parse("local")).server_command()
    assert six[six.index("-np") + 1] == "6" and six[six.index("-c") + 1] == str(6 * 8192)
    monkeypatch.delenv("HOPTRACE_LLM_SLOTS")
    assert LLMSettings.parse("local").max_concurrency == 1
    # The operator's own flags come last, so they win; one that cannot be split is named.
    monkeypatch.setenv("HOPTRACE_LLAMA_SERVER_ARGS", "-ngl 99 --alias 'my model'")
    assert LlamaServer(LLMSettings.parse("local")).server_command()[-4:] == ["-ngl", "99", "--alias", "my model"]
    monkeypatch.setenv("HOPTRACE_LLAMA_SERVER_ARGS", "-ngl 'open")
    with pytest.raises(ConfigError, match="HOPTRACE_LLAMA_SERVER_ARGS cannot be split into flags"):
        LlamaServer(LLMSettings.parse("local")).server_command()


def test_the_servers_threads_are_the_usable_cores_or_what_the_variable_says(monkeypatch):
    from retrieval.core.errors import ConfigError

    monkeypatch.delenv("HOPTRACE_LLM_THREADS", raising=False)
    assert server_threads() == max(1, min(os.cpu_count() or 2, 8))
    monkeypatch.setenv("HOPTRACE_LLM_THREADS", "1")   # what the suite's parallel workers set
    assert server_threads() == 1
    for bad, says in (("two", "must be a number"), ("0", "must be positive"), ("1.5", "must be a whole number")):
        monkeypatch.setenv("HOPTRACE_LLM_THREADS", bad)
        with pytest.raises(ConfigError, match=f"HOPTRACE_LLM_THREADS {says}"):
            server_threads()


@pytest.mark.slow
def test_a_real_server_with_drafts_writes_grammar_valid_json(monkeypatch):
    """The embedded 1.5B model, drafts on: a copy-heavy reply comes back
    whole and in schema."""
    monkeypatch.setenv("HOPTRACE_LLM_CACHE", "0")
    from retrieval.llm import get_llm

    # The default 1.5B: the suite's 0.5B copies the wrong names out of this sentence.
    llm = get_llm(extraction_settings(LLMSettings.parse("local:qwen2.5-coder-1.5b"), 3))
    schema = {"type": "object", "required": ["names"], "properties": {"names": {
        "type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 60}}}}
    text = ("The Treaty of Westphalia was signed in Osnabrück and Münster by the Holy Roman Empire, "
            "the Kingdom of France and the Swedish Empire.")
    names = llm.json(None, "names", [{"role": "user", "content": f"List the three signatories named in: {text} "
                                     "Answer as JSON {\"names\": [...]}."}], schema, max_tokens=60)["names"]
    assert 1 <= len(names) <= 3 and all(isinstance(n, str) and n for n in names)
    assert any("France" in n or "Swedish" in n or "Roman" in n for n in names), names


def test_one_check_names_the_flag_or_the_variable_that_is_out_of_range(monkeypatch):
    from retrieval.core.errors import ConfigError

    monkeypatch.delenv("HOPTRACE_DRAFT_TOKENS", raising=False)
    local = LLMSettings.parse("local")
    for bad in (16, -1):
        with pytest.raises(ConfigError, match=r"--draft-tokens must be a whole number 0\.\.15"):
            extraction_settings(local, bad)
    monkeypatch.setenv("HOPTRACE_DRAFT_TOKENS", "16")
    with pytest.raises(ConfigError, match=r"HOPTRACE_DRAFT_TOKENS must be a whole number 0\.\.15, got '16'"):
        LLMSettings.parse("local")
    monkeypatch.setenv("HOPTRACE_DRAFT_TOKENS", "0")  # the variable, even at 0, wins over a build's default
    assert extraction_settings(LLMSettings.parse("local")).draft_tokens == 0
