"""Prompt-lookup drafts (retrieval/llm/lookup.py): what is guessed, when they are on, and that a
real model under a grammar still writes valid JSON with them."""
from __future__ import annotations

import os

import numpy as np
import pytest

from retrieval.kb.extract.llm import BUILD_DRAFT_TOKENS, extraction_settings
from retrieval.llm import LLMSettings
from retrieval.llm.backends import EmbeddedLlamaCpp, server_threads
from retrieval.llm.lookup import IM_START, PromptLookupDraft


def ids(*parts: list[int]) -> np.ndarray:
    return np.array([t for p in parts for t in p], dtype=np.intc)


SYSTEM = [IM_START, 1, 50, 51, 52, 53, 54]  # the system message mentions 50 51 -> 52 53 54
USER = [IM_START, 2, 10, 50, 51, 60, 61, 62, 63]  # the passage continues 50 51 with 60 61 62


def test_draft_copies_the_most_recent_continuation_after_the_system_message():
    d = PromptLookupDraft(num_pred_tokens=3)
    reply = [IM_START, 3, 50, 51]
    assert d(ids(SYSTEM, USER, reply)).tolist() == [60, 61, 62]
    # The same two tokens written earlier in the reply, followed by 70: the newest wins.
    reply = [IM_START, 3, 50, 51, 70, 9, 50, 51]
    assert d(ids(SYSTEM, USER, reply)).tolist() == [70, 9, 50]


def test_longest_suffix_first_and_nothing_when_nothing_matches():
    d = PromptLookupDraft(num_pred_tokens=2)
    # Suffix (7, 51): only 51 matches, after 50 in the passage -> 60 61.
    assert d(ids(SYSTEM, USER, [IM_START, 3, 7, 51])).tolist() == [60, 61]
    # Suffix (50, 51, 60) matches in full: its continuation, not 51's.
    assert d(ids(SYSTEM, USER, [IM_START, 3, 50, 51, 60])).tolist() == [61, 62]
    assert d(ids(SYSTEM, USER, [IM_START, 3, 99])).tolist() == []
    assert PromptLookupDraft(num_pred_tokens=0)(ids(SYSTEM, USER, [IM_START, 3, 50, 51])).tolist() == []


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


def test_the_server_command_asks_for_drafts_only_when_on(monkeypatch):
    monkeypatch.delenv("HOPTRACE_DRAFT_TOKENS", raising=False)
    pytest.importorskip("llama_cpp")
    try:
        off = EmbeddedLlamaCpp(LLMSettings.parse("local")).server_command()
    except Exception as e:  # no model file on this machine
        pytest.skip(str(e))
    on = EmbeddedLlamaCpp(extraction_settings(LLMSettings.parse("local"), 4)).server_command()
    assert "--draft_model" not in off
    assert off[off.index("--n_threads") + 1] == off[off.index("--n_threads_batch") + 1] == str(server_threads())
    i = on.index("--draft_model")
    assert on[i + 1:i + 4] == ["prompt-lookup-decoding", "--draft_model_num_pred_tokens", "4"]


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
