"""The recorded showcase: written with a scripted test double of the LLM (tests/llm_double.py)
on the small real KB, read back, and refused as current once a prompt changes."""
import dataclasses
import gzip
import json

import pytest
from llm_double import scripted_llm

from retrieval import showcase
from retrieval.core.errors import HopTraceError
from retrieval.methods.sag import prompts as sag_prompts

ENTS = json.dumps({"entities": [{"name": "Journal of Psychotherapy Integration", "type": "work"}]})


def _record(ctx, tmp_path, n=2):
    questions = showcase.choose_questions(ctx.store.questions(), n)
    llm, _ = scripted_llm({"query entities": [ENTS] * n, "rerank": [json.dumps({"selected": [1]})] * n})
    out = showcase.record(dataclasses.replace(ctx, llm=llm), "small", questions, ["composed", "sag"],
                          k=5, out=tmp_path / "small.json.gz", version="abc1234")
    return out, questions


def test_a_recording_reads_back_whole_and_current(ctx, tmp_path):
    out, questions = _record(ctx, tmp_path)
    sc = showcase.load(out)
    assert "scripted" in sc.model and sc.profile == "paper"
    assert [it.question for it in sc.items] == [q.text for q in questions]
    item = sc.items[0]
    assert not item.stale and set(item.current_runs) == {"composed", "sag"}
    names = [s.name for s in item.runs["sag"].stages]
    assert names[0] == "profile" and "rerank" in names and names[-1] == "ranking"
    assert item.runs["sag"].ranked and sc.find(item.label) is item
    assert sc.recorded_at and "recorded on" in sc.banner


def test_a_recording_made_with_other_prompts_is_not_current(ctx, tmp_path, monkeypatch):
    out, _ = _record(ctx, tmp_path)
    monkeypatch.setattr(sag_prompts, "RERANK_INSTRUCTIONS", sag_prompts.RERANK_INSTRUCTIONS + " Be brief.")
    sc = showcase.load(out)
    item = sc.items[0]
    assert "sag" in item.stale and "other prompts" in item.stale["sag"]
    assert set(item.current_runs) == {"composed"}  # the unchanged method is current
    # ... and the stale one is still shown, labelled with what recorded it
    assert "sag" in item.runs and item.notes["sag"].startswith("recorded with version abc1234 on ")
    from ui.tabs.shared import _showcase_grid

    grid = _showcase_grid(sc, item)
    assert "data-method='sag'" in grid and "recorded with version abc1234" in grid and "stale-banner" in grid


def test_choose_questions_spreads_over_hop_counts(ctx):
    qs = showcase.choose_questions(ctx.store.questions(), 6)
    hops = [q.hops for q in qs]
    assert len(qs) == min(6, sum(1 for q in ctx.store.questions() if q.gold_passage_ids))
    assert len(set(hops)) == len({q.hops for q in ctx.store.questions() if q.gold_passage_ids} & set(hops))


def test_a_broken_or_foreign_file_gets_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(HopTraceError, match="not a readable recording"):
        showcase.load(bad)
    old = tmp_path / "old.json.gz"
    with gzip.open(old, "wt") as f:
        json.dump({"format": 0}, f)
    with pytest.raises(HopTraceError, match="format 0"):
        showcase.load(old)


def test_recording_needs_an_llm(ctx, tmp_path):
    with pytest.raises(HopTraceError, match="needs an LLM"):
        showcase.record(ctx, "small", ctx.store.questions()[:1], ["sag"], out=tmp_path / "x.json.gz")


def test_update_re_records_one_method_and_keeps_the_others(ctx, tmp_path):
    out, questions = _record(ctx, tmp_path)
    before = showcase.load(out)
    composed_before = [it.runs["composed"].to_dict() for it in before.items]
    llm, backend = scripted_llm({"query entities": [ENTS] * 2, "rerank": [json.dumps({"selected": [2]})] * 2})
    # questions are the recording's own, whatever is passed
    showcase.record(dataclasses.replace(ctx, llm=llm), "small", [], ["sag"], k=5, out=out, update=True)
    after = showcase.load(out)
    assert [it.question for it in after.items] == [q.text for q in questions]
    assert [it.runs["composed"].to_dict() for it in after.items] == composed_before   # kept as recorded
    assert backend.purposes().count("rerank") == 2                                    # sag ran again
    picked = [[s.payload for s in sc.items[0].runs["sag"].stages if s.name == "rerank"][0] for sc in (before, after)]
    assert picked[0] != picked[1]                                                     # the new script's pick
    assert sorted(after.methods) == ["composed", "sag"] and not after.items[0].stale


def test_update_refuses_another_model_or_a_missing_recording(ctx, tmp_path, monkeypatch):
    llm, _ = scripted_llm({})
    with pytest.raises(HopTraceError, match="no recording"):
        showcase.record(dataclasses.replace(ctx, llm=llm), "small", [], ["sag"], out=tmp_path / "none.json.gz",
                        update=True)
    out, _ = _record(ctx, tmp_path)
    monkeypatch.setattr(type(llm), "describe", lambda self: "another model")
    with pytest.raises(HopTraceError, match="one recording holds one model"):
        showcase.record(dataclasses.replace(ctx, llm=llm), "small", [], ["sag"], out=out, update=True)


