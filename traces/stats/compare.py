"""`hoptrace compare`: an experiment's methods, question by question, with their uncertainty.

Each method's mean with a 95 % bootstrap interval; for each pair, the mean per-question
difference with its interval, a two-sided paired randomization p-value (Holm-adjusted over the
pairs), and win / tie / loss counts (retrieval/bench/significance.py). The methods table marks
significance as IR papers do: a superscript letter for each method this one beats significantly.
Then where each method lost the gold (traces/stats/funnel.py) and the metric by hop count and by
question type; and the per-question rows the app's drill-down lists.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Callable, Optional, Sequence

from retrieval.bench import protocol as how_asked
from retrieval.bench.metrics import BUDGET, RANK_METRICS, parse_metric, per_question_scores
from retrieval.bench.significance import ALPHA, Interval, Paired, holm, mean_intervals, paired_many
from retrieval.core.errors import InputError
from retrieval.trace.gold import gold_presence

from ..storage.experiments import Experiment, Experiments
from . import tradeoff
from .funnel import (
    Funnel,
    breakdown,
    breakdown_figure,
    entries_at,
    funnel,
    funnel_figure,
    losses,
    pick_k,
    render_funnel,
)
from .judged_measures import is_judged_metric

LETTERS = "abcdefghijklmnopqrstuvwxyz"


@dataclass
class Comparison:
    experiment: Experiment
    metric: str
    methods: list[str]
    question_ids: list[str]
    means: dict[str, Interval]
    pairs: list[Paired]
    funnels: list[Funnel]
    by_hops: dict = field(default_factory=dict)
    by_type: dict = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)   # per question: text, hops, type, scores, run ids
    left_out: dict = field(default_factory=dict)       # why → the experiment's questions left out for it
    judges: str = ""                                   # a judged metric: whose grades, and how they agree with gold
    relevant: dict = field(default_factory=dict)       # a judged metric: question → its judged-relevant passages
    # The whole trade-off (traces/stats/tradeoff.py): answers and where they were lost, money, spread.
    answers: list = field(default_factory=list)        # AnswerSplit per method that answered
    tradeoff: list = field(default_factory=list)       # TradeOff per method
    flags: list = field(default_factory=list)          # Flag per pair whose verdict differs between repetitions
    flag_pairs: int = 0                                # pairs with two measured repetitions to compare
    repeat: int = 1
    budget: Optional[int] = None

    @property
    def metric_label(self) -> str:
        """The metric and how its runs were asked ('recall@5 (top 5 of k=10)'): one protocol named
        wherever a recall is shown (retrieval/bench/protocol.py)."""
        e = self.experiment
        return how_asked.label(self.metric, e.spec.get("protocol", "per-k"), max(e.ks) if e.ks else 0)

    @property
    def left_out_count(self) -> int:
        return sum(len(qs) for qs in self.left_out.values())

    def questions_line(self) -> str:
        """"5 questions · 1 left out: no judged-relevant passage (q3)": what was compared, and what
        was not and why, so a smaller n than the experiment's is never a surprise."""
        total = len(self.question_ids) + self.left_out_count
        line = f"{total} questions"
        if self.left_out:
            parts = [f"{len(qs)} {why} ({', '.join(qs[:5])}{', …' if len(qs) > 5 else ''})"
                     for why, qs in self.left_out.items()]
            what = parts[0].partition(" ")[2] if len(parts) == 1 else "; ".join(parts)
            line += f" · {self.left_out_count} left out: {what}"
        return line

    @property
    def followed(self) -> str:
        """What the funnel follows: the gold passages, or on a judged metric the judged-relevant ones."""
        return "judged-relevant passages" if self.judges else "gold passages"

    def letter(self, method: str) -> str:
        return LETTERS[self.methods.index(method) % len(LETTERS)]

    def beats(self, method: str) -> list[str]:
        """Methods this one is significantly better than (adjusted p < α), as letters."""
        out = []
        for p in self.pairs:
            if p.significant and p.a == method and p.mean_diff > 0:
                out.append(self.letter(p.b))
            elif p.significant and p.b == method and p.mean_diff < 0:
                out.append(self.letter(p.a))
        return sorted(out)

    def pair(self, a: str, b: str) -> Optional[Paired]:
        for p in self.pairs:
            if (p.a, p.b) == (a, b):
                return p
            if (p.a, p.b) == (b, a):
                return Paired(a, b, p.n, -p.mean_diff, -p.high, -p.low, p.p, p.losses, p.ties, p.wins,
                              p.p_adjusted, p.sd_diff)
        return None

    def to_json(self) -> dict:
        e = self.experiment
        return {"experiment": e.id, "kb": e.kb, "kb_fingerprint": e.kb_fingerprint, "llm": e.llm,
                "code_version": e.code_version, "machine": e.machine, "metric": self.metric,
                "questions": len(self.question_ids),
                "left_out": self.left_out_count, "left_out_why": self.left_out, "judges": self.judges or None,
                "correction": "holm" if len(self.pairs) > 1 else "none",
                "alpha": ALPHA, "test": "paired randomization (scipy.stats.permutation_test, 10,000 resamples), "
                                        "two-sided; 95 % percentile bootstrap intervals",
                "methods": {m: {**self.means[m].__dict__, "letter": self.letter(m), "beats": self.beats(m)}
                            for m in self.methods},
                "pairs": [p.to_json() for p in self.pairs], "funnels": [f.to_json() for f in self.funnels],
                "repetitions": self.repeat, "budget": self.budget,
                "answer_split": [a.to_json() for a in self.answers],
                "tradeoff": [t.to_json() for t in self.tradeoff],
                "flagged_verdicts": [f.to_json() for f in self.flags], "pairs_with_repetitions": self.flag_pairs,
                "by_hops": self.by_hops, "by_type": self.by_type, "per_question": self.rows}


