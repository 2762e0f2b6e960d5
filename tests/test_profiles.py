"""Profiles (methods/profiles.py): which one a run gets, and that its values reach the stages
and the trace. The LLM is a scripted test double (tests/llm_double.py)."""
import dataclasses
import json

import pytest
from llm_double import scripted_llm

from retrieval.core.errors import ConfigError
from retrieval.llm import LLMSettings
from retrieval.methods import make_method, profiles

Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


class _Embedded:
    settings = LLMSettings(backend="local")


def test_the_embedded_model_gets_local_an_endpoint_paper_and_a_flag_wins(monkeypatch):
    monkeypatch.delenv("HOPTRACE_PROFILE", raising=False)
    assert profiles.resolve(None, _Embedded()) == "local"
    assert profiles.resolve(None, object()) == "paper"
    assert profiles.resolve("paper", _Embedded()) == "paper"
    monkeypatch.setenv("HOPTRACE_PROFILE", "paper")
    assert profiles.resolve(None, _Embedded()) == "paper"
    with pytest.raises(ConfigError, match="unknown profile 'fast'"):
        profiles.resolve("fast", None)


def test_precedence_is_profile_then_variant_then_overrides(ctx):
    llm, _ = scripted_llm({})
    c = dataclasses.replace(ctx, llm=llm, profile="local")
    assert make_method("sag", c).config.k_cand == profiles.LOCAL["sag"]["k_cand"]
    assert make_method("sag_h0", c).config.hops == 0                      # the variant's own setting
    assert make_method("sag_h0", c).config.k_cand == profiles.LOCAL["sag"]["k_cand"]  # profile still applies
    assert make_method("sag", c, k_cand=7).config.k_cand == 7             # --set wins
    assert make_method("sag", dataclasses.replace(c, profile="paper")).config.k_cand == 100
    assert make_method("bm25", c).profile == "paper"                      # LLM-free methods have no profile


def test_local_profile_values_reach_the_stages_and_the_trace(ctx):
    ents = json.dumps({"entities": [{"name": "Journal of Psychotherapy Integration", "type": "work"}]})
    llm, backend = scripted_llm({"query entities": [ents], "rerank": [json.dumps({"selected": [1]})]})
    run = make_method("sag", dataclasses.replace(ctx, llm=llm, profile="local")).run(Q, k=5)
    assert run.status == "ok", run.error
    first = run.stages[0]
    assert first.name == "profile" and first.payload["profile"] == "local"
    diff = first.payload["differs_from_paper"]
    assert diff["k_cand"] == {"paper": 100, "this_run": profiles.LOCAL["sag"]["k_cand"]}
    assert "k_cand = 20 (paper 100)" in first.message
    assert run.config["profile"] == "local" and run.config["k_cand"] == 20
    # The rerank prompt lists at most K_cand events, each with at most 3 entity names.
    prompt = dict(backend.requests)["rerank"][1]["content"]
    events = [line for line in prompt.splitlines() if line.startswith("[")]
    assert 0 < len(events) <= 20
    assert all(line.count(";") <= 2 for line in events)
    st = {s.name: s for s in run.stages}
    assert st["coarse_rank"].payload["kept"] <= 20


def test_paper_profile_lists_no_difference(ctx):
    llm, _ = scripted_llm({"query entities": ['{"entities": []}'], "rerank": ['{"selected": []}']})
    run = make_method("sag", dataclasses.replace(ctx, llm=llm, profile="paper")).run(Q, k=5)
    assert run.stages[0].payload == {"profile": "paper", "differs_from_paper": {}}
