"""`hoptrace reproduce <paper>`: the rows of a paper's tables that HopTrace implements, run
on a KB with `run_bench`, printed beside the paper's figures, and the paper's qualitative
claims checked on our numbers question by question: *holds* (significant in the paper's
direction), *inconclusive* (the data cannot tell; with the questions the observed effect would
need) or *does not hold* (significant the other way) — bench/significance.py. Each claim is its
own test (no correction across claims), at α = 0.05."""
from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from ..core.errors import ConfigError
from ..core.records import Question
from ..methods import METHODS, Context, root_method
from . import protocol as how_asked
from .metrics import parse_metric, per_question_scores
from .paper_tables import PAPERS, SETTING, Claim, Evaluation, Row
from .runner import BenchResult, run_bench
from .significance import Paired, paired, verdict


@dataclass
class ClaimResult:
    text: str
    metric: str
    ours_better: Optional[float]
    ours_worse: Optional[float]
    paper_margin: Optional[float]
    strict: bool = True
    test: Optional[Paired] = None     # the paired test on the questions both rows ran

    @property
    def margin(self) -> Optional[float]:
        if self.ours_better is None or self.ours_worse is None:
            return None
        return round(self.ours_better - self.ours_worse, 4)

    @property
    def verdict(self) -> str:
        if self.test is None:
            return "not measured"
        return verdict(self.test)

    def evidence(self) -> str:
        """The figures behind the verdict, in words."""
        t = self.test
        if t is None or self.margin is None:
            return "not measured"
        paper = "" if self.paper_margin is None else f"; paper {self.paper_margin:+.3f}"
        out = (f"{_f(self.ours_better)} vs {_f(self.ours_worse)}: {self.margin:+.3f} [{t.low:+.3f}, {t.high:+.3f}], "
               f"p = {'<0.001' if t.p < 0.001 else f'{t.p:.3f}'}, {t.wins}/{t.ties}/{t.losses} win/tie/loss, "
               f"n = {t.n}{paper}")
        if self.verdict == "inconclusive":
            need = t.needed_questions()
            out += (f" — ~{need} questions would be needed at this effect and variance" if need
                    else " — no difference was observed")
            if not self.strict:
                out += "; a '≥' claim is not contradicted"
        return out

    def to_json(self) -> dict:
        return {"claim": self.text, "metric": self.metric, "ours_better": self.ours_better,
                "ours_worse": self.ours_worse, "margin": self.margin, "paper_margin": self.paper_margin,
                "verdict": self.verdict, "test": self.test.to_json() if self.test else None}


@dataclass
class Reproduction:
    paper: str
    title: str
    dataset: str
    kb: str
    n_questions: int
    metrics: list[str]
    rows: list[dict] = field(default_factory=list)      # {table, label, method, ours{}, paper{}, note}
    claims: list[ClaimResult] = field(default_factory=list)
    bench: Optional[BenchResult] = None
    protocol: str = "per-k"           # how every row was asked (the paper's, paper_tables.EVALUATION)
    ks: list[int] = field(default_factory=list)   # the cut-offs asked, the paper's deepest k among them
    profile: str = "paper"            # the profile the paper's rows ran on; rows marked ours set their own values
    evaluation: Optional[Evaluation] = None

    @property
    def deepest_k(self) -> int:
        return max(self.ks, default=0)

    def label(self, metric: str) -> str:
        """The metric with how its runs were asked: 'anyhit@5 (top 5 of k=10)'."""
        return how_asked.label(metric, self.protocol, self.deepest_k)

    def to_json(self) -> dict:
        return {"paper": self.paper, "title": self.title, "dataset": self.dataset, "kb": self.kb,
                "n_questions": self.n_questions, "metrics": self.metrics, "rows": self.rows,
                "protocol": self.protocol, "ks": self.ks, "deepest_k": self.deepest_k, "profile": self.profile,
                "evaluation": self.evaluation.__dict__ if self.evaluation else None,
                "claims": [c.to_json() for c in self.claims],
                "bench": self.bench.to_json(include_per_question=False) if self.bench else None}


def dataset_of(ctx: Context) -> str:
    """Which paper column a KB answers to: its dataset, or MuSiQue for the demo KB."""
    meta = ctx.store.info().meta
    name = str(meta.get("dataset") or meta.get("name") or "").lower()
    for d in ("musique", "2wiki", "hotpotqa"):
        if d in name:
            return d
    return "musique" if name == "demo" else name or "unknown"


def uses_llm(row: Row) -> bool:
    """Whether the row's method asks an LLM (the methods say so themselves)."""
    return METHODS[root_method(row.method)].uses_llm


