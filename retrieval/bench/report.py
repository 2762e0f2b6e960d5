"""Bench output: the JSON the issue specifies, a CSV of the summary table, and a plotly report."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from . import protocol as how_asked
from .runner import KS, BenchResult

COLUMNS = [f"{m}@{k}" for m in ("recall", "anyhit", "allhit") for k in KS] + [
    "latency_ms_p50", "latency_ms_p95", "retrieval_ms_p50", "retrieval_ms_p95", "answer_ms_p50", "tokens_in",
    "tokens_out", "errors", "em", "f1", "usd_per_question", "cpu_s_per_question"]


def _columns(res: BenchResult) -> list[str]:
    """The fixed columns, then what this benchmark added: spreads, stability, the budget measure."""
    extra = sorted({c for r in res.methods.values() for c in r
                    if c not in COLUMNS and (c.endswith("_sd") or c.startswith(("stable@", "recall@", "passages@")))})
    return COLUMNS + extra


def write_json(res: BenchResult, path: Path) -> None:
    path.write_text(json.dumps(res.to_json(), indent=1))


def write_csv(res: BenchResult, path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        cols = _columns(res)
        w.writerow(["method"] + cols)
        for name, row in res.methods.items():
            w.writerow([name] + [row.get(c) for c in cols])


def _cell(r: dict, c: str) -> str:
    """A measure, "± sd" over repetitions where there were any; money as dollars or "price unknown"."""
    if c == "usd_per_question":
        from ..llm.prices import usd_text

        return usd_text(r.get(c)) if c in r else ""
    v = r.get(c)
    if v is None:
        return ""
    sd = r.get(f"{c}_sd")
    return f"{v}±{sd}" if sd is not None else f"{v}"


def table(res: BenchResult, columns: list[str] | None = None) -> str:
    ks = sorted({int(c.split("@")[1]) for r in res.methods.values() for c in r
                 if c.startswith("recall@") and c.split("@")[1].isdigit()})
    hits = [f"anyhit@{k}" for k in (2, 5) if k in ks]
    # Without gold (a question set) there is no hit rate: no empty column for it.
    allhit = ["allhit@5"] if any("allhit@5" in r for r in res.methods.values()) else []
    has = lambda c: any(c in r for r in res.methods.values())  # noqa: E731
    budget = [c for c in (f"recall@{res.budget}tok", f"passages@{res.budget}tok") if res.budget and has(c)]
    cols = columns or ([f"recall@{k}" for k in ks] + budget + hits + allhit
                       + [c for c in ("stable@5", "em", "f1", "usd_per_question", "cpu_s_per_question") if has(c)]
                       + ["latency_ms_p50", "latency_ms_p95", "tokens_per_question"]
                       + [c for c in ("retrieval_ms_p50", "retrieval_ms_p95", "answer_ms_p50", "C_w",
                                      "plan_hop_accuracy") if has(c)])
    deepest = max(res.ks)
    head = [how_asked.label(c, res.protocol, deepest) for c in cols]
    rows = [["method"] + head] + [[n] + [_cell(r, c) for c in cols] for n, r in res.methods.items()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(0, how_asked.sentence(res.protocol, res.ks))
    lines.insert(2, "  ".join("-" * w for w in widths))
    if any(f"{c}_sd" in r for r in res.methods.values() for c in cols):
        lines.append(f"± : the standard deviation of the {res.repeat} repetitions' means")
    return "\n".join(lines)


def write_html(res: BenchResult, path: Path) -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = list(res.methods)
    deepest = max(res.ks)
    fig = make_subplots(rows=1, cols=2, subplot_titles=(f"recall@k · {res.protocol}", "latency p50 / p95 (ms)"))
    for k in KS:
        if all(f"recall@{k}" in res.methods[n] for n in names):
            fig.add_trace(go.Bar(name=how_asked.label(f"recall@{k}", res.protocol, deepest), x=names,
                                 y=[res.methods[n][f"recall@{k}"] for n in names]), 1, 1)
    for key in ("latency_ms_p50", "latency_ms_p95"):
        fig.add_trace(go.Bar(name=key, x=names, y=[res.methods[n][key] for n in names]), 1, 2)
    pause = f", {res.pause_ms:g} ms idle before each (untimed)" if res.pause_ms else ""
    fig.update_layout(title=f"HopTrace bench: {res.kb}, {res.n_questions} questions{pause} · "
                            f"{how_asked.sentence(res.protocol, res.ks)}", barmode="group")
    path.write_text(fig.to_html(include_plotlyjs=True, full_html=True))