def compare(experiments: Experiments, exp: Experiment, metric: str,
            methods: Optional[Sequence[str]] = None, qrels: Optional[Judged] = None) -> Comparison:
    """A ConfigError / InputError names a metric the experiment did not record or a method it
    does not hold; nothing is written. A judged metric (ndcg@k, p@k, jrecall@k, judged@k) reads
    `qrels` — the experiment's judgments — and the funnel then follows the judged-relevant
    passages as it follows gold."""
    if is_judged_metric(metric):
        return _compare_judged(experiments, exp, metric, methods, qrels)
    name, k = parse_metric(metric)
    if name in RANK_METRICS and not any(q.get("gold") for q in exp.questions):
        raise InputError(f"experiment {exp.id[:12]}'s questions have no gold passages, so {metric} cannot be "
                         f"measured; `hoptrace judge {exp.id[:12]}` pools and judges its runs, then compare with "
                         "--metric ndcg@5, p@5, jrecall@5 or judged@5")
    check_measured(exp, metric)
    entries, methods = _entries(experiments, exp, methods)
    # Every repetition's runs: a question's score is their mean (bench --repeat).
    every = [e for e in experiments.entries(exp, repetitions=True) if e["method"] in methods]
    rows = [{**e["row"], "rep": e["rep"]} for e in every]
    scores = per_question_scores(rows, metric)
    if name in ("em", "f1") and not any(scores.get(m) for m in methods):
        raise InputError(f"experiment {exp.id[:12]} has no answers to score with {metric}; "
                         "run the benchmark with --answer")
    if name == BUDGET and not any(scores.get(m) for m in methods):
        raise InputError(f"experiment {exp.id[:12]} ran without a context budget; run the benchmark with "
                         f"--budget {k} to measure {metric}")
    gold = {q["id"]: bool(q.get("gold")) for q in exp.questions}
    undefined = "no answer to score" if name in ("em", "f1") else "no gold passage"
    c = _assemble(exp, metric, 0 if name == BUDGET else k, methods, entries, scores,
                  lambda q: undefined if name in ("em", "f1") or not gold.get(q) else "not scored")
    c.metric = metric
    _add_tradeoff(c, exp, rows, methods, metric, k if name in RANK_METRICS else 5)
    return c


