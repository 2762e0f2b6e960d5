"""The hop map (retrieval/trace/hopmap.py): one layered graph a run's stages build, with fixed
places, what each stage added and pruned, gold passages and the paths that reached them; and the
viewer document it is drawn in (hopmap_view.py), escaped."""
import gzip
import json
from pathlib import Path

import pytest

from retrieval.core.errors import ConfigError
from retrieval.trace import hopmap, hopmap_view
from retrieval.trace.model import RankedPassage, RunResult, Stage, Subgraph

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "showcase" / "demo.json.gz"
EVIL = "<img src=x onerror=alert(1)></script><script>alert(2)</script>"


def _stage(name: str, nodes=(), edges=(), **payload) -> Stage:
    g = Subgraph()
    for n in nodes:
        g.node(*n)
    for e in edges:
        g.edge(*e)
    return Stage(name=name, title=name, payload=dict(payload), subgraph=g if nodes else None)


def _griever_like() -> RunResult:
    """Two iterations: the question's passages, a shortlist of entities, a join that keeps one;
    the second iteration's passages; the gold passage g2 is held in iteration 1 and lost."""
    q = ("q", "question", "Who founded the label?")
    stages = [
        _stage("clause_split", [q, ("sq1", "query", "the label that signed the band")], [("q", "sq1", "split_at")]),
        _stage("retrieve_1", [("q", "query", "Who founded the label?"), ("g1", "passage", "Gold One", 0.9),
                              ("g2", "passage", "Gold Two", 0.5), ("p3", "passage", "Other", 0.4)],
               [("q", "g1", "retrieved"), ("q", "g2", "retrieved"), ("q", "p3", "retrieved")]),
        _stage("shortlist_1", [("e:A", "entity", "Alpha"), ("e:B", "entity", "Beta"), ("e:C", "entity", "Gamma")],
               [("e:A", "e:B", "triple")]),
        _stage("join_1", [("e:A", "entity", "Alpha", None)], []),
        _stage("retrieve_2", [("q", "query", "Who founded Alpha?"), ("g1", "passage", "Gold One", 0.8)],
               [("q", "g1", "retrieved")]),
        _stage("ranking", [q, ("g1", "passage", "Gold One", 1.0)], [("q", "g1", "retrieved")]),
    ]
    run = RunResult(method="griever", question=q[2], stages=stages,
                    ranked=[RankedPassage("g1", 1.0, "Gold One")])
    return run


def test_layers_lanes_and_fixed_places():
    hm = hopmap.build(_griever_like(), ["g1", "g2"], top_n=2)
    by = {n.key: n for n in hm.nodes}
    question = by["q::who founded the label?"]
    assert question.layer == 0 and question.kind == "question"
    assert by["passage::g1"].layer == len(hm.layers) - 1          # passages: the last layer
    assert hm.lanes == ["start", "iteration 1", "iteration 2"] or hm.lanes[:2] == ["start", "iteration 1"]
    # the same run gives the same places, node for node
    again = {n.key: (n.x, n.y) for n in hopmap.build(_griever_like(), ["g1", "g2"], top_n=2).nodes}
    assert again == {n.key: (n.x, n.y) for n in hm.nodes}
    # no two shown nodes share a place, and a cell's nodes are one row apart
    shown = [(n.x, n.y) for n in hm.nodes if not n.hidden] + [(m.x, m.y) for m in hm.more]
    assert len(shown) == len(set(shown))


def test_each_node_knows_the_stage_that_added_and_the_one_that_pruned_it():
    run = _griever_like()
    hm = hopmap.build(run, ["g1", "g2"], top_n=5)
    names = [s.name for s in run.stages]
    by = {n.key: n for n in hm.nodes}
    assert names[by["entity::e:B#0"].added] == "shortlist_1"
    assert names[by["entity::e:B#0"].pruned] == "join_1"         # the join kept only Alpha
    assert by["entity::e:A#0"].pruned is None
    assert by["passage::g1"].pruned is None and by["passage::g1"].rank == 1
    # the gold passage g2 was held by retrieve_1 and lost by the next stage holding passages
    g2 = by["passage::g2"]
    assert g2.gold and names[g2.dropped_gold] == "retrieve_2"
    assert hm.stages[g2.dropped_gold].gold_dropped == ["Gold Two"]
    assert hm.gold_found == 1 and hm.gold_total == 2


