"""`hoptrace bench-app --together`: the LLM methods asked together in the page, as a visitor asks
them, against each asked alone, on the same new questions.

Two apps are started alike, with the response cache off (HOPTRACE_LLM_CACHE=0: every call reaches
the model) and the embedded model, and driven in headless Chromium at 1440x900: one is asked the
methods together in one request, the other each alone in its own (so neither finds the other's
prompts in the model's prompt cache), and they swap roles each question. The questions are demo
questions the showcase does not hold.
Recorded per question and method: the seconds from the click to the method's ranking appearing in
its column.

Printed: the table, the median over questions of each method's together-time over its alone-time,
the first LLM method's (the one that arrived first) and the last one's against the sum of the
alone times (more than 1: work was lost between the methods), the machine, and whether it was
idle before and after (the idle watch's calibration workload).

Each ask's runs are then read from the trace file the apps wrote: each method's LLM calls, their
tokens and the seconds the model spent on them. Asked together and alone, a method makes the same
calls (temperature 0, the response cache off), so where the tokens match, the seconds outside the
model's calls are the app's own share (the page, the turns, the LLM-free stages): `overhead_s`,
together against the three alone asks summed. A last arrival over the sum with less overhead
together was the model computing the same calls slower, not work lost between the methods.
"""
from __future__ import annotations

import json
import os
import re
import statistics
import time
from pathlib import Path

from retrieval.core import cpu, idle

from .page import ARGS, CHROMIUM, _pids, open_page, pick, proc_stat, started_app

_SESSION = "() => { const g = document.querySelector('#columns .ht-grid'); return g ? g.dataset.session : null; }"

METHODS = ("gear", "sag", "grasp")


def _new_questions(n: int, skip: int = 10) -> list[str]:
    """Demo questions past the showcase's and the shipped experiment's first ones."""
    from retrieval.kb.presets import demo_path
    from retrieval.store import open_store

    store = open_store(str(demo_path()))
    qs = [q.text for q in store.questions()]
    return qs[-(skip + n):-skip] if len(qs) > skip + n else qs[:n]


# Installed in the page at the click: the seconds from the click to each method's ranking, read
# from the grid of the new session only (the first view's recorded columns hold rankings of every
# method already, and the last session's grid stays until the new one replaces it).
_WATCH = """([methods]) => {
    const grid = () => document.querySelector('#columns .ht-grid');
    const g0 = grid(); const before = g0 ? g0.dataset.session : null;
    const t0 = performance.now(); window.__htArrived = {};
    const check = () => {
        const g = grid();
        if (!g || !g.dataset.session || g.dataset.session === before) return;
        for (const m of methods) {
            if (!(m in window.__htArrived) && g.querySelector(`.ht-col[data-method='${m}'] table.ht-ranking`))
                window.__htArrived[m] = Math.round((performance.now() - t0) / 100) / 10;
        }
    };
    if (window.__htObs) window.__htObs.disconnect();
    window.__htObs = new MutationObserver(check);
    window.__htObs.observe(document.body, {childList: true, subtree: true, characterData: true});
    document.querySelector('#run').click();
}"""


def _cpu_by_pid() -> tuple[dict[int, int], dict[int, float]]:
    """Every process's parent and CPU seconds so far (user + system), from /proc."""
    parent, cpu_s = {}, {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)], cpu_s[int(d.name)] = proc_stat(int(d.name))
            except OSError:   # gone since the listing
                continue
    return parent, cpu_s


def _tree(root: int, parent: dict[int, int]) -> set[int]:
    found, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in found} - found
        grew, found = bool(more), found | more
    return found


