"""Where the gold is lost across a data set: an experiment's per-run gold presence
(retrieval/trace/gold.py `gold_presence`, stored with each run) summed stage by stage, and a metric
broken down by question group (MuSiQue's hop count, 2Wiki's question type).

A gold passage is *held* at a stage when it is between the first and the last stage of that
run that listed it (a stage in between that lists no passages, a clause split, does not drop
it). It is *lost* at the last stage that held it when it did not reach the top k; a gold
passage ranked below k is lost at the cut-off.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Sequence

NEVER = "never retrieved"
CUT = "below the top k"


@dataclass
class FunnelStep:
    stage: str
    held: float          # share of all gold passages held at this stage
    lost_here: int       # gold passages whose last holder this was, that missed the top k


@dataclass
class Funnel:
    method: str
    k: int
    n_runs: int
    n_gold: int
    steps: list[FunnelStep] = field(default_factory=list)
    in_top_k: float = 0.0
    cut: int = 0          # held by the final ranking, ranked below k
    never: int = 0        # listed by no stage at all

    def to_json(self) -> dict:
        return {"method": self.method, "k": self.k, "runs": self.n_runs, "gold": self.n_gold,
                "in_top_k": self.in_top_k, "below_k": self.cut, "never_retrieved": self.never,
                "steps": [s.__dict__ for s in self.steps]}


def stage_order(sequences: Iterable[Sequence[str]]) -> list[str]:
    """One order of stage names for runs whose stages vary (iterations, rounds, skipped steps):
    each new name goes right after the name that preceded it in the run that showed it."""
    order: list[str] = []
    for seq in sequences:
        prev = None
        for name in seq:
            if name not in order:
                order.insert(order.index(prev) + 1 if prev in order else len(order), name)
            prev = name
    return order


def funnel(method: str, entries: Sequence[dict], k: int) -> Funnel:
    """`entries`: one method's experiment rows at the k to read (each with its `fates`)."""
    runs = [e["fates"] for e in entries if e.get("fates")]
    order = stage_order(r["stages"] for r in runs)
    pos = {name: i for i, name in enumerate(order)}
    held = [0] * len(order)
    lost: dict[str, int] = defaultdict(int)
    n_gold = in_top = 0
    for r in runs:
        for fate in r["gold"].values():
            n_gold += 1
            seen = sorted(pos[r["stages"][i]] for i in fate["seen"])
            if seen:
                for p in range(seen[0], seen[-1] + 1):
                    held[p] += 1
            rank = fate.get("rank")
            if rank is not None and rank <= k:
                in_top += 1
            elif rank is not None:
                lost[CUT] += 1
            elif seen:
                lost[order[seen[-1]]] += 1
            else:
                lost[NEVER] += 1
    out = Funnel(method, k, len(runs), n_gold, in_top_k=round(in_top / n_gold, 4) if n_gold else 0.0,
                 cut=lost.pop(CUT, 0), never=lost.pop(NEVER, 0))
    for i, name in enumerate(order):
        if held[i] or lost.get(name):
            out.steps.append(FunnelStep(name, round(held[i] / n_gold, 4) if n_gold else 0.0, lost.get(name, 0)))
    return out


def losses(fates: dict, k: int) -> list[str]:
    """One run's gold passages that missed the top k, each by where it was lost."""
    out = []
    for fate in fates["gold"].values():
        rank = fate.get("rank")
        if rank is not None and rank <= k:
            continue
        if rank is not None:
            out.append(CUT)
        elif fate["seen"]:
            out.append(fates["stages"][max(fate["seen"])])
        else:
            out.append(NEVER)
    return out


def breakdown(scores: dict[str, dict[str, float]], questions: Sequence[dict], by: str) -> dict[str, dict[str, dict]]:
    """{method: {group: {"mean", "n"}}} with questions grouped by `by` ("hops" or "type"); an
    empty dict when no question has that field."""
    group = {q["id"]: q.get(by) for q in questions if q.get(by) not in (None, "")}
    if not group:
        return {}
    out: dict[str, dict[str, dict]] = {}
    for method, per_q in scores.items():
        acc: dict[str, list[float]] = defaultdict(list)
        for qid, v in per_q.items():
            if qid in group:
                acc[str(group[qid])].append(v)
        out[method] = {g: {"mean": round(sum(v) / len(v), 4), "n": len(v)}
                       for g, v in sorted(acc.items(), key=lambda kv: _group_key(kv[0]))}
    return out