def test_the_path_from_the_question_to_a_gold_passage_is_marked():
    hm = hopmap.build(_griever_like(), ["g1"])
    path = [e for e in hm.edges if e.gold_path]
    assert path and any(e.target == "passage::g1" for e in path)
    # not through the final ranking's question → passage edge, which every passage has
    ranking = len(hm.stages) - 1
    assert all(e.added != ranking for e in path)


def test_a_crowded_cell_shows_its_top_n_and_says_how_many_more(monkeypatch):
    passages = [(f"p{i}", "passage", f"P{i}", i / 10) for i in range(9)]
    edges = [("q", f"p{i}", "retrieved") for i in range(9)]
    stages = [_stage("retrieve_1", [("q", "question", "q?"), *passages], edges)]
    run = RunResult(method="bm25", question="q?", stages=stages, ranked=[RankedPassage("p1", 1.0, "P1")])
    hm = hopmap.build(run, ["p1"], top_n=4)
    shown = [n for n in hm.nodes if n.kind == "passage" and not n.hidden]
    assert len(shown) == 4 and hm.more[0].count == 5
    assert shown[0].key == "passage::p1"                    # gold first, then by the stage's score
    assert [n.score for n in shown[1:]] == sorted((n.score for n in shown[1:]), reverse=True)
    monkeypatch.setenv("HOPTRACE_HOPMAP_TOP_N", "7")
    assert hopmap_view.top_n() == 7
    monkeypatch.setenv("HOPTRACE_HOPMAP_TOP_N", "none")
    with pytest.raises(ConfigError, match="HOPTRACE_HOPMAP_TOP_N"):
        hopmap_view.top_n()


def test_labels_fit_two_lines_and_keep_their_whole_text():
    assert hopmap.two_lines("Journal of Psychotherapy Integration", 18) == "Journal of\nPsychotherapy Int…"
    assert all(len(line) <= 18 for line in hopmap.two_lines("x" * 100, 18).split("\n"))
    hm = hopmap.build(_griever_like(), ["g1"])
    node = next(n for n in hm.nodes if n.key == "q::the label that signed the band")
    assert node.full == "the label that signed the band"


def test_the_viewer_document_keeps_a_hostile_label_as_data():
    run = _griever_like()
    run.stages[2].subgraph.nodes[0].label = EVIL
    doc = hopmap_view.document([hopmap_view.ViewerRun("griever", run, ("g1",))], vis_src="static/vis.js")
    raw = doc.split("<script type='application/json' id='hopmap-data'>", 1)[1].split("</script>", 1)[0]
    assert set(raw) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")   # base64 only
    assert any(n["f"] == EVIL for n in hopmap_view.unpacked(doc)["maps"][0]["nodes"])   # whole, as text
    frame = hopmap_view.iframe([hopmap_view.ViewerRun("griever", run, ("g1",))], vis_src="static/vis.js")
    assert "<img" not in frame and "sandbox='allow-scripts allow-downloads'" in frame


@pytest.mark.skipif(not SHIPPED.exists(), reason="no shipped recording")
def test_every_shipped_run_draws_a_map_with_its_gold():
    doc = json.loads(gzip.decompress(SHIPPED.read_bytes()))
    for item in doc["items"]:
        for method, raw in item["runs"].items():
            run = RunResult.from_dict(raw)
            hm = hopmap.build(run, item["gold"])
            keys = {n.key for n in hm.nodes}
            assert sum(n.kind == "question" for n in hm.nodes) == 1, method
            for pid in item["gold"]:
                if pid in run.ranked_ids():
                    assert f"passage::{pid}" in keys, (method, pid)
            places = [(n.x, n.y) for n in hm.nodes if not n.hidden] + [(m.x, m.y) for m in hm.more]
            assert len(places) == len(set(places)), method
            assert all(sum(1 for n in hm.nodes if not n.hidden and (n.lane, n.layer) == c) <= hm.top_n
                       for c in {(n.lane, n.layer) for n in hm.nodes}), method


def test_a_gold_passage_no_stage_reached_is_drawn_as_the_missed_target():
    hm = hopmap.build(_griever_like(), ["g1", "g9"], titles={"g9": "Gold Nine"})
    missed = next(n for n in hm.nodes if n.key == "passage::g9")
    assert missed.missed and missed.gold and missed.full == "Gold Nine"
    assert missed.layer == len(hm.layers) - 1 and missed.pruned is None
    assert hm.gold_found == 1 and hm.gold_total == 2