def select_rows(paper: str, include_llm: bool = True) -> list[Row]:
    if paper not in PAPERS:
        raise ConfigError(f"unknown paper {paper!r}; choose one of {', '.join(PAPERS)}")
    return [r for r in PAPERS[paper]["rows"] if include_llm or not uses_llm(r)]


def paper_ks(rows: Sequence[Row], evaluation: Evaluation) -> list[int]:
    """The cut-offs the rows' figures are at, and the paper's deepest k where its protocol slices."""
    ks = {parse_metric(m)[1] for r in rows for d in r.paper.values() for m in d if "@" in m}
    return sorted(ks | ({evaluation.deepest_k} if evaluation.deepest_k else set()))


def reproduce(ctx: Context, kb_label: str, questions: Sequence[Question], paper: str, progress: bool = True,
              include_llm: bool = True, llm_limit: Optional[int] = None,
              dataset: Optional[str] = None, sink=None) -> Reproduction:
    """LLM-free rows run on every question; LLM rows on the first `llm_limit`. A claim that
    compares an LLM row with an LLM-free one is judged on the questions both ran. Every row is
    asked as the paper asks (its protocol, paper_tables.EVALUATION), on the paper's profile unless
    `ctx.profile` names another; a row marked ours sets its own values on top."""
    rows = select_rows(paper, include_llm)
    evaluation: Evaluation = PAPERS[paper]["evaluation"]
    dataset = dataset or dataset_of(ctx)
    metrics = sorted({m for r in rows for d in r.paper.values() for m in d},
                     key=lambda m: (m == "em", int(m.split("@")[1]) if "@" in m else 0))
    ks = paper_ks(rows, evaluation)
    profile = ctx.profile or "paper"
    groups = {False: [r for r in rows if not uses_llm(r)], True: [r for r in rows if uses_llm(r)]}
    qsets = {False: list(questions), True: list(questions)[:llm_limit] if llm_limit else list(questions)}
    results: dict[bool, BenchResult] = {}
    for llm, group in groups.items():
        specs = {r.key: (r.method, {"profile": profile, **dict(r.settings)}) for r in group}
        if specs:
            results[llm] = run_bench(ctx, kb_label, qsets[llm], list(specs), ks=ks, protocol=evaluation.protocol,
                                     progress=progress, specs=specs, sink=sink)
    n = len(qsets[False]) if groups[False] else len(qsets[True])
    out = Reproduction(paper, PAPERS[paper]["title"], dataset, kb_label, n, metrics,
                       bench=results.get(False) or results.get(True), protocol=evaluation.protocol,
                       ks=ks, profile=profile, evaluation=evaluation)
    by_label: dict[str, dict] = {}
    for r in rows:
        res = results[uses_llm(r)]
        summary = res.methods[r.key]
        row = {"table": r.table, "label": r.label, "method": r.key, "questions": res.n_questions,
               "ours": {m: summary.get(m) for m in metrics}, "paper": r.paper.get(dataset, {}), "note": r.note,
               "hoptrace_choice": r.ours,
               "latency_ms_p50": summary.get("latency_ms_p50"),
               "tokens_per_question": summary.get("tokens_per_question")}
        out.rows.append(row)
        by_label[r.label] = row
    common = {q.id for q in qsets[True]}
    for c in PAPERS[paper]["claims"]:
        out.claims.append(_check(c, by_label, results, common))
    return out


def _scores(results: dict[bool, BenchResult], label: str, metric: str) -> dict[str, float]:
    for r in results.values():
        if label in r.methods:
            return per_question_scores([q for q in r.per_question if q.method == label], metric).get(label, {})
    return {}


def _check(c: Claim, rows: dict[str, dict], results: dict[bool, BenchResult], common: set[str]) -> ClaimResult:
    """The claim on the questions both rows ran (an LLM row may have run on fewer: --limit)."""
    better, worse = rows.get(c.better), rows.get(c.worse)
    pm = c.paper_margin
    if better and worse and pm is None:
        pb, pw = better["paper"].get(c.metric), worse["paper"].get(c.metric)
        if pb is not None and pw is not None:
            pm = round(pb - pw, 4)
    if not (better and worse):
        return ClaimResult(c.text, c.metric, None, None, pm, c.strict)
    sb, sw = _scores(results, better["method"], c.metric), _scores(results, worse["method"], c.metric)
    qids = [q for q in sb if q in sw]
    if not qids:
        return ClaimResult(c.text, c.metric, None, None, pm, c.strict)
    test = paired(better["method"], [sb[q] for q in qids], worse["method"], [sw[q] for q in qids])
    ob = round(sum(sb[q] for q in qids) / len(qids), 4)
    ow = round(sum(sw[q] for q in qids) / len(qids), 4)
    return ClaimResult(c.text, c.metric, ob, ow, pm, c.strict, test)


