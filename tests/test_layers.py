"""Each method declares the KB layers it reads; on a KB missing one, it is refused before any stage
runs, naming the layer (methods/layers.py). `kb info` lists the layers and the methods they serve."""
from __future__ import annotations

import shutil
import sqlite3

import pytest

from retrieval.core.errors import KBError
from retrieval.methods import METHODS, Context, make_method
from retrieval.methods.layers import CHECKED, LAYERS
from retrieval.methods.plugins import user_methods
from retrieval.store import open_store

Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


@pytest.fixture(scope="module")
def without(small_kb, tmp_path_factory):
    """layer → a copy of the small KB built without that layer: its rows and its extractor's record gone."""
    out = {}
    for layer in CHECKED:
        path = tmp_path_factory.mktemp("layers") / f"no_{layer}.sqlite"
        shutil.copyfile(small_kb, path)
        con = sqlite3.connect(path)
        con.execute("PRAGMA foreign_keys = OFF")
        con.execute(f"DELETE FROM {layer}")
        con.execute("DELETE FROM extraction_state WHERE layer = ?", [layer])
        con.commit()
        con.close()
        out[layer] = path
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
    for layer in [x for x in method_layers if x in CHECKED]:
        ctx = Context(open_store(str(without[layer])), embedder)
        with pytest.raises(KBError, match=f"{name} needs the KB's {layer} layer, which KB .* does not have"):
            make_method(name, ctx).run(Q, k=5)
    # and a layer it does not read changes nothing
    spare = next((x for x in CHECKED if x not in method_layers), None)
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

    text = render_served(open_store(str(without["events"])).info())
    assert "events —" in text and "passages ✓" in text
    served = text.split("serves: ")[1].split("\n")[0]
    assert "griever" in served and "bm25" in served and "sag" not in served
    assert "sag (needs events)" in text