def _add_tradeoff(c: "Comparison", exp: Experiment, rows: list[dict], methods: Sequence[str], metric: str,
                  k: int) -> None:
    """The answer split, cost, spread and budget recall beside the metric (traces/stats/tradeoff.py)."""
    c.repeat = tradeoff.repetitions(rows)
    c.budget = tradeoff.budget_of(exp.spec.get("args"))
    c.answers = [s for m in methods if (s := tradeoff.answer_split(rows, m)) is not None]
    c.tradeoff = tradeoff.tradeoffs(rows, methods, k, c.budget, machine=exp.machine)
    c.flags, c.flag_pairs = tradeoff.flags(rows, methods, metric)


def check_measured(exp: Experiment, metric: str) -> None:
    """InputError when a rank metric's k is beyond the rankings the experiment recorded."""
    name, k = parse_metric(metric)
    if name in RANK_METRICS and exp.ks and k > max(exp.ks):
        raise InputError(f"experiment {exp.id[:12]} recorded rankings up to k = {max(exp.ks)} (ks "
                         f"{', '.join(map(str, exp.ks))}); {metric} was not measured")


def _entries(experiments: Experiments, exp: Experiment, methods: Optional[Sequence[str]]):
    entries = experiments.entries(exp)
    if not entries:
        raise InputError(f"experiment {exp.id[:12]} has no stored runs yet")
    held = list(dict.fromkeys(e["method"] for e in entries))
    methods = list(methods) if methods else held
    missing = [m for m in methods if m not in held]
    if missing:
        raise InputError(f"method(s) {', '.join(missing)} not in experiment {exp.id[:12]}; it holds "
                         f"{', '.join(held)}")
    if len(methods) != len(set(methods)):
        raise InputError("each method may be named once")
    return entries, methods


@dataclass
class Judged:
    """The judgments a judged comparison reads: qid → docid → grade, the grade counted relevant,
    and a line naming the judges and their measured agreement."""
    grades: dict[str, dict[str, int]]
    rel: int = 2
    judges: str = ""


def _compare_judged(experiments: Experiments, exp: Experiment, metric: str, methods: Optional[Sequence[str]],
                    qrels: Optional[Judged]) -> Comparison:
    from .judged_measures import scores as judged_scores

    if qrels is None or not qrels.grades:
        raise InputError(f"experiment {exp.id[:12]} has no judgments yet; `hoptrace judge {exp.id[:12]}` pools "
                         "its runs and judges them (or grade them in the app's Judge view)")
    k = int(metric.partition("@")[2] or 0)
    if exp.ks and k > max(exp.ks):
        raise InputError(f"experiment {exp.id[:12]} recorded rankings up to k = {max(exp.ks)}; {metric} was "
                         "not measured")
    entries, methods = _entries(experiments, exp, methods)
    fk = pick_k(k, exp.ks)
    scores: dict[str, dict[str, float]] = {}
    for m in methods:
        ranked = {e["question_id"]: e["row"]["ranked"] for e in entries_at(entries, m, fk)}
        got = judged_scores(ranked, qrels.grades, metric, qrels.rel)
        scores[m] = {q: v for q, v in got.items() if not math.isnan(v)}
    relevant = {q: {p for p, g in ps.items() if g >= qrels.rel} for q, ps in qrels.grades.items()}
    # The funnel and the drill-down follow the judged-relevant passages as they follow gold.
    judged_entries = [e for e in entries if e["method"] not in methods]
    for m in methods:
        for e in entries_at(entries, m, fk):
            run, _ = experiments.traces.load_run(e["run_id"])
            rel = sorted(relevant.get(e["question_id"], ()))
            judged_entries.append({**e, "fates": gold_presence(run, rel) if rel else None})
    needs_relevant = metric.partition("@")[0].lower() in ("ndcg", "jrecall")

    def why(q: str) -> str:
        if not qrels.grades.get(q):
            return "not judged"
        return "no judged-relevant passage" if needs_relevant and not relevant.get(q) else "not scored"

    c = _assemble(exp, metric, k, methods, judged_entries, scores, why)
    c.judges, c.relevant = qrels.judges, relevant
    return c


