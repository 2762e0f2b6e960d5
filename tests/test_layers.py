"""Each method declares the KB layers it reads; on a KB missing one, it is refused before any stage
runs, naming the layer (methods/layers.py). `kb info` lists the layers and the methods they serve."""
from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from retrieval.core.errors import KBError
from retrieval.methods import METHODS, Context, make_method
from retrieval.methods.layers import CHECKED, LAYERS
from retrieval.methods.plugins import user_methods
from retrieval.store import open_store

Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


VECTORS = ("passages vectors", "triples vectors", "partial_triples vectors", "entities vectors", "predicates vectors",
           "events vectors", "propositions vectors")


@pytest.fixture(scope="module")
def without(small_kb, tmp_path_factory):
    """unit → a copy of the small KB built without it: a layer's rows and its extractor's record
    gone, or a layer's vectors gone (and no longer marked whole)."""
    out = {}
    for unit in CHECKED + VECTORS:
        path = tmp_path_factory.mktemp("layers") / f"no_{unit.replace(' ', '_')}.sqlite"
        shutil.copyfile(small_kb, path)
        con = sqlite3.connect(path)
        con.execute("PRAGMA foreign_keys = OFF")
        if unit in VECTORS:
            layer = unit.split()[0]
            con.execute("DELETE FROM vectors WHERE layer = ?", [layer])
            upto = json.loads(con.execute("SELECT value FROM meta WHERE key = 'vectors_upto'").fetchone()[0])
            upto[layer] = 0
            con.execute("UPDATE meta SET value = ? WHERE key = 'vectors_upto'", [json.dumps(upto)])
        else:
            con.execute(f"DELETE FROM {unit}")
            con.execute("DELETE FROM extraction_state WHERE layer = ?", [unit])
        con.commit()
        con.close()
        out[unit] = path
    return out


def test_every_method_declares_layers_the_kb_has(small_store):
    have = {layer for layer in LAYERS if small_store.info().counts.get(layer, 0) > 0}
    for name, cls in METHODS.items():
        if name in user_methods():
            continue
        assert cls.layers and set(cls.layers) <= set(LAYERS), name
        assert set(cls.layers) <= have, f"the small KB should serve {name}"


@pytest.mark.parametrize("name", ["bm25", "dense", "rrf_hybrid", "composed", "griever", "naivege", "syncge", "gear",
                                  "sag", "grasp", "grasp_single_pass", "gear_griever"])
def test_a_method_on_a_kb_missing_each_of_its_layers_is_refused_naming_it(name, without, embedder):
    method_layers = make_method(name, Context(open_store(str(without["passages"])), embedder)).needs()
    assert method_layers
    for unit in [x for x in method_layers if x in without]:
        ctx = Context(open_store(str(without[unit])), embedder)
        named = unit if unit in VECTORS else f"{unit} layer"
        with pytest.raises(KBError, match=rf"{name} needs the KB's {named}( \(and [^)]*\))?, which KB small "
                                          "does not have: build it with `hoptrace build ... --methods"):
            make_method(name, ctx).run(Q, k=5)
    # and a unit it does not read changes nothing
    spare = next((x for x in without if x not in method_layers), None)
    if spare is not None and not METHODS[name if name in METHODS else "gear"].uses_llm:
        run = make_method(name, Context(open_store(str(without[spare])), embedder)).run(Q, k=5)
        assert run.status == "ok", (name, spare, run.error)


def test_gear_over_griever_needs_griever_s_layers_too(embedder, without):
    needs = make_method("gear_griever", Context(open_store(str(without["events"])), embedder)).needs()
    assert {"triples", "partial_triples", "same_as"} <= set(needs)


def test_a_derived_layer_that_is_empty_is_not_a_missing_one(small_kb, tmp_path, embedder):
    """A small corpus can build no same_as pair at all: GRIEVER still runs on it."""
    path = tmp_path / "no_synonyms.sqlite"
    shutil.copyfile(small_kb, path)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM same_as")
    con.commit()
    con.close()
    assert make_method("griever", Context(open_store(str(path)), embedder)).run(Q, k=5).status == "ok"


def test_kb_info_lists_the_layers_and_the_methods_they_serve(without):
    from retrieval.cli.kb import render_served

    text = render_served(open_store(str(without["events"])))
    assert "events —" in text and "passages ✓" in text
    served = text.split("serves: ")[1].split("\n")[0]
    assert "griever" in served and "bm25" in served and "sag" not in served
    assert "sag (needs events, events vectors)" in text
    assert "vectors: passages ✓" in text and "events —" in text.split("vectors: ")[1]
