"""The Experiments tab's views: list them, compare two methods question by question, and
open a question's two stored runs side by side. Renders what traces/stats/compare.py computes; no
Gradio here, so the handlers in ui/tabs/experiment.py stay thin and this stays testable."""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

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
    """compare() resamples every pair (~10 ms each, in one scipy call), and a judged metric reads
    every run to follow the judged-relevant passages; a visitor switching the two methods of the
    same experiment and metric, or opening a question's runs, must not pay it again. Keyed by (experiment, metric),
    and for a judged metric by whose judgments and their state, which changes with every grade; a
    running experiment is not cached, its runs are still coming (a paused one is: nothing
    comes until its next sitting, which installs it anew)."""

    def __init__(self, size: int = 16):
        self._items: OrderedDict[tuple, Comparison] = OrderedDict()
        self._computing: dict[tuple, threading.Lock] = {}
        self._lock = threading.Lock()
        self.size = size

    def get(self, experiments: Experiments, exp: Experiment, metric: str, owner: str = "") -> Comparison:
        judged = is_judged_metric(metric)
        key = (exp.id, metric) + ((owner, Qrels(experiments.traces).stamp(exp.id, owner)) if judged else ())
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            # One computation a key: a visitor opening the lab while the start-up warm-up computes
            # its first view waits for it rather than resampling every pair a second time beside it.
            computing = self._computing.setdefault(key, threading.Lock())
        with computing:
            with self._lock:
                if key in self._items:
                    return self._items[key]
            try:
                c = compare(experiments, exp, metric, compared_methods(experiments, exp),
                            qrels=judged_for(experiments.traces, exp, owner) if judged else None)
                with self._lock:
                    if exp.status != "running":
                        self._items[key] = c
                        while len(self._items) > self.size:
                            self._items.popitem(last=False)
            finally:
                with self._lock:
                    self._computing.pop(key, None)
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
    leaderboard_html: str = ""
    methods: list = None         # the methods compared (a recording under way: those with enough questions)


ALL_QUESTIONS = "all"


def compared_methods(experiments: Experiments, exp: Experiment) -> Optional[list[str]]:
    """The methods the views compare (paired tests need the same questions): all of them, except in
    a recording still under way (traces/storage/recording.py), where a method that has fewer
    questions than the main methods so far waits for its next sitting (the leaderboard lists it)."""
    from traces.storage.recording import MAIN_METHODS

    counts = dict(experiments.traces.db.execute(
        "SELECT method, count(DISTINCT question_id) FROM experiment_runs WHERE experiment_id = ? GROUP BY method",
        [exp.id]).fetchall())
    present = [m for m in exp.methods if counts.get(m)]
    if len(present) == len(exp.methods) and len(set(counts.values())) <= 1:
        return None
    main = [m for m in present if m in MAIN_METHODS] or present
    floor = min((counts[m] for m in main), default=0)
    return [m for m in present if counts[m] >= floor] or None

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


def warm(cache: ComparisonCache, experiments: Experiments, exp_ids: Sequence[str], metric: str = "recall@5") -> None:
    """The shipped experiments' first view computed ahead (compare() resamples every pair of methods,
    seconds for twenty of them), so the lab opens on it at once; on a daemon thread at start-up."""
    for exp_id in exp_ids:
        try:
            exp = experiments.get(exp_id)
            leaderboard_html(exp)
            cache.get(experiments, exp, metric)
        except HopTraceError:
            continue


def default_pair(cache: ComparisonCache, experiments: Experiments, exp: Experiment, metric: str,
                 owner: str = "") -> tuple[str, str]:
    """The pair a view opens on: the best method on `metric` against BM25 (the baseline every
    paper reports), or against the runner-up when BM25 is not there or is the best."""
    c = cache.get(experiments, exp, metric, owner)
    ranked = sorted(c.methods, key=lambda m: -c.means[m].mean)
    if not ranked:
        return "", ""
    best = ranked[0]
    other = "bm25" if "bm25" in ranked and best != "bm25" else next((m for m in ranked[1:]), best)
    return best, other