def test_update_compares_the_started_models_description(ctx, tmp_path, monkeypatch):
    """The embedded model describes itself with its file only once started; --update starts it
    before comparing, or every update of a real recording was refused as 'another model'."""
    from retrieval.llm import client as llm_client
    from retrieval.llm.client import LLM

    out, _ = _record(ctx, tmp_path)
    recorded, backend = scripted_llm({"query entities": [ENTS] * 2, "rerank": [json.dumps({"selected": [1]})] * 2})
    monkeypatch.setattr(llm_client, "make_backend", lambda settings: backend)
    lazy = LLM(dataclasses.replace(recorded.settings, model="settings-only name"))  # no backend yet
    assert lazy.describe() != recorded.describe()
    showcase.record(dataclasses.replace(ctx, llm=lazy), "small", [], ["sag"], k=5, out=out, update=True)
    assert backend.purposes().count("rerank") == 2


def test_updating_an_llm_free_method_keeps_the_recordings_profile(ctx, tmp_path):
    questions = showcase.choose_questions(ctx.store.questions(), 1)
    llm, _ = scripted_llm({"query entities": [ENTS], "rerank": [json.dumps({"selected": [1]})]})
    local = dataclasses.replace(ctx, llm=llm, profile="local")
    out = showcase.record(local, "small", questions, ["composed", "sag"], k=5, out=tmp_path / "p.json.gz")
    assert showcase.load(out).profile == "local"
    showcase.record(local, "small", [], ["composed"], k=5, out=out, update=True)
    assert showcase.load(out).profile == "local"     # composed has no profile of its own to impose


def test_the_shipped_showcase_matches_the_current_code():
    """The recording in data/showcase is what a first visitor opens; a change to a recorded
    method's package, its prompts or methods/base.py makes it stale, and the app then does not
    show it as current. Re-record it: `hoptrace record-showcase --update --methods METHOD`."""
    from pathlib import Path

    from retrieval.showcase import current_fingerprints

    # The file in the repository, named here: not showcase.SHOWCASE_DIR, which a test may point
    # elsewhere (the browser tests record their own), so this test reads the same file in any order.
    shipped = Path(__file__).resolve().parents[1] / "data" / "showcase" / "demo.json.gz"
    data = json.loads(gzip.decompress(shipped.read_bytes()))
    now = current_fingerprints(data)
    stale = [m for m, fp in data["fingerprints"].items() if fp != now.get(m)]
    assert not stale, (f"the shipped showcase is stale for {stale}: re-record with hoptrace record-showcase "
                       "--update --methods ...")


def test_a_recordings_fingerprint_follows_the_settings_its_profile_gives_not_where_they_are_written(monkeypatch):
    """GEAR's sequence scoring moved from the config default into `local` (the paper's is the
    default now): recordings on `local` stayed current. A local value changed stales only local
    recordings; a fingerprint of the first scheme is still compared the way it was taken."""
    from retrieval.methods import profiles
    from retrieval.methods.gear import GearConfig
    from retrieval.showcase import SCHEME, fingerprint, fingerprint_like

    local, paper = fingerprint("gear", "local"), fingerprint("gear", "paper")
    assert local.startswith(SCHEME) and local != paper
    same = {**profiles.LOCAL["gear"], "beam_width": GearConfig().beam_width}   # the paper's value, named
    monkeypatch.setitem(profiles.LOCAL, "gear", same)
    assert (fingerprint("gear", "local"), fingerprint("gear", "paper")) == (local, paper)
    monkeypatch.setitem(profiles.LOCAL, "gear", {**same, "beam_width": 3})
    assert fingerprint("gear", "local") != local and fingerprint("gear", "paper") == paper
    first = fingerprint_like("0123456789abcdef", "gear")
    assert not first.startswith(SCHEME) and fingerprint_like(first, "gear") == first


def test_the_fingerprint_follows_code_not_imports_docstrings_or_where_a_definition_lives(tmp_path):
    """A refactor that moves a definition to another file, or changes an import path or a docstring,
    keeps a recording current; a changed line of code does not."""
    from retrieval.showcase import _definitions

    def files(**texts):
        for name, text in texts.items():
            (tmp_path / name).write_text(text)
        return [tmp_path / n for n in texts]

    before = _definitions(files(a="import x\n\ndef f():\n    '''doc'''\n    from y import z\n    return 1\n",
                                b="class C:\n    n = 2\n"))
    moved = _definitions(files(a="from q import x\n", b="class C:\n    n = 2\n\ndef f():\n    return 1\n"))
    changed = _definitions(files(a="def f():\n    return 2\n", b="class C:\n    n = 2\n"))
    assert before == moved
    assert before != changed
