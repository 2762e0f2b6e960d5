"""The Judge view: a person grades an experiment's pooled passages one at a time, 0–3.

Which methods retrieved a passage, and the LLM's or the rule's grade, stay hidden until the
person has graded it, so neither biases them; after a grade they show for that passage. A
person's grade is stored as their own judgment (a public visitor's belong to that visitor) and
overrides the automatic judges' in every judged measure. No Gradio here: ui/tabs/judge.py wires it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

from retrieval.core.errors import InputError
from traces.judging.pool import Pool, Pools
from traces.judging.qrels import GRADES, Judgment, Qrels
from traces.judging.queue import bounds, judged, weigh
from traces.storage.experiments import Experiment, Experiments

from . import render

QUEUE_METRIC = "p@5"   # the verdicts the queue serves, and bounds exactly (traces/judging/queue.py)

@dataclass
class Cursor:
    """Where a person is in an experiment's pool (kept in the page's state)."""
    experiment_id: str = ""
    pos: int = 0
    last: Optional[int] = None   # the pair graded just before, whose reveal shows under the next one
    history: list = field(default_factory=list)   # positions shown before, for Back (the queue has no "previous")

    def to_state(self) -> dict:
        return {"experiment_id": self.experiment_id, "pos": self.pos, "last": self.last,
                "history": self.history[-200:]}

    @classmethod
    def from_state(cls, d: Optional[dict]) -> "Cursor":
        d = d or {}
        return cls(d.get("experiment_id", ""), int(d.get("pos") or 0), d.get("last"), list(d.get("history") or []))

    def move(self, pos: int) -> None:
        self.history.append(self.pos)
        self.pos = pos

    def back(self) -> None:
        self.pos = self.history.pop() if self.history else max(0, self.pos - 1)


class JudgeDesk:
    """An experiment's pool, the person's grades so far, and the automatic judges' (hidden until graded)."""

    def __init__(self, experiments: Experiments, exp: Experiment, owner: str = ""):
        self.experiments, self.exp, self.owner = experiments, exp, owner
        self.qrels = Qrels(experiments.traces)
        pool: Optional[Pool] = Pools(experiments).get(exp.id)
        if pool is None or not pool.pairs:
            raise InputError(f"experiment {exp.id[:12]} has no pool yet: pool it above (depth 5 or 10), or run "
                             f"`hoptrace judge {exp.id[:12]}`")
        self.pool = pool
        self.questions = {q["id"]: q for q in exp.questions}
        self._grades = self._bounds = None   # read once a click (the queue and the verdicts share them)

    def person_grades(self) -> dict[tuple[str, str], int]:
        return {(j.question_id, j.passage_id): j.grade for j in self.qrels.all(self.exp.id, self.owner, "person", "ok")}

    def first_unjudged(self, start: int = 0) -> int:
        done = self.person_grades()
        n = len(self.pool.pairs)
        for i in list(range(start, n)) + list(range(0, start)):
            p = self.pool.pairs[i]
            if (p.question_id, p.passage_id) not in done:
                return i
        return min(start, n - 1)

    # --- the queue (traces/judging/queue.py) --------------------------------------------------
    # One click reads the grades and bounds the verdicts once: the queue and the verdicts box share
    # them, and a grade clears them.
    def _judged(self):
        if self._grades is None:
            self._grades = judged(self.qrels, self.exp.id, self.owner)
        return self._grades

    def bounds(self) -> list:
        """Each method pair's verdict at QUEUE_METRIC, settled or open ([] for a pool shallower than k)."""
        if self._bounds is None:
            _, grades, person = self._judged()
            self._bounds = ([] if self.pool.depth < int(QUEUE_METRIC.partition("@")[2])
                            else bounds(self.pool, grades, person, QUEUE_METRIC))
        return self._bounds

    def queue(self) -> list:
        """The ungraded pairs, those whose grade can change an open verdict most first."""
        prior, _, person = self._judged()
        return weigh(self.pool, prior, person, QUEUE_METRIC, None, {(b.a, b.b) for b in self.bounds() if b.settled})

    def next_in_queue(self, after: Optional[int] = None) -> int:
        """The position of the heaviest ungraded pair (after `after`'s place in the queue, to skip it)."""
        index = {(p.question_id, p.passage_id): i for i, p in enumerate(self.pool.pairs)}
        order = [index[(it.pair.question_id, it.pair.passage_id)] for it in self.queue()]
        if not order:
            return self.first_unjudged()
        if after is not None and after in order:
            rest = order[order.index(after) + 1:]
            return rest[0] if rest else order[0]
        return order[0]

    def verdicts_html(self) -> str:
        """Each method pair as the grades leave it: settled, or open and how many grades could change it."""
        bs = self.bounds()
        if not bs:
            return ""
        settled = sum(b.settled for b in bs)
        rows = "".join(f"<li class='{'ht-settled' if b.settled else 'ht-open'}'>{render.esc(b.line())}</li>"
                       for b in sorted(bs, key=lambda b: (not b.settled, b.open)))
        return (f"<style>{_CSS}</style><div id='judge-verdicts' class='ht-meta'><b>Verdicts at "
                f"{render.esc(QUEUE_METRIC)}</b>: {settled} of "
                f"{len(bs)} settled by your grades (the rest could still change with the grades you have not "
                f"given; until then they rest on the automatic judges)<ul>{rows}</ul></div>")

    def grade(self, pos: int, grade: int) -> None:
        if grade not in GRADES:
            raise InputError(f"grade {grade!r} is outside 0–3")
        p = self.pool.pairs[pos]
        self.qrels.put(self.exp.id, [Judgment(p.question_id, p.passage_id, grade, "person", "person",
                                              "judge view", time.time(), owner=self.owner)])
        self._grades = self._bounds = None

    def progress(self) -> str:
        done = self.person_grades()
        n = len(self.pool.pairs)
        return f"{sum((p.question_id, p.passage_id) in done for p in self.pool.pairs)} / {n} judged"

    def automatic(self, question_id: str, passage_id: str) -> list[Judgment]:
        """The automatic judges' judgments of a pair (shown only after the person's grade)."""
        return [j for j in self.qrels.all(self.exp.id, self.owner) if j.source != "person"
                and (j.question_id, j.passage_id) == (question_id, passage_id)]

    # --- rendering --------------------------------------------------------------------------
    def pair_html(self, pos: int, passages: dict) -> str:
        p = self.pool.pairs[pos]
        q = self.questions.get(p.question_id, {})
        doc = passages.get(p.passage_id)
        title, text = (doc.title, doc.text) if doc else (p.passage_id, "(this passage is no longer in the KB)")
        mine = self.person_grades().get((p.question_id, p.passage_id))
        n_q = len(self.pool.by_question())
        q_index = list(self.pool.by_question()).index(p.question_id) + 1
        head = (f"<div class='ht-meta' id='judge-where'>pair {pos + 1} of {len(self.pool.pairs)} · question {q_index} "
                f"of {n_q} ({render.esc(p.question_id)}) · pool depth {self.pool.depth}</div>")
        body = (f"<div id='judge-question'><b>Question</b>: {render.esc(q.get('text', ''))}</div>"
                f"<div id='judge-passage' class='ht-passage'><b>{render.esc(title)}</b><br>{render.esc(text)}</div>")
        reveal = self.reveal_html(pos) if mine is not None else (
            "<div class='ht-meta' id='judge-hidden'>Which methods retrieved it, and the automatic judges' grades, "
            "show once you grade it.</div>")
        return f"<style>{render.CSS}{_CSS}</style>{head}{body}{reveal}"

    def reveal_html(self, pos: int, label: str = "this passage") -> str:
        p = self.pool.pairs[pos]
        mine = self.person_grades().get((p.question_id, p.passage_id))
        ranks = ", ".join(f"{render.esc(m)} #{r}" for m, r in sorted(p.ranks.items(), key=lambda kv: kv[1]))
        auto = self.automatic(p.question_id, p.passage_id)
        auto_txt = "; ".join(
            (f"{'the answer rule' if j.source == 'answer' else 'LLM ' + render.esc(j.judge)}: "
             + (f"grade {j.grade}" if j.status == "ok" else f"failed ({render.esc(j.reason[:80])})"))
            for j in auto) or "no automatic judge has graded it"
        gold = set(self.questions.get(p.question_id, {}).get("gold") or [])
        gold_txt = (" · <b>gold</b>: " + ("a supporting passage" if p.passage_id in gold else "not a supporting "
                                          "passage")) if gold else ""
        yours = f"your grade <b>{mine}</b> ({render.esc(GRADES[mine])})" if mine is not None else "not graded by you"
        return (f"<div class='ht-reveal' id='judge-reveal'>{render.esc(label)}: {yours} · retrieved by {ranks} · "
                f"{auto_txt}{gold_txt}</div>")


_CSS = """
#judge-question{font-size:1.05em;margin:.4em 0}
.ht-passage{border:1px solid #cbd5e1;border-radius:6px;padding:.6em .8em;margin:.4em 0;white-space:pre-wrap}
.ht-reveal{background:#f1f5f9;border-radius:6px;padding:.4em .6em;margin:.3em 0;font-size:.92em}
#judge-verdicts li.ht-settled{color:#166534}
"""

# Keys 0–3 grade, s skips, b goes back — while the Judge tab shows a pair and no text box has the focus.
JUDGE_KEYS_JS = """() => {
  document.addEventListener('keydown', (e) => {
    const pair = document.querySelector('#judge-passage');
    if (!pair || pair.offsetParent === null) return;
    const t = e.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.isContentEditable)) return;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const ids = {'0': 'judge-g0', '1': 'judge-g1', '2': 'judge-g2', '3': 'judge-g3', 's': 'judge-skip',
                 'b': 'judge-back'};
    const id = ids[e.key];
    if (!id) return;
    const btn = document.getElementById(id);
    if (btn) { e.preventDefault(); btn.click(); }
  });
}"""
