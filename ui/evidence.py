"""The Benchmark tab's experiments: list them, compare two methods question by question, and
open a question's two stored runs side by side. Renders what traces/stats/compare.py computes; no
Gradio here, so the handlers in ui/tabs/benchmark.py stay thin and this stays testable."""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional

from retrieval.core.errors import HopTraceError, InputError
from traces.judging.judged import judged_for
from traces.judging.qrels import Qrels
from traces.stats.compare import Comparison, compare, means_figure, question_runs
from traces.stats.funnel import breakdown_figure, funnel_figure
from traces.stats.judged_measures import is_judged_metric
from traces.storage.experiments import Experiment, Experiments

from . import render

ROW_COLUMNS = ["question id", "question", "hops", "A", "B", "A − B", "A lost the gold at", "B lost the gold at"]
ROW_WIDTHS = ["13%", "35%", "5%", "6%", "6%", "7%", "14%", "14%"]


class ComparisonCache:
    """compare() resamples every pair (~0.1 s each), and a judged metric reads every run to follow
    the judged-relevant passages; a visitor switching the two methods of the same experiment and
    metric, or opening a question's runs, must not pay it again. Keyed by (experiment, metric),
    and for a judged metric by whose judgments and their state, which changes with every grade; a
    running experiment is not cached, its runs are still coming (a paused one is: nothing
    comes until its next sitting, which installs it anew)."""

    def __init__(self, size: int = 16):
        self._items: OrderedDict[tuple, Comparison] = OrderedDict()
        self._lock = threading.Lock()
        self.size = size

    def get(self, experiments: Experiments, exp: Experiment, metric: str, owner: str = "") -> Comparison:
        judged = is_judged_metric(metric)
        key = (exp.id, metric) + ((owner, Qrels(experiments.traces).stamp(exp.id, owner)) if judged else ())
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        c = compare(experiments, exp, metric, qrels=judged_for(experiments.traces, exp, owner) if judged else None)
        if exp.status != "running":
            with self._lock:
                self._items[key] = c
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
        return c


@dataclass
class ExperimentView:
    """Everything the tab shows of one experiment, two of its methods and a metric."""
    exp: Experiment
    metric: str
    a: str
    b: str
    summary_html: str
    means_fig: object
    funnel_fig: object
    groups_fig: Optional[object]
    rows: list[list]
    tradeoff_fig: Optional[object] = None
    splits: list = None          # (label, value) of the answer split's cells, for the rows' filter


ALL_QUESTIONS = "all"

def choices(experiments: Experiments, owner: Optional[str]) -> list[tuple[str, str]]:
    return [(e.describe(), e.id) for e in experiments.list(owner=owner)]


def find(experiments: Experiments, exp_id: str, owner: Optional[str]) -> Experiment:
    """The experiment a visitor may open: locally any (a prefix will do); in public mode one of
    theirs, or one whose whole id they hold (a link, as for sessions)."""
    if not exp_id:
        raise InputError("pick an experiment")
    return experiments.get(exp_id, owner=owner)


JUDGED_METRICS = ["ndcg@5", "p@5", "jrecall@5", "judged@5", "ndcg@10", "p@10", "jrecall@10", "judged@10"]


def metrics(experiments: Experiments, exp: Experiment, owner: str = "") -> list[str]:
    """What the experiment can be compared on: its gold metrics where its questions have gold, and
    the judged ones once it has judgments (against no more than the ks it ranked to)."""
    has_gold = any(q.get("gold") for q in exp.questions)
    out = [m for m in exp.metrics() if has_gold or m.split("@")[0] not in ("recall", "anyhit", "allhit")]
    if Qrels(experiments.traces).counts(exp.id, owner):
        top = max(exp.ks) if exp.ks else 10
        out += [m for m in JUDGED_METRICS if int(m.split("@")[1]) <= top]
    return out


def _settled(experiments: Experiments, exp: Experiment, metric: str, owner: str) -> str:
    """On judged P@k with a pool: each method pair settled by a person's grades, or open."""
    from traces.judging.queue import status_lines

    lines = status_lines(experiments, exp, metric, owner)
    if not lines:
        return ""
    return ("<div class='ht-meta' id='exp-settled'><b>" + render.esc(lines[0]) + "</b><ul>"
            + "".join(f"<li>{render.esc(x.strip())}</li>" for x in lines[1:]) + "</ul></div>")


