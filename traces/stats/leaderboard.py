"""An experiment's leaderboard: one row per method with its quality, its cost and its time, as the
lab's first panel and `hoptrace record-experiment` print it.

Figures come from the experiment's summary (retrieval/bench/runner.py `summarise`); a method
whose code or prompts changed since it was recorded is marked stale (its fingerprint,
retrieval/showcase.py), and the machine and load it was timed under are stated once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from retrieval.bench import protocol as how_asked
from retrieval.core.money import usd_text

RETRIEVAL_S = "retrieval s / question (p50)"
ANSWER_S = "answer s / question (p50)"
# (column, summary key, digits); None digits: an integer count
COLUMNS = (("questions", "questions", None), ("recall@5", "recall@5", 3), ("recall@10", "recall@10", 3),
           ("EM", "em", 3), ("F1", "f1", 3), ("stable@5", "stable@5", 2),
           (RETRIEVAL_S, "retrieval_ms_p50", 3), (ANSWER_S, "answer_ms_p50", 1),
           ("CPU s / question", "cpu_s_per_question", 1), ("tokens / question", "tokens_per_question", 0))
# The retrieval's seconds and the shared answer step's apart: with one answer step of ~13 s a question,
# a single "s / question" read BM25's 2 ms as 13 s and looked like the retriever's cost.
TIME_COLUMNS = (RETRIEVAL_S, ANSWER_S, "CPU s / question")
SELF_ANSWERED_NOTE = ("retrieval s of {methods}: their agent writes the answer itself, so the seconds include it "
                      "and the answer column is empty")
TIMED_APART_MARK = "*"
PRICE_NOTE = "the embedded model on this machine costs $0; an endpoint's runs are priced with genai-prices"
# What the same tokens would cost at a hosted model's price: a figure a reader can compare across
# setups, where the embedded model's $0 says nothing.
NAMED_MODEL = "gpt-4o-mini"
# The embedded model's server before llama-server (issue 101): rows stored then name no server.
BEFORE_LLAMA_SERVER = "llama-cpp-python 0.3.36, patched (before llama-server)"


@dataclass
class Row:
    method: str
    cells: dict[str, Optional[float]]
    usd: str
    stale: str = ""              # why its runs are not this code's, or ""
    usd_named: Optional[float] = None   # the same tokens at NAMED_MODEL's price
    timed_apart: str = ""        # some of its runs were on another machine: what its time cells read, or ""
    apart_note: str = ""         # the same without the method and its other machine's p50: one note for rows alike
    self_answered: bool = False  # the method's own agent wrote its answer: no shared answer step to time apart
    servers: tuple[str, ...] = ()   # the embedded model's server builds its runs were on


@dataclass
class Leaderboard:
    rows: list[Row]
    setting: str                 # what every row shares, said once
    notes: list[str] = field(default_factory=list)
    protocol: str = "per-k"      # how the runs were asked (retrieval/bench/protocol.py)
    deepest_k: int = 0

    def header(self, column: str) -> str:
        """A column's header: a recall names how its runs were asked ('recall@5 (top 5 of k=10)')."""
        return how_asked.label(column, self.protocol, self.deepest_k) if self.deepest_k else column

    def groups(self) -> list[tuple[int, list[Row]]]:
        """The rows by the questions they were scored on, most questions first: a recording under
        way, or a slice protocol, scores methods on different question counts, and only rows on the
        same questions compare (the slice is each method's first N, so one count is one set)."""
        out: dict[int, list[Row]] = {}
        for r in self.rows:
            out.setdefault(int(r.cells.get("questions") or 0), []).append(r)
        return sorted(out.items(), key=lambda kv: -kv[0])

    def best(self, column: str, rows: Optional[list[Row]] = None) -> Optional[float]:
        """The best value of `column` among `rows` (default all); None when fewer than two rows have one:
        a lone row is not the best of anything."""
        vals = [r.cells[column] for r in (self.rows if rows is None else rows) if r.cells.get(column) is not None]
        # Every method shares one answer step: its fastest is no method's merit.
        if len(vals) < 2 or column == ANSWER_S:
            return None
        lower_better = is_time(column) or column.startswith("tokens")
        return min(vals) if lower_better else max(vals)

    def text(self) -> str:
        head = ["method"] + [self.header(c) for c, _, _ in COLUMNS] + ["$ / question", f"$ at {NAMED_MODEL}"]
        body = [[r.method + (" (stale)" if r.stale else "")]
                + [cell_text(r.cells.get(c), d) + (TIMED_APART_MARK if r.timed_apart and is_time(c) else "")
                   for c, _, d in COLUMNS]
                + [r.usd, named_text(r.usd_named)] for r in self.rows]
        widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
        line = lambda xs: "  ".join(str(x).ljust(w) for x, w in zip(xs, widths))  # noqa: E731
        return "\n".join([self.setting, line(head), line(["-" * w for w in widths])] + [line(b) for b in body]
                         + self.notes)


