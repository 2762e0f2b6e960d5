"""Plain-text rendering of stage records for the CLI (the web UI has its own renderer)."""
from __future__ import annotations

import json

from ..core.money import cost_text
from .model import RunResult, Stage


def _short(value, width: int = 110) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def render_stage(st: Stage) -> str:
    mark = {"ok": "✓", "empty": "∅", "error": "✗", "skipped": "–"}.get(st.status, "?")
    head = f"{mark} {st.name:<22} {st.latency_ms:>9.1f} ms  tok {st.tokens_in}/{st.tokens_out}  {st.title}"
    lines = [head]
    if st.message:
        lines.append(f"    {st.status}: {st.message}")
    for key, value in st.payload.items():
        if key == "traceback":
            continue
        if isinstance(value, list):
            lines.append(f"    {key} ({len(value)}): " + _short(value[:3]))
        else:
            lines.append(f"    {key}: {_short(value)}")
    for c in st.llm_calls:
        lines.append(f"    LLM {c.purpose or 'call'}: {c.model} · {c.tokens_in} in / {c.tokens_out} out · "
                     f"{c.latency_ms:.0f} "
                     f"ms{' · cached' if c.cached else ''}{' · error: ' + c.error if c.error else ''}")
    if st.subgraph and st.subgraph.nodes:
        lines.append(f"    subgraph: {len(st.subgraph.nodes)} nodes, {len(st.subgraph.edges)} edges")
    return "\n".join(lines)


def render_run(run: RunResult) -> str:
    lines = [f"\n{run.method}: {run.status}{' — ' + run.error if run.error else ''} · "
             f"{run.latency_ms:.1f} ms · tokens {run.tokens_in} in / {run.tokens_out} out"
             + (f" · {cost_text(run.cost)}" if run.cost else "")]
    if run.answer is not None:
        lines.append(f"answer: {run.answer}")
    for i, r in enumerate(run.ranked, 1):
        lines.append(f"{i:>3}. {r.score:>10.4f}  {r.title}  [{r.passage_id}]")
    return "\n".join(lines)