def view(cache: ComparisonCache, experiments: Experiments, exp: Experiment, metric: str, a: Optional[str],
         b: Optional[str], owner: str = "", split: str = ALL_QUESTIONS) -> ExperimentView:
    """`split`: "method|cell" of the answer split (traces/stats/tradeoff.py) keeps only its
    questions in the rows; ALL_QUESTIONS keeps every one."""
    methods = exp.methods or []
    a = a if a in methods else (methods[0] if methods else "")
    b = b if b in methods and b != a else next((m for m in reversed(methods) if m != a), a)
    c = cache.get(experiments, exp, metric, owner)
    pair = c.pair(a, b) if a != b else None
    head = (f"<div class='ht-meta'>experiment <code>{render.esc(exp.id)}</code> · {render.esc(exp.kind)} · KB "
            f"{render.esc(exp.kb)} · {render.esc(exp.provenance())} · "
            f"<span id='exp-questions'>{render.esc(c.questions_line())}</span> · {render.esc(exp.status)} · link: "
            f"<a href='?experiment={render.esc(exp.id)}'>?experiment={render.esc(exp.id[:12])}…</a></div>")
    if c.judges:
        head += f"<div class='ht-meta' id='exp-judges'>judged: {render.esc(c.judges)}</div>"
    rows = "".join(
        f"<tr><td>{c.letter(m)}</td><td>{render.esc(m)}</td><td>{c.means[m].fmt()}</td>"
        f"<td>{''.join(c.beats(m)) or '–'}</td></tr>" for m in c.methods)
    table = (f"<table class='ht-table' id='exp-means'><tr><th></th><th>method</th><th>{render.esc(metric)} [95 % CI]"
             f"</th><th>significantly better than (p &lt; 0.05{', Holm' if len(c.pairs) > 1 else ''})</th></tr>"
             f"{rows}</table>")
    if pair is not None:
        if pair.significant:
            word = f"<b>{render.esc(a if pair.mean_diff > 0 else b)}</b> is better, significantly"
        elif c.judges:
            word = ("<b>inconclusive</b> on these grades: more grades, not more questions, can settle it (the "
                    "Judge tab; `hoptrace judge ID --queue 20` lists the ones that can)")
        else:
            need = pair.needed_questions()
            word = "<b>inconclusive</b>: the data cannot tell" + (
                f" (~{need} questions would be needed at this effect and variance)" if need else " (no difference)")
        padj = "" if pair.p_adjusted is None else f", Holm-adjusted {pair.p_adjusted:.3g}"
        verdict = (f"<p id='exp-pair'><b>A = {render.esc(a)}</b> vs <b>B = {render.esc(b)}</b>: mean difference "
                   f"{pair.mean_diff:+.3f} [{pair.low:+.3f}, {pair.high:+.3f}], paired randomization p = "
                   f"{pair.p:.3g}{padj}; A better on {pair.wins}, tied on {pair.ties}, worse on {pair.losses} "
                   f"questions — {word}.</p>")
    else:
        verdict = "<p id='exp-pair'>Pick two different methods to compare them question by question.</p>"
    summary = (f"<style>{render.CSS}</style>{head}{table}{verdict}{_settled(experiments, exp, metric, owner)}"
               f"{tradeoff_html(c)}")
    groups = c.by_hops or c.by_type
    groups_fig = breakdown_figure({m: groups[m] for m in (a, b) if m in groups}, metric,
                                  "hops" if c.by_hops else "type") if groups else None
    funnels = [f for f in c.funnels if f.method in (a, b)]
    out_rows = []
    for r in c.rows:
        sa, sb = r["scores"][a], r["scores"][b]
        out_rows.append([r["question_id"], r["question"], r["hops"] if r["hops"] is not None else "",
                         round(sa, 3), round(sb, 3), round(sa - sb, 3), _lost(r["lost"][a]), _lost(r["lost"][b])])
    keep = split_questions(c, split)
    if keep is not None:
        out_rows = [r for r in out_rows if r[0] in keep]
    # The questions that differ most first: those are the ones a visitor opens.
    out_rows.sort(key=lambda row: -abs(row[5]))
    return ExperimentView(exp, metric, a, b, summary, means_figure(c), funnel_figure(funnels, c.followed), groups_fig,
                          out_rows, tradeoff_figure(c), split_choices(c))