def is_time(column: str) -> bool:
    return column in TIME_COLUMNS


def timed_apart_note(s: dict, machine: str, p50: bool = True) -> str:
    """What a row's time cells read when some of its runs were on another machine (their times kept
    apart by traces/storage/recording.py) and, with `p50`, those runs' own times, never compared here.
    Without them, rows split alike read the same: one note covers them."""
    parts = [f"{q['questions']} on {where}" + (f" (p50 {q['latency_ms_p50'] / 1000:.1f} s)"
                                               if p50 and q.get("latency_ms_p50") is not None else "")
             for where, q in sorted(s["timed_elsewhere"].items())]
    return (f"times over {s.get('timed_questions', 0)} of {s.get('questions')} questions, run on {machine}; "
            f"{'; '.join(parts)} are scored, their times not compared")


def timed_apart_text(method: str, s: dict, machine: str) -> str:
    """The note for one row, named, with its other machines' p50s (a cell's tooltip)."""
    return f"{method}: {timed_apart_note(s, machine)}"


def named_text(usd: Optional[float]) -> str:
    return "–" if usd is None else f"${usd:.5f}"


def _named_price():
    from retrieval.llm.prices import price_for

    return price_for(NAMED_MODEL)


def cell_text(v, digits) -> str:
    """A leaderboard cell as both the page and the printed table show it (None: a dash)."""
    if v is None:
        return "–"
    return str(int(v)) if digits is None else f"{v:.{digits}f}"


def build(exp, current_fingerprints: Optional[dict[str, str]] = None) -> Leaderboard:
    """`current_fingerprints`: method → this code's fingerprint; a recorded one that differs is stale."""
    methods = (exp.summary or {}).get("methods") or {}
    price = _named_price()
    repeat = int(exp.spec.get("args", {}).get("repeat") or 1)
    rows = []
    for m in exp.methods:
        s = methods.get(m)
        if not s:
            continue
        cells = {c: s.get(key) for c, key, _ in COLUMNS}
        # Without a shared answer step (no --answer, or a method that answers itself) the whole
        # latency is the retrieval's.
        # A method whose every run was timed on another machine has no time here at all: that is not
        # an agent answering by itself, which has a latency but no shared answer step in it.
        self_answered = (cells[RETRIEVAL_S] is None and s.get("em") is not None
                         and s.get("latency_ms_p50") is not None)
        if cells[RETRIEVAL_S] is None:
            cells[RETRIEVAL_S] = s.get("latency_ms_p50")
        for c in (RETRIEVAL_S, ANSWER_S):
            if cells[c] is not None:
                cells[c] = cells[c] / 1000
        if cells["questions"] is None:
            cells["questions"] = exp.n_questions
        recorded = exp.spec.get("methods", {}).get(m, {}).get("fingerprint")
        now = (current_fingerprints or {}).get(m)
        stale = "recorded with other code or prompts than this version's" if recorded and now and now != recorded \
            else ""
        runs = max(1, int(cells["questions"] or 1) * repeat)
        named = (price.usd(s.get("tokens_in", 0) / runs, s.get("tokens_out", 0) / runs)
                 if price is not None and s.get("tokens_in") is not None else None)
        apart = timed_apart_text(m, s, exp.machine) if s.get("timed_elsewhere") else ""
        note = timed_apart_note(s, exp.machine, p50=False) if apart else ""
        rows.append(Row(m, cells, usd_text(s.get("usd_per_question")), stale, named, apart, note,
                        self_answered=self_answered, servers=server_names(exp, s)))
    # Rows on the same questions together (most questions first), each group by recall@5.
    rows.sort(key=lambda r: (-(r.cells.get("questions") or 0), -(r.cells.get("recall@5") or 0)))
    notes = []
    if rows:
        # One note for the rows split alike (a sitting elsewhere adds the same questions to each);
        # a row's own figures there are in its text table line and its cells' tooltip.
        alike: dict[str, list[str]] = {}
        for r in rows:
            if r.apart_note:
                alike.setdefault(r.apart_note, []).append(r.method)
        notes += [f"{TIMED_APART_MARK} {', '.join(ms)}: {note}" for note, ms in alike.items()]
        mine = [r.method for r in rows if r.self_answered]
        if mine:
            notes.append(SELF_ANSWERED_NOTE.format(methods=", ".join(mine)))
        if not shared_server(rows) and any(r.servers for r in rows):
            # Rows re-recorded on another server build than the rest: each set named once.
            by: dict[tuple, list[str]] = {}
            for r in rows:
                by.setdefault(r.servers, []).append(r.method)
            notes.append("the embedded model's server: " + "; ".join(
                f"{' and '.join(sv) or 'none named'} for {', '.join(ms)}" for sv, ms in by.items()))
        notes.append(f"$: {PRICE_NOTE}")
        if price is not None:
            notes.append(f"$ at {NAMED_MODEL}: the same tokens at its price (${price.input_per_mtok:g} in, "
                         f"${price.output_per_mtok:g} out per million, {price.source})")
        if all(r.cells.get("stable@5") is None for r in rows) and not any(
                s.get("stable_across_machines") for s in methods.values()):
            notes.append("stable@5 needs a second repetition, not recorded yet: each method ran once. The LLM "
                         "methods are not deterministic here (SAG repeated on 2 questions kept 1 top 5 of 2)")
        elif any(s.get("stable_questions") for s in methods.values()):
            # A recording's second repetition (traces/storage/recording.py) covers some questions so far.
            twice = ", ".join(f"{m} {int(s['stable_questions'])}" for m, s in methods.items()
                              if s.get("stable_questions"))
            notes.append("stable@5: the share of questions whose top 5 was one set in both repetitions, over the "
                         f"questions recorded twice on one machine ({twice}); the other figures read the first "
                         "repetition. A method without it retrieves without an LLM, or its second repetition is not "
                         "recorded yet")
        split = {m: s["stable_across_machines"] for m, s in methods.items() if s.get("stable_across_machines")}
        if split:
            # llama.cpp runs other kernels on avx2 than on avx-512, so one seed need not give one
            # text: such a pair would count the machines' difference as the method's instability.
            each = ", ".join(f"{m} {int(a['questions'])} (stable@5 there {a['stable@5']:.2f})"
                             for m, a in split.items())
            notes.append("stable@5 leaves out the questions whose two repetitions ran on different machines, "
                         f"where the model's kernels differ: {each}")
    return Leaderboard(rows, setting_line(exp, shared_server(rows) if rows else ""), notes,
                       exp.spec.get("protocol", "per-k"), max(exp.ks, default=0))


