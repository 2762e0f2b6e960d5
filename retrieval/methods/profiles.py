"""Profiles: each paper's hyperparameters (`paper`), or HopTrace's own choices made by
measurement (`local`).

`paper` is every config dataclass's defaults: what the paper states, and where it is silent a
value marked ours on the config field. `local` overrides the few values that decide how many
tokens an LLM method reads and writes on a small model on 2 CPU cores, and GRIEVER's final
ranking for LLM-free triples (docs/griever.md); the measured recall and time of both are in
docs/profiles.md. An LLM method runs `local` on the embedded model and `paper` on an endpoint;
an LLM-free method runs `local` whatever the backend (no model's speed is at stake, and its
local values were chosen on other questions than the demo's, docs/griever.md). `--profile` /
HOPTRACE_PROFILE overrides both. A trace opens with a `profile` stage naming the profile and
every value that differs from the paper.

Precedence, weakest first: profile → named variant (e.g. `sag_h0`) → `--set` overrides.
"""
from __future__ import annotations

import os
from dataclasses import fields
from typing import Any, Optional

from ..core.errors import ConfigError

PROFILES = ("paper", "local")

# Keyed by registered method (variants inherit their base's). Each value is chosen in
# docs/profiles.md; the reason a knob exists is on its config field.
LOCAL: dict[str, dict[str, Any]] = {
    # The rerank prompt is ~45 tokens an event at the paper's settings: K_cand = 100 is ~4.4k
    # tokens, over a minute at ~60 prompt tokens/s; 20 short events with no entity list are
    # ~0.9k (the summaries name their entities).
    "sag": {"k_cand": 20, "rerank_entities": 0, "event_max_words": 20},
    # A read costs ~110 tokens a passage and ~15 a triple written (at ~22 tokens/s). Beam search
    # scores a triple sequence by its stored triple vectors, not by encoding its text (Algorithm 1):
    # milliseconds against seconds a question on 2 cores (docs/gear.md).
    "naivege": {"sequence_scoring": "vector_mean"},
    "syncge": {"read_passages": 5, "read_max_words": 60, "max_triples": 4, "sequence_scoring": "vector_mean"},
    "gear": {"agent_base_k": 5, "read_max_words": 60, "max_triples": 4, "reread": False,
             "read_expanded_max": 2, "reason_rewrite_joint": True, "max_iterations": 2,
             "sequence_scoring": "vector_mean"},
    "grasp": {"evidence_max_words": 80, "max_observations": 2},
    # §4.4 ranks by the passage score alone; with LLM-free triples that lost to GRIEVER's own first
    # hop (docs/griever.md). Ours adds the retrieval cosine (§4.2.2 allows it); the weight was
    # chosen on the bundled HotpotQA and 2Wiki questions, never on the demo's it is scored on.
    "griever": {"final_ranking": "retrieval+paths", "path_weight": 0.25},
}


def resolve(profile: Optional[str], llm: Any, uses_llm: bool = True) -> str:
    """The profile a run uses: the one asked for, else HOPTRACE_PROFILE, else `local` for an
    LLM-free method and by backend for an LLM method."""
    name = profile or os.environ.get("HOPTRACE_PROFILE") or ""
    if name:
        if name not in PROFILES:
            raise ConfigError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}")
        return name
    if not uses_llm:
        return "local"
    settings = getattr(llm, "settings", None)
    return "local" if getattr(settings, "backend", "") == "local" else "paper"


def settings_for(method: str, profile: str) -> dict[str, Any]:
    """The overrides a profile makes for a registered method."""
    return dict(LOCAL.get(method, {})) if profile == "local" else {}


def differences(config: Any, paper: Any) -> dict[str, list]:
    """{field: [paper value, this run's value]} for every field that differs."""
    return {f.name: [getattr(paper, f.name), getattr(config, f.name)] for f in fields(config)
            if getattr(config, f.name) != getattr(paper, f.name)}