# --- the whole trade-off (traces/stats/tradeoff.py) -----------------------------------------------
def split_choices(c) -> list[tuple[str, str]]:
    """The rows' filter: every question, or one cell of one method's answer split."""
    from traces.stats.tradeoff import CELL_TEXT, CELLS

    out = [("all compared questions", ALL_QUESTIONS)]
    for sp in c.answers:
        for cell in CELLS:
            if sp.count(cell):
                out.append((f"{sp.method}: {CELL_TEXT[cell].format(k=sp.k)} ({sp.count(cell)})", f"{sp.method}|{cell}"))
    return out


def split_questions(c, split: Optional[str]) -> Optional[set[str]]:
    if not split or split == ALL_QUESTIONS:
        return None
    method, _, cell = split.partition("|")
    sp = next((x for x in c.answers if x.method == method), None)
    if sp is None or cell not in sp.questions:
        return None
    return set(sp.questions[cell])


def tradeoff_html(c) -> str:
    """Answers and where they were lost, money, spread, budget recall, flagged verdicts; nothing
    when the experiment recorded none of it."""
    from traces.stats.tradeoff import CELLS, READER_K

    if not c.tradeoff:
        return ""
    esc = render.esc
    k = "5"

    def fmt(t, v, key):
        if v is None:
            return "–"
        sd = t.sd.get(key)
        return f"{v:.3f}" + (f" ± {sd:.3f}" if sd is not None else "")

    heads = ["method", "EM", "F1", f"recall@{k}"] + ([f"recall@{c.budget}tok"] if c.budget else []) \
        + ([f"stable@{k}"] if c.repeat > 1 else []) + ["$ / question", "CPU s / question"]
    body = ""
    for t in c.tradeoff:
        cells = [esc(t.method), fmt(t, t.em, "em"), fmt(t, t.f1, "f1"), fmt(t, t.recall, f"recall@{k}")]
        if c.budget:
            cells.append(fmt(t, t.recall_budget, f"recall@{c.budget}tok"))
        if c.repeat > 1:
            cells.append("–" if t.stable is None else f"{t.stable:.2f}")
        cells += [esc(t.usd_label), "–" if t.cpu_s is None else f"{t.cpu_s:.2f}"]
        body += "<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>"
    reps = f"; ± is the spread over {c.repeat} repetitions" if c.repeat > 1 else ""
    out = (f"<h4>The whole trade-off</h4><p class='ht-meta'>Answers from each method's top {READER_K}{reps}. "
           "Money from each run's recorded tokens and the model's price; the embedded model costs $0 and shows "
           "its CPU seconds.</p><table class='ht-table' id='exp-tradeoff'><tr>"
           + "".join(f"<th>{esc(h)}</th>" for h in heads) + f"</tr>{body}</table>")
    if c.answers:
        cols = ["gold in, right", "gold in, wrong: <b>reader lost it</b>", "gold missed, right",
                "gold missed, wrong: <b>retriever lost it</b>"]
        rows = "".join(f"<tr><td>{esc(sp.method)}</td>" + "".join(f"<td>{sp.count(x)}</td>" for x in CELLS)
                       + "</tr>" for sp in c.answers)
        out += (f"<p class='ht-meta'>Where the answers were lost (gold = every gold passage in the reader's top "
                f"{READER_K}; right = exact match{'; first repetition' if c.repeat > 1 else ''}). "
                "Pick a cell in <i>Show questions</i> below to list its questions.</p>"
                "<table class='ht-table' id='exp-answer-split'><tr><th>method</th>"
                + "".join(f"<th>{x}</th>" for x in cols) + f"</tr>{rows}</table>")
    if c.repeat > 1:
        if c.flags:
            out += ("<div class='ht-stale' id='exp-flags'><b>Verdicts that changed between repetitions</b> "
                    f"({esc(c.metric)}): one run of the benchmark could have shown either.<ul>"
                    + "".join(f"<li>{esc(f.text())}</li>" for f in c.flags) + "</ul></div>")
        else:
            out += (f"<p class='ht-meta' id='exp-flags'>Every pair's verdict on {esc(c.metric)} was the same in all "
                    f"{c.repeat} repetitions.</p>")
    return out


