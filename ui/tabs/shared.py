"""Views of stored runs that several tabs open: a session, a drill-down pair, a recording; and the
boxes a tab's handlers and the page's script pass values through."""
from __future__ import annotations

from typing import Optional

import gradio as gr

from traces.storage.store import TraceStore

from .. import render
from ..picker import paper_order


def _graph_choices(runs: dict) -> list[str]:
    return [f"{m} · {s.name}" for m, run in runs.items() for s in run.stages if s.subgraph and s.subgraph.nodes]


def _stored_session(traces: TraceStore, session_id: str) -> tuple[dict, set[str], str, str]:
    """Runs of a stored session exactly as saved (no recomputation): runs, gold, kb, question."""
    runs, gold, kb, question = {}, set(), "", ""
    for rid in traces.session_runs(session_id):
        run, info = traces.load_run(rid)
        runs[run.method] = run
        gold |= set(info["gold"])
        kb, question = info["kb"], run.question
    return runs, gold, kb, question


def _expired(what: str) -> str:
    return render.error_html(f"This {what} has expired: this demo keeps stored traces for a limited time and "
                             "space, and removed it. Run it again to see it.")


def _stored_runs(traces: TraceStore, run_ids: list[str]) -> tuple[dict, set[str]]:
    """Runs opened from an experiment, labelled by method as the drill-down showed them."""
    runs, gold = {}, set()
    for rid in run_ids:
        run, info = traces.load_run(rid)
        runs[run.method if run.method not in runs else f"{run.method} [{rid[:6]}]"] = run
        gold |= set(info["gold"])
    return runs, gold



SHOWCASE_PREFIX = "showcase:"
RUNS_PREFIX = "runs:"  # session_state of a pair opened from an experiment



def script_box(elem_id: str) -> gr.Textbox:
    """A box between a handler and the page's own script, hidden by CSS: a component made
    invisible gets no value."""
    gr.HTML(f"<style>#{elem_id}{{display:none}}</style>")
    return gr.Textbox(elem_id=elem_id, show_label=False, container=False)


def _showcase_grid(sc, item, titles: Optional[dict] = None, bodies: bool = True) -> str:
    """A recorded question's columns: every method's run, those recorded by other code labelled
    with the version that recorded them and what changed since. `bodies=False`: the stages'
    lines alone (the first view's, in the page's config; the bodies follow at load)."""
    note = (f"<div class='ht-recorded' id='recorded-banner' title='{render.esc(sc.model)}'>▶ Recorded, not live: "
            f"{render.esc(sc.banner)}. "
            f"<b>Run live</b> runs it now.</div>")
    if item.stale:
        note += ("<div class='ht-stale' id='stale-banner'>⚠ Recorded by earlier code: "
                 + ", ".join(render.esc(m) for m in item.stale) + ". Shown as recorded, each column says which "
                 "version recorded it (<code>hoptrace record-showcase --update</code> records it again).</div>")
    # The banner names the machine (sc.banner): the columns say it only where one differs.
    return note + _stored_grid(paper_order(item.runs), set(item.gold), notes=item.notes, titles=titles,
                               bodies=bodies, banner_names_machine=True)


def _stored_grid(runs: dict, gold: set[str], graph_links: bool = True, notes: Optional[dict] = None,
                 titles: Optional[dict] = None, bodies: bool = True, banner_names_machine: bool = False) -> str:
    common = render.most_runs_machine(runs.values())
    return render.grid_html((render.column_html(m, r.stages, r, gold, running=False, graph_links=graph_links,
                                                note=(notes or {}).get(m, ""), titles=titles, bodies=bodies,
                                                machine=render.machine_text(r) != common) for m, r in runs.items()),
                            machine="" if banner_names_machine else common)


def _gold_titles(state, kb: str, gold) -> dict:
    """The KB's titles of the gold passages, so a missed one is named by its title even when no
    stage drew it. Empty when the KB cannot be read: the id is then shown, never an error."""
    if not gold:
        return {}
    try:
        return {p.id: p.title for p in state.kb(kb, warm=False).ctx.store.passages(list(gold)) if p.title}
    except Exception:  # noqa: BLE001 - naming is a courtesy; the run is shown either way
        return {}




def _drawn_titles(state, kb: str, runs: dict, titles: dict) -> dict:
    """`titles` with the KB's title of every passage the runs' stages drew that it lacks: a run
    still arriving has no ranking yet to name its passages by, so its map would show bare chunk
    ids where the recorded one shows titles. One indexed lookup for the new ids only."""
    drawn = {nd.id for run in runs.values() for st in run.stages if st.subgraph
             for nd in st.subgraph.nodes if nd.type == "passage" and nd.id not in titles}
    if not drawn:
        return titles
    try:
        found = {p.id: p.title for p in state.kb(kb, warm=False).ctx.store.passages(sorted(drawn)) if p.title}
    except Exception:  # noqa: BLE001 - naming is a courtesy; the map is drawn either way
        return titles
    return {**titles, **found}


def _picker_names(picker) -> list[str]:
    return [c[1] if isinstance(c, (tuple, list)) else c for c in picker.choices]