def _assemble(exp: Experiment, metric: str, k: int, methods: list[str], entries: Sequence[dict],
              scores: dict[str, dict[str, float]], why: Callable[[str], str]) -> Comparison:
    """`why(question id)`: the reason a question every method ran has no score."""
    order = [q["id"] for q in exp.questions]
    common = [q for q in order if all(q in scores.get(m, {}) for m in methods)]
    if not common:
        raise InputError(f"no question of experiment {exp.id[:12]} has {metric} for every method"
                         + (" (a question needs a judged-relevant passage for ndcg and jrecall; judge more of the "
                            "pool)" if is_judged_metric(metric) else ""))
    ran = {(e["method"], e["question_id"]) for e in entries}
    left_out: dict[str, list[str]] = {}
    for q in order:
        if q not in common:
            reason = why(q) if all((m, q) in ran for m in methods) else "not run by every method"
            left_out.setdefault(reason, []).append(q)
    means = dict(zip(methods, mean_intervals([[scores[m][q] for q in common] for m in methods])))
    pairs = paired_many([(a, [scores[a][q] for q in common], b, [scores[b][q] for q in common])
                         for a, b in combinations(methods, 2)])
    if len(pairs) > 1:
        for p, adj in zip(pairs, holm([p.p for p in pairs])):
            p.p_adjusted = adj
    fk = pick_k(k, exp.ks)
    funnels = [funnel(m, entries_at(entries, m, fk), fk) for m in methods]
    sub = {m: {q: scores[m][q] for q in common} for m in methods}
    rows = _rows(exp, entries, methods, common, scores, k)
    return Comparison(exp, metric, methods, common, means, pairs, funnels, breakdown(sub, exp.questions, "hops"),
                      breakdown(sub, exp.questions, "type"), rows, left_out)


def _rows(exp: Experiment, entries: Sequence[dict], methods: Sequence[str], common: Sequence[str],
          scores: dict, k: int) -> list[dict]:
    qs = {q["id"]: q for q in exp.questions}
    fk = pick_k(k, exp.ks)
    run_of: dict[tuple[str, str], str] = {}
    lost: dict[tuple[str, str], list[str]] = {}
    for m in methods:
        for e in entries_at(entries, m, fk):
            run_of[(m, e["question_id"])] = e["run_id"]
            lost[(m, e["question_id"])] = losses(e["fates"], fk) if e.get("fates") else []
    return [{"question_id": q, "question": qs[q]["text"], "hops": qs[q].get("hops"), "type": qs[q].get("type"),
             "scores": {m: scores[m][q] for m in methods}, "runs": {m: run_of.get((m, q)) for m in methods},
             "lost": {m: lost.get((m, q), []) for m in methods}} for q in common]


