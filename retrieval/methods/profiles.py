"""Profiles: each paper's hyperparameters (`paper`), or values chosen by measurement for a small
model on 2 CPU cores (`local`).

`paper` is every config dataclass's defaults. `local` overrides the few values that decide how
many tokens an LLM method reads and writes; the measured recall and time of both are in
docs/profiles.md. The embedded model runs `local` unless told otherwise, an endpoint runs
`paper`; `--profile` / HOPTRACE_PROFILE overrides. An LLM method's trace opens with a
`profile` stage naming the profile and every value that differs from the paper.

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
    # A read costs ~110 tokens a passage and ~15 a triple written (at ~22 tokens/s).
    "syncge": {"read_passages": 5, "read_max_words": 60, "max_triples": 4},
    "gear": {"agent_base_k": 5, "read_max_words": 60, "max_triples": 4, "reread": False,
             "read_expanded_max": 2, "reason_rewrite_joint": True, "max_iterations": 2},
    "grasp": {"evidence_max_words": 80, "max_observations": 2},
}


def resolve(profile: Optional[str], llm: Any) -> str:
    """The profile a run uses: the one asked for, else HOPTRACE_PROFILE, else by backend."""
    name = profile or os.environ.get("HOPTRACE_PROFILE") or ""
    if name:
        if name not in PROFILES:
            raise ConfigError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}")
        return name
    settings = getattr(llm, "settings", None)
    return "local" if getattr(settings, "backend", "") == "local" else "paper"


def settings_for(method: str, profile: str) -> dict[str, Any]:
    """The overrides a profile makes for a registered method."""
    return dict(LOCAL.get(method, {})) if profile == "local" else {}


def differences(config: Any, paper: Any) -> dict[str, list]:
    """{field: [paper value, this run's value]} for every field that differs."""
    return {f.name: [getattr(paper, f.name), getattr(config, f.name)] for f in fields(config)
            if getattr(config, f.name) != getattr(paper, f.name)}