def steal_s() -> float:
    """Seconds so far that the hypervisor ran something else while this VM's CPUs had work
    (/proc/stat's steal, all CPUs): the host's share of a slow ask, which no process here shows."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


def cpu_split(app_pid: int) -> dict[str, float]:
    """CPU seconds so far of the model server (the app's children), the app itself, and the
    browser (this process's other descendants), and the host's steal: where two cores went
    during an ask."""
    parent, cpu_s = _cpu_by_pid()
    app = _tree(app_pid, parent)
    model = app - {app_pid}
    browser = _tree(os.getpid(), parent) - {os.getpid()} - set().union(*(_tree(p, parent) for p in _pids.values()))
    return {"model": sum(cpu_s.get(p, 0) for p in model), "app": cpu_s.get(app_pid, 0.0),
            "browser": sum(cpu_s.get(p, 0) for p in browser), "steal": steal_s()}


def _ask(page, question: str, methods: tuple[str, ...], timeout_s: float = 900,
         shot=None) -> tuple[dict[str, float], str]:
    """Seconds from the click to each method's ranking in its column, and the ask's session id.
    `shot`: a path for a screenshot taken once while the last method waits for its turn, its
    waiting line kept in `WAITING`."""
    pick(page, methods, question)
    app_pid = _pids.get(page.url.split("?")[0].rstrip("/") + "/")
    cpu0 = cpu_split(app_pid) if app_pid else {}
    t0 = time.perf_counter()
    page.evaluate(_WATCH, [list(methods)])
    arrived: dict[str, float] = {}
    while len(arrived) < len(methods) and time.perf_counter() - t0 < timeout_s:
        page.wait_for_timeout(200)
        arrived = page.evaluate("() => window.__htArrived || {}")
        if shot is not None and not WAITING and 0 < len(arrived) < len(methods):
            queued = page.locator(f"#columns .ht-col[data-method='{methods[-1]}'] .ht-queued")
            if queued.count() and "starts after" in queued.first.inner_text():
                WAITING.update(method=methods[-1], text=queued.first.inner_text(),
                               at_s=round(time.perf_counter() - t0, 1))
                page.locator("#columns").scroll_into_view_if_needed()
                page.screenshot(path=str(shot))
    if len(arrived) < len(methods):
        raise TimeoutError(f"{sorted(set(methods) - set(arrived))} showed no ranking within {timeout_s:.0f} s "
                           f"of asking {question!r}")
    if cpu0:   # CPU seconds the ask took, by whom (read when the last column's ranking arrived)
        CPU.append({k: round(v - cpu0[k], 1) for k, v in cpu_split(app_pid).items()} | {"methods": list(methods)})
    if shot is not None and WAITING.get("method") in arrived:
        WAITING["arrived_s"] = arrived[WAITING["method"]]
        said = re.search(r"in about (\d+) s · about (\d+) s of work", WAITING.get("text", ""))
        if said:   # what the line promised, from the moment it was read, against what happened
            WAITING["expected_arrival_s"] = round(WAITING["at_s"] + int(said[1]) + int(said[2]), 1)
    return arrived, page.evaluate(_SESSION) or ""


def model_work(session_id: str, path=None) -> dict[str, dict]:
    """Each method's LLM calls in a stored ask: how many, their tokens (in, out) and the seconds the
    model spent on them, from the trace file the apps wrote ($HOPTRACE_HOME, as this process's)."""
    from traces.storage.store import TraceReader, default_path

    reader = TraceReader(path or default_path())
    try:
        out = {}
        for rid in reader.run_ids(session=session_id):
            run, _ = reader.load_run(rid)
            calls = [c for st in run.stages for c in st.llm_calls]
            if calls:
                out[run.method] = {"calls": len(calls),
                                   "tokens": [sum(c.tokens_in for c in calls), sum(c.tokens_out for c in calls)],
                                   "model_s": round(sum(c.latency_ms for c in calls) / 1000, 1)}
        return out
    finally:
        reader.close()


CPU: list[dict] = []  # each ask's CPU seconds: the model server, the app, the browser; the host's steal
WAITING: dict = {}   # the waiting line a screenshot caught, and when that method's ranking arrived


def together(n_questions: int = 5, methods: tuple[str, ...] = METHODS, app_dir=None, shots=None,
             crossover: bool = False) -> dict:
    """`app_dir`: the app.py of another checkout (the code before a change), driven the same way.
    `shots`: a folder for the page while the last method waits (its line and its arrival kept).

    Two apps, started alike: one is asked together, the other each alone, and they swap each
    question. In one app the second
    asking of a question found the first one's prompts in the model's prompt cache (1 GB of states,
    resumed from the longest matching prefix) and read them no more: alone after together, SAG took
    10.2 s, against 18.4 s alone in an app of its own. Each app is warmed up on the same other question
    (the model server's start, each method's fixed instructions in the cache, a run to estimate from).

    `crossover`: four apps, two pairs, and each question measured in both: together then alone in
    one pair, alone then together in the other (T A A T in time), the roles of each pair's apps
    swapped. Identical asks in two apps came out up to 3 % apart and the host's speed drifted 14 %
    over one run (calibration 87.0 then 76.5 ms), while the excess over the sum was 0.5-12.8 %: the
    means of the two orders cancel each app's speed and a steady drift. Each ask has a page of its
    own, opened before it and closed after: open pages' idle frames grew with the asks they had made."""
    from contextlib import ExitStack

    from playwright.sync_api import sync_playwright

    from .page import REPO_ROOT

    before = idle.calibrate()
    rows, rounds = [], []
    env = {"HOPTRACE_LLM_CACHE": "0", "HOPTRACE_PUBLIC": ""}
    with ExitStack() as apps:
        urls = [apps.enter_context(started_app(env, app_dir or REPO_ROOT)) for _ in range(4 if crossover else 2)]
        pairs = [urls[:2], urls[2:]] if crossover else [urls]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            # A demo question just before the measured ones: a made-up one sent the agents round
            # their loops to the end and left estimates of 6 s (SAG) and 79 s (GRASP) behind it.
            warm_up, *questions = _new_questions(n_questions + 1)
            for m in methods:
                for url in urls:
                    _ask_fresh(browser, url, warm_up, (m,))
            for i, q in enumerate(questions):
                measured = []
                for j, pair in enumerate(pairs):
                    # The apps swap roles each question. With together always in the same app, the
                    # same calls (tokens alike) took 3-6 % longer together than alone: swapping keeps
                    # one model server's own speed from passing for the cost of asking together.
                    both_url, alone_url = pair[(i + j) % 2], pair[1 - (i + j) % 2]
                    shot = (Path(shots) / "together-waiting.png") if shots and i == 0 and j == 0 else None
                    row = _measure(browser, q, methods, both_url, alone_url, alone_first=j == 1, shot=shot)
                    row["together_in_app"] = "abcd"[urls.index(both_url)]
                    measured.append(row)
                rounds.extend(measured)
                rows.append(measured[0] if len(measured) == 1 else _mean_row(measured, methods))
            browser.close()
    after = idle.calibrate()
    return summarise(rows, methods) | {"waiting_seen": dict(WAITING), "machine": cpu.describe(),
                                       "calibration_ms_before": round(before, 1),
                                       "calibration_ms_after": round(after, 1), "rows": rows,
                                       "cores": os.cpu_count()} | (
        {"each_round": summarise(rounds, methods), "rounds": rounds} if crossover else {})


def _ask_fresh(browser, url: str, question: str, methods: tuple[str, ...], shot=None):
    """_ask in a page of its own, opened and let settle first (its first view draws a hop map),
    closed after."""
    page = open_page(browser, url)
    try:
        page.wait_for_timeout(5000)
        return _ask(page, question, methods, shot=shot)
    finally:
        page.close()


def _measure(browser, q: str, methods: tuple[str, ...], both_url: str, alone_url: str,
             alone_first: bool = False, shot=None) -> dict:
    """One question asked together in one app and each method alone in the other: a row."""
    def asked_together():
        both, session = _ask_fresh(browser, both_url, q, ("griever", *methods), shot=shot)
        both.pop("griever", None)
        return both, model_work(session), CPU[-1] if CPU else {}

    def asked_alone():
        alone, work = {}, {}
        for m in methods:
            arrived, session = _ask_fresh(browser, alone_url, q, (m,))
            alone[m] = arrived.get(m)
            work.update(model_work(session))
        summed = {k: round(sum(c.get(k, 0) for c in CPU[-len(methods):]), 1)
                  for k in ("model", "app", "browser", "steal")} if CPU else {}
        return alone, work, summed

    if alone_first:
        alone, work_alone, cpu_alone = asked_alone()
        both, work_both, cpu_both = asked_together()
    else:
        both, work_both, cpu_both = asked_together()
        alone, work_alone, cpu_alone = asked_alone()
    row = {"question": q, "together": both, "alone": alone, "work_together": work_both, "work_alone": work_alone,
           "cpu_s_together": cpu_both, "cpu_s_alone_summed": cpu_alone, "alone_first": alone_first}
    print(f"{q[:60]}: together {both}, alone {alone}; CPU s together {cpu_both}, alone summed {cpu_alone}",
          flush=True)
    print("row " + json.dumps(row), flush=True)   # kept in the log should a later question fail
    return row


def _mean_row(measured: list[dict], methods: tuple[str, ...]) -> dict:
    """A question's rounds as one row: each method's mean arrival together and alone (None where a
    round has none), the rounds kept for their split (overhead)."""
    def mean(key, m):
        vals = [r[key].get(m) for r in measured]
        return round(statistics.mean(vals), 1) if all(vals) else None

    return {"question": measured[0]["question"], "together": {m: mean("together", m) for m in methods},
            "alone": {m: mean("alone", m) for m in methods}, "rounds": measured,
            "together_in_app": "+".join(r.get("together_in_app", "?") for r in measured)}


def overhead(row: dict, methods: tuple[str, ...]) -> dict | None:
    """Where each method made the same calls together and alone (tokens alike): the seconds the
    model spent on them both ways, and the rest, outside the model's calls (the last arrival
    together, the alone arrivals summed). None where the calls differ or were not read."""
    if "rounds" in row:   # a crossover question: the mean of its rounds' splits, where each has one
        splits = [overhead(r, methods) for r in row["rounds"]]
        if not all(splits):
            return None
        return {k: [round(statistics.mean(s[k][i] for s in splits), 1) for i in (0, 1)]
                for k in ("model_s", "overhead_s")}
    wt, wa = row.get("work_together") or {}, row.get("work_alone") or {}
    t, a = row["together"], row["alone"]
    if not all(m in wt and m in wa and wt[m]["tokens"] == wa[m]["tokens"] and t.get(m) and a.get(m)
               for m in methods):
        return None
    model_t = sum(wt[m]["model_s"] for m in methods)
    model_a = sum(wa[m]["model_s"] for m in methods)
    return {"model_s": [round(model_t, 1), round(model_a, 1)],
            "overhead_s": [round(max(t[m] for m in methods) - model_t, 1),
                           round(sum(a[m] for m in methods) - model_a, 1)]}


def summarise(rows: list[dict], methods: tuple[str, ...]) -> dict:
    """Each method's median together/alone, the first arrival's ratio, the last's against the sum,
    and where the same calls were made both ways, whose seconds a question over the sum lost."""
    ratio = {m: round(statistics.median(r["together"][m] / r["alone"][m] for r in rows
                                        if r["together"].get(m) and r["alone"].get(m)), 2)
             for m in methods if any(r["together"].get(m) and r["alone"].get(m) for r in rows)}
    first, last, over, same, ours = [], [], 0, 0, 0
    for r in rows:
        t, a = r["together"], r["alone"]
        if not all(t.get(m) and a.get(m) for m in methods):
            continue
        m1 = min(methods, key=lambda m: t[m])
        first.append(t[m1] / a[m1])
        total = sum(a[m] for m in methods)
        last.append(max(t.values()) / total)
        over += max(t.values()) > total
        split = overhead(r, methods)
        if split:
            same += 1
            # Over the sum with more time outside the model's calls together than alone: lost by
            # the app, not by the model computing the same calls slower.
            ours += max(t.values()) > total and split["overhead_s"][0] > split["overhead_s"][1]
    return {"together_over_alone_median": ratio,
            "first_arrival_over_its_alone_median": round(statistics.median(first), 2) if first else None,
            "last_arrival_over_sum_alone_median": round(statistics.median(last), 2) if last else None,
            "last_arrival_over_sum_alone_max": round(max(last), 2) if last else None,
            "questions_where_together_cost_more_than_the_sum": over,
            "questions_with_the_same_calls_together_and_alone": same,
            "questions_over_the_sum_with_more_overhead_together": ours, "questions": len(rows)}


def table(res: dict, methods: tuple[str, ...] = METHODS) -> str:
    """Per question: each method's seconds together and alone, the sum alone and the last arrival."""
    head = ("| question | " + " | ".join(f"{m} together / alone" for m in methods)
            + " | last together | sum alone | model s together / alone | overhead s together / alone |")
    lines = [head, "|" + "---|" * (len(methods) + 5)]
    for r in res["rows"]:
        t, a = r["together"], r["alone"]
        cells = [f"{t.get(m, '-')} / {a.get(m, '-')}" for m in methods]
        total = sum(a.get(m) or 0 for m in methods)
        split = overhead(r, methods)
        model, rest = ((" / ".join(map(str, split["model_s"])), " / ".join(map(str, split["overhead_s"])))
                       if split else ("calls differ" if r.get("work_together") else "-", "-"))
        lines.append(f"| {r['question'][:48]} | " + " | ".join(cells)
                     + f" | {max(t.values(), default=0):.1f} | {total:.1f} | {model} | {rest} |")
    return "\n".join(lines)