def server_names(exp, s: dict) -> tuple[str, ...]:
    """The embedded model's server builds a method's runs were on (its summary's `llm_servers`);
    a row stored before runs named one was on llama-cpp-python. () for an endpoint's experiment."""
    if not str(exp.llm).startswith("embedded"):
        return ()
    return tuple(sorted({name or BEFORE_LLAMA_SERVER for name in (s.get("llm_servers") or {"": 1})}))


def shared_server(rows: list[Row]) -> str:
    """The one server build every row ran on, or "" when rows differ (each row then names its own)."""
    every = {x for r in rows for x in r.servers}
    return next(iter(every)) if len(every) == 1 and all(r.servers for r in rows) else ""


def setting_line(exp, server: str = "") -> str:
    """What every method of the experiment shares, said once (FlashRAG's way): KB, questions, ks,
    answer step, LLM (and its server build when every row shares one), code, and where its times
    were taken."""
    args = exp.spec.get("args", {})
    sittings = exp.spec.get("sittings", [])
    where = exp.machine or "a machine not recorded"
    others = sorted({s["machine"] for s in sittings} - {where})
    loads = {s.get("verdict") for s in sittings}
    load = ("idle" if loads == {"idle"} else "partly under load") if sittings else ""
    # Times compare within one machine only: the experiment's own; runs resumed elsewhere are
    # scored and their times kept apart (traces/storage/recording.py), marked per row.
    timed = (f"times on {where}" + (f", {load}" if load else "")
             + (f" (runs also on {'; '.join(others)}: scored, their times kept apart, marked {TIMED_APART_MARK})"
                if others and exp.machine else ""))
    llm_n = args.get("llm_questions")
    qs = f"{exp.n_questions} questions" + (f" ({llm_n} for the LLM methods)" if llm_n and llm_n < exp.n_questions
                                           else "")
    answer = "each run ends with an answer (EM / F1)" if args.get("answer") else "no answer step"
    llm = f"{exp.llm} on {server}" if server else exp.llm
    return (f"KB {exp.kb} · {qs} · protocol {exp.spec.get('protocol', 'per-k')} · {answer} · LLM {llm} · "
            f"code {exp.code_version} · {timed}")