# --- output ---------------------------------------------------------------------------------------
def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def render_text(c: Comparison) -> str:
    e = c.experiment
    lines = [f"experiment {e.id} · {e.kind} · KB {e.kb} ({e.kb_fingerprint}) · {e.provenance()}",
             f"{c.metric_label} on {len(c.question_ids)} of {c.questions_line()}",
             *([f"judged: {c.judges}"] if c.judges else []),
             "", f"{'':2} {'method':<24} {c.metric + ' [95 % CI]':<28} beats (p < {ALPHA}, "
             + ("Holm-adjusted over " + str(len(c.pairs)) + " pairs)" if len(c.pairs) > 1 else "one pair)")]
    for m in c.methods:
        lines.append(f"{c.letter(m):2} {m:<24} {c.means[m].fmt():<28} {''.join(c.beats(m)) or '–'}")
    if c.pairs:
        lines += ["", "pairs (difference = first − second):",
                  f"  {'pair':<40} {'mean diff [95 % CI]':<28} {'p':>7} {'p adj':>7}  win/tie/loss  verdict"]
        for p in c.pairs:
            adj = "" if p.p_adjusted is None else _p(p.p_adjusted)
            if p.significant:
                word = "significant"
            elif c.judges:
                # A judge that cannot see the hops stays blind with more questions: grades decide it.
                word = "inconclusive (grades, not more questions, can settle it: judge --queue)"
            else:
                need = p.needed_questions()
                word = "inconclusive" + (f" (~{need} questions would show it)" if need else " (no difference)")
            lines.append(f"  {p.a + ' vs ' + p.b:<40} {p.mean_diff:+.3f} [{p.low:+.3f}, {p.high:+.3f}]"
                         f"{'':<4} {_p(p.p):>7} {adj:>7}  {p.wins:>3}/{p.ties:>3}/{p.losses:<3}  {word}")
    if c.funnels:
        lines += ["", ("where the judged-relevant passages are lost" if c.judges else "where the gold is lost")
                  + f" (runs at k = {c.funnels[0].k}; held = share of all {c.followed} between the first and last "
                    "stage that listed them):"]
        for f in c.funnels:
            lines += [render_funnel(f, what=c.followed), ""]
    lines += _tradeoff_text(c)
    for title, groups in (("hops", c.by_hops), ("type", c.by_type)):
        if groups:
            names = list(next(iter(groups.values())))
            lines.append(f"{c.metric} by {title}: " + " · ".join(
                f"{g} (n={next(iter(groups.values()))[g]['n']})" for g in names))
            for m, per in groups.items():
                lines.append(f"  {m:<24} " + "  ".join(f"{per[g]['mean']:.3f}" for g in names))
    return "\n".join(lines).rstrip()


def _tradeoff_text(c: Comparison) -> list[str]:
    """Answers and where they were lost, money, spread, budget recall, flagged verdicts."""

    out: list[str] = []
    if c.tradeoff:
        reps = f", mean ± sd over {c.repeat} repetitions" if c.repeat > 1 else ""
        k = next((key.partition("@")[2] for t in c.tradeoff for key in t.sd if key.startswith("recall@")
                  and key.partition("@")[2].isdigit()), "5")
        head = ["method", "EM", "F1", f"recall@{k}"] + ([f"recall@{c.budget}tok"] if c.budget else []) + \
               (["stable@" + k] if c.repeat > 1 else []) + ["$/question", "CPU s/question"]
        table = [head]
        for t in c.tradeoff:
            def fmt(v, key, t=t):
                if v is None:
                    return "–"
                sd = t.sd.get(key)
                return f"{v:.3f}" + (f"±{sd:.3f}" if sd is not None else "")
            row = [t.method, fmt(t.em, "em"), fmt(t.f1, "f1"), fmt(t.recall, f"recall@{k}")]
            if c.budget:
                row.append(fmt(t.recall_budget, f"recall@{c.budget}tok"))
            if c.repeat > 1:
                row.append("–" if t.stable is None else f"{t.stable:.2f}")
            row += [t.usd_label, "–" if t.cpu_s is None else f"{t.cpu_s:.2f}"]
            table.append(row)
        widths = [max(len(r[i]) for r in table) for i in range(len(head))]
        answered = any(t.em is not None for t in c.tradeoff)
        what = (f"answers from the top {tradeoff.READER_K}" if answered else "no answers: bench --answer adds them")
        out += ["", f"the trade-off ({what}{reps}):"]
        out += ["  " + "  ".join(x.ljust(w) for x, w in zip(r, widths)) for r in table]
    if c.answers:
        out += ["", f"where the answers were lost (gold = every gold passage in the top {tradeoff.READER_K} the "
                    "reader read; right = exact match" + ("; first repetition" if c.repeat > 1 else "") + "):"]
        for a in c.answers:
            out.append(f"  {a.method} ({a.n} answered)")
            for cell in tradeoff.CELLS:
                qs = a.questions[cell]
                shown = ", ".join(qs[:8]) + (", …" if len(qs) > 8 else "")
                out.append(f"    {a.count(cell):>3}  {tradeoff.CELL_TEXT[cell].format(k=a.k)}"
                           + (f"  ({shown})" if qs else ""))
    if c.repeat > 1:
        out += ["", f"verdicts on {c.metric} in each of the {c.repeat} repetitions ({pairs_line(c)}):"]
        out += [f"  FLAGGED {f.text()}" for f in c.flags] or ["  no verdict changed between repetitions"]
    return out