def _group_key(g: str):
    return (0, int(g), "") if g.isdigit() else (1, 0, g)


def render_funnel(f: Funnel, metric_name: str = "top", what: str = "gold passages") -> str:
    w = max([len(s.stage) for s in f.steps] + [len(NEVER), len(CUT)])
    lines = [f"{f.method}: {f.n_gold} {what} in {f.n_runs} runs · in the top {f.k}: {f.in_top_k:.3f}",
             f"  {'stage'.ljust(w)}  held   last held (then missed the top {f.k})"]
    for s in f.steps:
        lines.append(f"  {s.stage.ljust(w)}  {s.held:5.3f}  {s.lost_here or ''}")
    if f.cut:
        lines.append(f"  {CUT.ljust(w)}         {f.cut}")
    if f.never:
        lines.append(f"  {NEVER.ljust(w)}         {f.never}")
    return "\n".join(lines)


def funnel_figure(funnels: Sequence[Funnel], what: str = "gold passages"):
    """One panel a method: the share of gold held after each stage, the passages lost there in
    the hover text, and the top-k share as the last bar."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    funnels = list(funnels)
    cols = max(1, min(3, len(funnels)))
    rows = max(1, -(-len(funnels) // cols))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f.method for f in funnels],
                        horizontal_spacing=0.16, vertical_spacing=0.08)
    for i, f in enumerate(funnels):
        r, c = i // cols + 1, i % cols + 1
        names = [s.stage for s in f.steps] + [f"top {f.k}"]
        held = [s.held for s in f.steps] + [f.in_top_k]
        lost = [s.lost_here for s in f.steps] + [f.cut]
        # The trace is named for its method: a click on a bar lists the questions that lost the gold
        # at that stage (ui/tabs/experiment.py).
        fig.add_trace(go.Bar(x=held, y=names, orientation="h", showlegend=False, name=f.method, marker_color=[
            "#dc2626" if n else "#2563eb" for n in lost[:-1]] + ["#16a34a"], customdata=lost,
            hovertemplate="%{y}: %{x:.1%} of gold held · %{customdata} last held here, then lost<extra></extra>"),
            r, c)
        fig.update_yaxes(autorange="reversed", row=r, col=c)
        fig.update_xaxes(range=[0, 1], tickformat=".0%", row=r, col=c)
    per_row = 22 * max([len(f.steps) + 1 for f in funnels] or [1]) + 60
    fig.update_layout(height=max(320, rows * per_row + 60),
                      title=("Where the gold is lost" if what == "gold passages" else f"Where the {what} are lost")
                      + f": share of {what} held after each stage (red: the last stage to hold some that then "
                        "missed the top k; green: in the top k)",
                      margin=dict(l=10, r=10, t=70, b=10))
    return fig


def breakdown_figure(groups: dict[str, dict[str, dict]], metric: str, by: str):
    import plotly.graph_objects as go

    fig = go.Figure()
    for method, per_group in groups.items():
        fig.add_trace(go.Bar(name=method, x=[f"{by} {g} (n={v['n']})" for g, v in per_group.items()],
                             y=[v["mean"] for v in per_group.values()]))
    fig.update_layout(barmode="group", height=320, yaxis_title=metric, title=f"{metric} by {by}",
                      margin=dict(l=10, r=10, t=50, b=10))
    return fig


def entries_at(entries: Sequence[dict], method: str, k: int) -> list[dict]:
    """A method's rows read at k: its runs made at k if it ran once per k, else its one run per question."""
    mine = [e for e in entries if e["method"] == method]
    at = [e for e in mine if e["k"] == k]
    if at:
        return at
    top = max((e["k"] for e in mine), default=None)
    return [e for e in mine if e["k"] == top]


def pick_k(metric_k: int, ks: Sequence[int], default: int = 5) -> int:
    """The k a funnel reads: the metric's own, else the headline 5 if measured, else the largest."""
    if metric_k:
        return metric_k
    return default if default in ks else (max(ks) if ks else default)