def test_grasp_rank_votes_weigh_the_passages_and_the_proposition_links():
    """GRASP's RankVote stage draws its links; the votes in its payload become the weights: each
    passage's score on the passage (label and data), each proposition's w = 1/(1+R) on its edge."""
    p1, p2 = "Alpha founded the label.", "The label signed the band."
    vote = _stage("sub1_vote_1", [("p:1", "proposition", p1), ("p:2", "proposition", p2), ("d1", "passage", "Doc One"),
                                   ("d2", "passage", "Doc Two")],
                  [("p:1", "d1", "from_passage"), ("p:2", "d2", "from_passage")], vote="rankvote",
                  passages=[{"passage_id": "d1", "votes": 0.5}, {"passage_id": "d2", "votes": 1 / 3}],
                  ranked_propositions=[{"R": 1, "w": 0.5, "proposition": p1, "passage_id": "d1"},
                                       {"R": 2, "w": 1 / 3, "proposition": p2, "passage_id": "d2"}])
    run = RunResult(method="grasp", question="Who founded the label?",
                    stages=[_stage("plan", [("s1", "subquestion", "Which label?")]), vote],
                    ranked=[RankedPassage("d1", 0.5, "Doc One"), RankedPassage("d2", 1 / 3, "Doc Two")])
    hm = hopmap.build(run, ["d1"])
    by = {n.key: n for n in hm.nodes}
    assert by["passage::d1"].votes == 0.5 and by["passage::d2"].votes == pytest.approx(1 / 3)
    weights = {(e.source.split("::")[1].split("#")[0], e.target): e.weight for e in hm.edges
               if e.target.startswith("passage::") and e.source.startswith("proposition::")}
    assert weights == {("p:1", "passage::d1"): 0.5, ("p:2", "passage::d2"): pytest.approx(1 / 3)}
    data = hopmap_view._map_json("grasp", hm)
    d1 = next(n for n in data["nodes"] if n["f"] == "Doc One")
    assert d1["v"] == 0.5 and " ".join(d1["l"].split()).startswith("0.50 votes · Doc One")


def test_a_live_run_moves_no_node_as_its_stages_arrive():
    """A run watched live is mapped again at each stage: in every shipped run, each node keeps the
    place it was first drawn at through every later stage, the last included, and the lanes keep
    theirs (the compact layout, the one a visitor sees)."""
    from retrieval import showcase

    moved, checked = [], 0
    for item in showcase.load(SHIPPED).items:
        for method, run in item.runs.items():
            seen: dict[str, tuple] = {}
            for i in range(1, len(run.stages) + 1):
                part = RunResult(method=method, question=run.question, stages=run.stages[:i],
                                 ranked=run.ranked if i == len(run.stages) else [])
                hm = hopmap.build(part, item.gold, live=True)
                for n in hm.nodes:
                    place = (n.x, n.y, n.hidden)
                    if n.key in seen and seen[n.key] != place and not n.missed:
                        moved.append((item.label[:30], method, run.stages[i - 1].name, n.key, seen[n.key], place))
                    seen.setdefault(n.key, place)
                    checked += 1
    assert checked > 1000 and not moved, moved[:5]


def test_a_live_map_names_its_passages_by_title_as_the_recorded_one_does(small_store):
    """SAG's stages draw passages by their chunk ids; a run still arriving has no ranking to take
    titles from, so the app looks them up (ui/tabs/shared.py `_drawn_titles`) and the live map names
    each passage by its title, never by `chunk-…`."""
    from types import SimpleNamespace

    from ui.tabs.shared import _drawn_titles

    ids = list(dict.fromkeys(g for q in small_store.questions()[:2] for g in q.gold_passage_ids))[:3]
    passages = small_store.passages(ids)
    assert len(passages) == 3 and all(p.title and p.title != p.id for p in passages)
    stages = [_stage("retrieve", [("q", "question", "Who?")] + [(p.id, "passage", p.id, 0.5) for p in passages],
                     [("q", p.id, "retrieved") for p in passages])]
    run = RunResult(method="sag", question="Who?", stages=stages)
    state = SimpleNamespace(kb=lambda name, warm=False: SimpleNamespace(ctx=SimpleNamespace(store=small_store)))
    titles = _drawn_titles(state, "small", {"sag": run}, {})
    assert titles == {p.id: p.title for p in passages}
    labels = {n.key.split("::", 1)[1]: n.full for n in hopmap.build(run, [], titles=titles, live=True).nodes
              if n.kind == "passage"}
    assert labels == {p.id: p.title for p in passages}
    assert _drawn_titles(state, "small", {"sag": run}, titles) is titles   # nothing new: no lookup