def tradeoff_figure(c):
    """Quality against cost a question, one point a method, the spread over repetitions as error
    bars: money where prices are known, else the embedded model's CPU seconds."""
    import plotly.graph_objects as go

    pts = [t for t in c.tradeoff if (t.em if t.em is not None else t.recall) is not None]
    if not pts:
        return None
    use_usd = all(t.usd is not None for t in pts) and any(t.usd for t in pts)
    quality = "em" if any(t.em is not None for t in pts) else "recall"
    qkey = "em" if quality == "em" else "recall@5"
    xs = [(t.usd if use_usd else (t.cpu_s or 0.0)) for t in pts]
    ys = [getattr(t, quality) or 0.0 for t in pts]
    # One trace a method, named in the legend: methods at the same cost and quality (two LLM-free
    # ones at $0) would print their names over each other.
    palette = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
    symbols = ("circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon")
    fig = go.Figure()
    for i, (t, x, y) in enumerate(zip(pts, xs, ys)):
        fig.add_trace(go.Scatter(
            x=[x], y=[y], mode="markers", name=t.method,
            error_y=dict(type="data", array=[t.sd.get(qkey, 0.0)], visible=c.repeat > 1),
            marker=dict(size=13, color=palette[i % len(palette)], symbol=symbols[i % len(symbols)],
                        line=dict(width=1, color="#333"))))
    lo, hi = min(ys), max(ys)
    fig.update_yaxes(range=[max(-0.05, lo - 0.1), min(1.05, hi + 0.12)])
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=40, b=10),
                      title=f"{'EM' if quality == 'em' else 'recall@5'} against cost a question"
                            + (f" (± over {c.repeat} repetitions)" if c.repeat > 1 else ""),
                      xaxis_title="$ a question" if use_usd else "CPU seconds a question ($0: no priced LLM)",
                      yaxis_title="EM" if quality == "em" else "recall@5")
    return fig


def _lost(where: list[str]) -> str:
    if not where:
        return ""
    counts: dict[str, int] = {}
    for w in where:
        counts[w] = counts.get(w, 0) + 1
    return ", ".join(f"{w}" + (f" ×{n}" if n > 1 else "") for w, n in counts.items())


def open_pair(cache: ComparisonCache, experiments: Experiments, exp: Experiment, metric: str, a: str, b: str,
              question_id: str, owner: str = ""):
    """The question's two stored runs, exactly as stored: ({label: run}, gold, question text, run ids).
    On a judged metric the judged-relevant passages stand in for gold (starred, followed)."""
    c = cache.get(experiments, exp, metric, owner)
    if not any(r["question_id"] == question_id for r in c.rows):
        raise InputError(f"question {question_id!r} is not in experiment {exp.id[:12]}")
    found, by_method, gold, question = question_runs(experiments, c, question_id, [a] if a == b else [a, b])
    ids = [by_method[m] for m in (a, b)]
    runs = found if a != b else {f"{a} [{ids[0][:6]}]": found[a]}
    if c.judges:
        gold = set(c.relevant.get(question_id, ()))
    return runs, gold, question, ids


def pair_note(cache: ComparisonCache, experiments: Experiments, exp: Experiment, metric: str, a: str, b: str,
              question_id: str, owner: str = "") -> str:
    """The banner over a question's two stored runs: which experiment, and their two scores."""
    c = cache.get(experiments, exp, metric, owner)
    row = next(r for r in c.rows if r["question_id"] == question_id)
    scores = " · ".join(f"{render.esc(m)} {render.esc(metric)} {round(row['scores'][m], 3)}" for m in (a, b)
                        if m in row["scores"])
    return (f"<div class='ht-recorded' id='experiment-banner'>Stored runs of experiment "
            f"<code>{render.esc(exp.id[:12])}</code>, not re-run: question {render.esc(question_id)} · {scores}. "
            f"A method that cut one longer ranking shows all of it; a missed gold passage names the last "
            f"stage that held it.</div>")


def error(e: HopTraceError) -> str:
    return render.error_html(str(e))
