"""What both GRASP settings (agentic and single pass) check before they run: the vote and the
kind of propositions the KB holds."""
from __future__ import annotations

from ...core.errors import ConfigError
from .config import GraspConfig

VOTES = ("rankvote", "uniform")


def check_vote(cfg: GraspConfig) -> None:
    if cfg.vote not in VOTES:
        raise ConfigError(f"grasp vote must be one of {VOTES}, got {cfg.vote!r}")


def proposition_source(ctx) -> str:
    """What the KB's propositions are (GRASP Table 2 compares sentences with propositions)."""
    tags = sorted({e["extractor"] for e in ctx.store.info().extraction
                   if e["layer"] == "propositions" and e["status"] == "done"})
    kinds = []
    for t in tags:
        if t.startswith("openie-import") and t.endswith(":verbalised"):
            kinds.append("imported OpenIE triples, verbalised (atomic, entity-linked)")
        elif t.startswith("rules"):
            kinds.append("sentences (LLM-free rules extractor: Table 2's sentences row)")
        elif t.startswith("llm"):
            kinds.append("LLM-made propositions (§3.1)")
        else:
            kinds.append(t)
    return "; ".join(kinds) or "unknown"