def view(cache: ComparisonCache, experiments: Experiments, exp: Experiment, metric: str, a: Optional[str],
         b: Optional[str], owner: str = "", split: str = ALL_QUESTIONS) -> ExperimentView:
    """`split`: "method|cell" of the answer split (traces/stats/tradeoff.py) keeps only its
    questions in the rows; ALL_QUESTIONS keeps every one."""
    c = cache.get(experiments, exp, metric, owner)
    methods = c.methods
    a = a if a in methods else (methods[0] if methods else "")
    b = b if b in methods and b != a else next((m for m in reversed(methods) if m != a), a)
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
    top = max(c.methods, key=lambda m: c.means[m].mean) if c.methods else ""
    table = fold(f"<b>Each method's {render.esc(metric)} with its 95 % interval, and the methods it beats</b> "
                 f"({len(c.methods)} methods; best mean: {render.esc(top)}"
                 + (f" {c.means[top].mean:.3f}" if top else "") + ")", table, "exp-means-fold",
                 open_=len(c.methods) <= 6)
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
                          out_rows, tradeoff_figure(c), split_choices(c, [a, b] if a != b else [a]),
                          leaderboard_html(exp), list(methods))


# --- the whole trade-off (traces/stats/tradeoff.py) -----------------------------------------------
def split_choices(c, methods: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The rows' filter: every question, one cell of one method's answer split, or the questions
    where one of `methods` (the two compared) lost the gold at one stage (the funnel's bars)."""
    from traces.stats.tradeoff import CELL_TEXT, CELLS

    out = [("all compared questions", ALL_QUESTIONS)]
    for sp in c.answers:
        for cell in CELLS:
            if sp.count(cell):
                out.append((f"{sp.method}: {CELL_TEXT[cell].format(k=sp.k)} ({sp.count(cell)})", f"{sp.method}|{cell}"))
    for m in methods:
        stages: dict[str, int] = {}
        for r in c.rows:
            for st in dict.fromkeys(r["lost"].get(m, [])):
                stages[st] = stages.get(st, 0) + 1
        out += [(f"{m}: lost the gold at {st} ({n})", f"{LOST}|{m}|{st}") for st, n in stages.items()]
    return out


LOST = "lost"


def split_questions(c, split: Optional[str]) -> Optional[set[str]]:
    if not split or split == ALL_QUESTIONS:
        return None
    if split.startswith(LOST + "|"):
        _, m, stage = split.split("|", 2)
        return {r["question_id"] for r in c.rows if stage in r["lost"].get(m, [])}
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
    # The leaderboard above has these columns; the table adds recall at the context budget and the
    # spread, so it is drawn only for an experiment that has them.
    out = ""
    if c.budget or c.repeat > 1:
        out = fold("<b>The whole trade-off</b>: answers, recall at the context budget, spread and cost a method",
                   f"<p class='ht-meta'>Answers from each method's top {READER_K}{reps}. "
                   "Money from each run's recorded tokens and the model's price; the embedded model costs $0 and "
                   "shows its CPU seconds.</p><table class='ht-table' id='exp-tradeoff'><tr>"
                   + "".join(f"<th>{esc(h)}</th>" for h in heads) + f"</tr>{body}</table>", "exp-tradeoff-fold")
    if c.answers:
        cols = ["gold in, right", "gold in, wrong: <b>reader lost it</b>", "gold missed, right",
                "gold missed, wrong: <b>retriever lost it</b>"]
        def cell(sp, x) -> str:   # a cell with questions lists them when clicked (ui/tabs/experiment.py)
            n = sp.count(x)
            return (f"<td class='ht-pick' data-split='{esc(f'{sp.method}|{x}')}' title='list these questions'>"
                    f"<u>{n}</u></td>" if n else "<td>0</td>")

        rows = "".join(f"<tr><td>{esc(sp.method)}</td>" + "".join(cell(sp, x) for x in CELLS) + "</tr>"
                       for sp in c.answers)
        lost = {x: sum(sp.count(x) for sp in c.answers) for x in CELLS}
        out += fold("<b>Where the answers were lost</b>: the reader or the retriever, a method a row "
                    f"({lost[CELLS[1]]} runs lost by the reader, {lost[CELLS[3]]} by the retriever)",
                    f"<p class='ht-meta'>Gold = every gold passage in the reader's top "
                    f"{READER_K}; right = exact match{'; first repetition' if c.repeat > 1 else ''}. "
                    "Click a count (or pick its cell in <i>Show questions</i> below) to list its questions.</p>"
                    "<table class='ht-table' id='exp-answer-split'><tr><th>method</th>"
                    + "".join(f"<th>{x}</th>" for x in cols) + f"</tr>{rows}</table>", "exp-answer-fold")
    if c.repeat > 1:
        from traces.stats.compare import pairs_line

        compared = f"<span class='ht-meta' id='exp-flag-pairs'>{esc(pairs_line(c))}.</span>"
        if c.flags:
            out += ("<div class='ht-stale' id='exp-flags'>"
                    + fold(f"<b>{len(c.flags)} verdict{'s' if len(c.flags) != 1 else ''} changed between "
                           f"repetitions</b> ({esc(c.metric)}): one run of the benchmark could have shown either",
                           f"{compared}<ul>" + "".join(f"<li>{esc(f.text())}</li>" for f in c.flags) + "</ul>",
                           open_=len(c.flags) <= 3)
                    + "</div>")
        elif c.flag_pairs:
            out += (f"<p class='ht-meta' id='exp-flags'>No verdict on {esc(c.metric)} changed between "
                    f"repetitions. {compared}</p>")
        else:
            out += f"<p class='ht-meta' id='exp-flags'>{compared}</p>"
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


def fold(summary_html: str, body_html: str, elem_id: str = "", open_: bool = False) -> str:
    """A folded panel: the lab shows what each table says in one line and opens the rest on a click
    (with everything unfolded the shipped experiment's view was 9,416 px tall at 1440x900)."""
    attrs = (f" id='{elem_id}'" if elem_id else "") + (" open" if open_ else "")
    return f"<details class='ht-fold'{attrs}><summary>{summary_html}</summary>{body_html}</details>"


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


# --- the leaderboard, the experiments and two experiments compared ------------------------------------
@lru_cache(maxsize=None)
def _fingerprint(recorded: str, method: str, profile: str) -> str:
    """showcase.fingerprint_like, once a method: the code does not change while the app runs."""
    from retrieval.showcase import fingerprint_like

    return fingerprint_like(recorded, method, profile)


def leaderboard_html(exp: Experiment) -> str:
    """One row a method, best of each column in bold, a stale method labelled, the shared setting once."""
    from retrieval.showcase import experiment_fingerprints
    from traces.stats import leaderboard as lb

    board = lb.build(exp, experiment_fingerprints(exp.spec, _fingerprint))
    if not board.rows:
        return ""
    esc = render.esc
    heads = "".join(f"<th>{esc(board.header(c))}</th>" for c, _, _ in lb.COLUMNS)
    groups = board.groups()
    shared = lb.shared_server(board.rows)
    body = ""
    for n, rows in groups:
        # Bold compares like with like: a method on 20 questions is not better than one on 100.
        best = {c: board.best(c, rows) for c, _, _ in lb.COLUMNS if c != "questions"}
        if len(groups) > 1:
            body += (f"<tr class='ht-group'><td colspan='{len(lb.COLUMNS) + 3}'>on {n} question{'s' if n != 1 else ''}"
                     f"{' each' if len(rows) > 1 else ''}</td></tr>")
        for r in rows:
            cells = []
            for c, _, digits in lb.COLUMNS:
                v = r.cells.get(c)
                text = esc(lb.cell_text(v, digits))
                if r.timed_apart and lb.is_time(c):
                    text += f"<sup class='ht-apart' title='{esc(r.timed_apart)}'>{lb.TIMED_APART_MARK}</sup>"
                cells.append(f"<td><b>{text}</b></td>" if v is not None and best.get(c) == v else f"<td>{text}</td>")
            stale = (f" <span class='ht-stale-tag' title='{esc(r.stale)}'>stale</span>" if r.stale else "")
            if r.servers and not shared:   # rows on different server builds: each names its own
                stale += "".join(f" <span class='ht-meta ht-server-tag'>{esc(sv)}</span>" for sv in r.servers)
            # An ablation's name (griever_no_shortlist) breaks at its underscores, not mid-word
            name = esc(r.method).replace("_", "_<wbr>")
            body += (f"<tr><td>{name}{stale}</td>{''.join(cells)}<td>{esc(r.usd)}</td>"
                     f"<td>{esc(lb.named_text(r.usd_named))}</td></tr>")
    bold = ("Bold: the best of a column among the rows on the same questions (each method's first N)."
            if len(groups) > 1 else "Bold: the best of a column.")
    sittings = exp.spec.get("sittings", [])
    status = ""
    if exp.status == "paused":
        status = (f"<p class='ht-meta' id='exp-progress'>Recording under way ({len(sittings)} sitting"
                  f"{'s' if len(sittings) != 1 else ''} so far): each method is scored on the questions it has; "
                  "the charts below compare the methods that share the most questions.</p>")
    return (f"<div id='exp-leaderboard'><p class='ht-meta' id='exp-setting'>{esc(board.setting)}</p>{status}"
            f"<table class='ht-table'><tr><th>method</th>{heads}<th>$ / question</th>"
            f"<th>$ at {esc(lb.NAMED_MODEL)}</th></tr>{body}</table>"
            + fold(f"<span class='ht-meta'>{esc(bold)} Notes on the times, the prices and stable@5 "
                   f"({len(board.notes)})</span>", "<p class='ht-meta'>" + "<br>".join(esc(n) for n in board.notes)
                   + "</p>", "exp-notes")
            + "</div>")


EXPERIMENT_COLUMNS = ["when", "KB", "questions", "methods", "LLM", "code", "machine", "status", "id"]
EXPERIMENT_WIDTHS = ["11%", "6%", "8%", "19%", "13%", "10%", "13%", "9%", "11%"]


def experiment_rows(experiments: Experiments, owner: Optional[str], shipped: Sequence[str] = ()) -> list[list]:
    """The experiments table, newest first: the visitor's, with the shipped ones (everyone's)."""
    import time as _time

    mine = experiments.list(owner=owner)
    have = {e.id for e in mine}
    extra = [experiments.get(i) for i in shipped if i not in have]
    rows = []
    for e in sorted(mine + extra, key=lambda x: -x.created_at):
        methods = e.methods
        status = e.status + (" · shipped" if e.id in shipped else "")
        rows.append([_time.strftime("%Y-%m-%d %H:%M", _time.localtime(e.created_at)), e.kb, e.n_questions,
                     f"{len(methods)}: {', '.join(methods[:4])}{', …' if len(methods) > 4 else ''}",
                     e.llm.split(" (")[0], e.code_version, e.machine or "not recorded", status, e.id])
    return rows


def across_html(experiments: Experiments, old: Experiment, new: Experiment, metric: str) -> str:
    """`compare OLD --against NEW` in the page: what differs between the two, then each method's
    change with its interval and paired test, gains green and losses red."""
    from traces.stats.across import compare_across, differences

    if old.id == new.id:
        raise InputError("pick another experiment to compare with: this one is the experiment open above, "
                         "and compared with itself nothing changes")
    c = compare_across(experiments, old, new, metric)
    esc = render.esc
    differs = [f"<b>{esc(what)}</b>: {esc(how)}" for what, how in differences(old, new)]
    body = ""
    for r in c.rows:
        p = r.change
        arrow, cls = ("▲", "ht-gain") if p.significant and p.mean_diff > 0 else (
            ("▼", "ht-loss") if p.significant else ("=", ""))
        adj = "" if p.p_adjusted is None else f"{p.p_adjusted:.3g}"
        body += (f"<tr class='{cls}'><td>{esc(r.method)}</td><td>{p.n}</td><td>{r.old.mean:.3f}</td>"
                 f"<td>{r.new.mean:.3f}</td><td>{arrow} {p.mean_diff:+.3f} [{p.low:+.3f}, {p.high:+.3f}]</td>"
                 f"<td>{p.p:.3g}</td><td>{adj}</td><td>{p.wins} / {p.ties} / {p.losses}</td>"
                 f"<td>{esc(r.verdict)}</td></tr>")
    return (f"<div id='exp-across'><p class='ht-meta'>Before: <code>{esc(old.id[:12])}</code> · after: "
            f"<code>{esc(new.id[:12])}</code> · {esc(metric)}, questions paired by id. What differs: "
            f"{'; '.join(differs) or 'nothing recorded'}.</p><table class='ht-table'><tr><th>method</th><th>n</th>"
            "<th>before</th><th>after</th><th>change [95 % CI]</th><th>p</th><th>p (Holm)</th>"
            f"<th>better / same / worse</th><th>verdict</th></tr>{body}</table>"
            + (f"<p class='ht-meta'>In one experiment only: {esc(', '.join(c.not_shared))}</p>" if c.not_shared
               else "") + "</div>")


def report_file(cache: ComparisonCache, experiments: Experiments, exp: Experiment, metric: str, owner: str = ""):
    """The view as the self-contained HTML report `compare --html` writes (ui/downloads.py). One
    file per experiment, metric and owner: a public visitor's view holds only their runs."""
    import re

    from traces.stats.compare import write_html

    from . import downloads

    tag = downloads.tag(owner, n=10) if owner else "all"
    safe = re.sub(r"[^\w.-]", "-", metric.replace("@", "-at-"))
    comparison = cache.get(experiments, exp, metric, owner)
    return str(downloads.write(f"hoptrace-{exp.id[:12]}-{safe}-{tag}.html", lambda p: write_html(comparison, p)))


def error(e: HopTraceError) -> str:
    return render.error_html(str(e))