def _f(v) -> str:
    return "—" if v is None else f"{v:.3f}"


def render(rep: Reproduction) -> str:
    short = {m: "EM" if m == "em" else m for m in rep.metrics}
    head = (["table", "row (method)", "n"] + [f"{rep.label(short[m])} ours | paper" for m in rep.metrics]
            + ["ms p50"])
    lines = [head]
    for r in rep.rows:
        lines.append([r["table"], f"{r['label']} ({r['method']})" + (" [ours]" if r.get("hoptrace_choice") else ""),
                      str(r["questions"])]
                     + [f"{_f(r['ours'].get(m))} | {_f(r['paper'].get(m))}" for m in rep.metrics]
                     + ["—" if r["latency_ms_p50"] is None else f"{r['latency_ms_p50']:.0f}"])
    widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
    text = [f"{rep.title} — reproduced on KB {rep.kb} ({rep.n_questions} questions); paper column: {rep.dataset}"]
    text += _evaluation_lines(rep)
    text += ["  ".join(h.ljust(w) for h, w in zip(head, widths)), "  ".join("-" * w for w in widths)]
    text += ["  ".join(c.ljust(w) for c, w in zip(x, widths)) for x in lines[1:]]
    notes = [f"- {r['label']}: {r['note']}" for r in rep.rows if r["note"]]
    text += ["", "notes:", f"- {SETTING}"] + notes
    text += ["", "claims (paired randomization test on the questions both rows ran, two-sided, α = 0.05; "
                 "[95 % interval of the difference]):"]
    for c in rep.claims:
        mark = MARKS[c.verdict]
        text.append(f"{mark} {c.verdict:13s} {c.text}: {c.evidence()}")
    return "\n".join(text)


def _evaluation_lines(rep: Reproduction) -> list[str]:
    """The paper's measure and protocol, and the profile, said before any figure."""
    e = rep.evaluation
    if e is None:
        return [f"{how_asked.sentence(rep.protocol, rep.ks)}; profile {rep.profile}"]
    measure = {"recall": "recall@k = the share of a question's gold passages in its top k",
               "anyhit": "anyhit@k = 1 when at least one gold passage is in the top k"}[e.measure]
    return [f"measure: {measure} — the paper's ({e.definition_from}: {e.definition})",
            f"{how_asked.sentence(rep.protocol, rep.ks)} — the paper's ({e.protocol_from})",
            f"profile: {rep.profile} for the paper's rows; a row in table 'HopTrace' is our choice, marked ours",
            ""]


MARKS = {"holds": "✓", "does not hold": "✗", "inconclusive": "~", "not measured": "?"}


def figure(rep: Reproduction):
    """One grouped bar chart per metric: ours beside the paper's, row by row."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    ms = [m for m in rep.metrics if any(r["ours"].get(m) is not None for r in rep.rows)]
    fig = make_subplots(rows=len(ms) or 1, cols=1, subplot_titles=[rep.label(m) for m in ms] or ["no metric"])
    labels = [r["label"] for r in rep.rows]
    for i, m in enumerate(ms, start=1):
        fig.add_trace(go.Bar(name="ours", x=labels, y=[r["ours"].get(m) for r in rep.rows], marker_color="#2563eb",
                             showlegend=i == 1), i, 1)
        fig.add_trace(go.Bar(name="paper", x=labels, y=[r["paper"].get(m) for r in rep.rows], marker_color="#a1a1aa",
                             showlegend=i == 1), i, 1)
    fig.update_layout(barmode="group", height=320 * max(1, len(ms)), title=f"{rep.title}: ours vs paper")
    return fig


def write_html(rep: Reproduction, path: Path) -> None:
    """A self-contained report: the table, the claims and the charts, plotly inlined so it
    opens offline."""
    fig = figure(rep)
    esc = html.escape
    claims = "".join(f"<li><b>{esc(c.verdict)}</b> — {esc(c.text)}: {esc(c.evidence())}</li>" for c in rep.claims)
    page = (f"<!doctype html><meta charset='utf-8'><title>{esc(rep.title)} reproduced</title>"
            f"<h1>{esc(rep.title)} — reproduced on {esc(rep.kb)}</h1>"
            f"<p>{rep.n_questions} questions; paper column: {esc(rep.dataset)}</p>"
            f"<pre>{esc(render(rep))}</pre><h2>Claims</h2><ul>{claims}</ul>"
            + fig.to_html(include_plotlyjs=True, full_html=False))
    path.write_text(page)


def write_json(rep: Reproduction, path: Path) -> None:
    path.write_text(json.dumps(rep.to_json(), indent=1, default=str))