def pairs_line(c: Comparison) -> str:
    """How many pairs the repetitions box could compare, out of all."""
    n = len(c.methods) * (len(c.methods) - 1) // 2
    return (f"{c.flag_pairs} of {n} method pairs had a second measured repetition to compare; "
            "the others include a method that ran once")


def means_figure(c: Comparison):
    import plotly.graph_objects as go

    ms = c.methods
    fig = go.Figure(go.Bar(x=ms, y=[c.means[m].mean for m in ms], error_y=dict(
        type="data", symmetric=False, array=[c.means[m].high - c.means[m].mean for m in ms],
        arrayminus=[c.means[m].mean - c.means[m].low for m in ms]), marker_color="#2563eb"))
    fig.update_layout(height=320, yaxis_title=c.metric, title=f"{c.metric} with 95 % intervals",
                      margin=dict(l=10, r=10, t=50, b=10))
    return fig


def write_html(c: Comparison, path: Path) -> None:
    """Self-contained: the text report, the figures (plotly inlined, opens offline) and the
    per-question table."""
    esc = html.escape
    figs = [means_figure(c), funnel_figure(c.funnels)]
    figs += [breakdown_figure(g, c.metric, by) for by, g in (("hops", c.by_hops), ("type", c.by_type)) if g]
    head = "".join(f"<th>{esc(m)}</th>" for m in c.methods)
    body = "".join(
        f"<tr><td>{esc(r['question_id'])}</td><td>{esc(r['question'])}</td><td>{esc(str(r['hops'] or ''))}</td>"
        + "".join(f"<td>{r['scores'][m]:.3f}</td>" for m in c.methods) + "</tr>" for r in c.rows)
    parts = [f"<!doctype html><meta charset='utf-8'><title>HopTrace comparison {esc(c.experiment.id[:12])}</title>",
             f"<h1>{esc(c.metric_label)} — experiment {esc(c.experiment.id[:12])} on {esc(c.experiment.kb)}</h1>",
             f"<pre>{esc(render_text(c))}</pre>"]
    parts += [f.to_html(include_plotlyjs=(i == 0), full_html=False) for i, f in enumerate(figs)]
    parts.append(f"<h2>Per question</h2><table border=1 cellspacing=0><tr><th>id</th><th>question</th><th>hops</th>"
                 f"{head}</tr>{body}</table>")
    path.write_text("".join(parts))


def question_runs(experiments, c: "Comparison", question_id: str,
                  methods: Sequence[str]) -> tuple[dict, dict, set, str]:
    """A question's stored runs of `methods`, exactly as stored: ({method: RunResult}, {method: run
    id}, the gold passages stored with them, the question's text)."""
    row = next((r for r in c.rows if r["question_id"] == question_id), None)
    if row is None:
        known = ", ".join(r["question_id"] for r in c.rows[:5])
        raise InputError(f"question {question_id!r} is not among the compared questions (e.g. {known})")
    runs, ids, gold = {}, {}, set()
    for m in methods:
        rid = row["runs"].get(m)
        if not rid:
            raise InputError(f"no stored run of {m} for question {question_id!r}")
        runs[m], info = experiments.traces.load_run(rid)
        ids[m] = rid
        gold |= set(info["gold"])
    return runs, ids, gold, row["question"]
