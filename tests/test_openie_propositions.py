"""GRASP propositions verbalised from imported OpenIE triples (atomic, entity-linked)."""
import json

import pytest

from retrieval.core.errors import ConfigError, InputError
from retrieval.core.records import Passage
from retrieval.kb.extract.openie_import import OpenIEImport
from retrieval.kb.presets import ExtractionPlan


def _openie(tmp_path):
    doc = {"docs": [{"passage": "Ora\nOra is a town founded by Ada Mireles in 1820.",
                     "extracted_entities": ["Ora", "Ada Mireles", "1820"],
                     "extracted_triples": [["Ora", "founded by", "Ada Mireles"], ["Ora", "founded in", "1820"],
                                           ["Ora", "is"]]}]}
    path = tmp_path / "openie.json"
    path.write_text(json.dumps(doc))
    return path


def test_each_triple_becomes_a_proposition_linked_to_its_subject_and_object(tmp_path):
    p = Passage.make("Ora", "Ora is a town founded by Ada Mireles in 1820.")
    ex = next(iter(OpenIEImport(_openie(tmp_path), ("triples", "propositions")).extract([p])))
    assert [pr.text for pr in ex.propositions] == ["Ora founded by Ada Mireles.", "Ora founded in 1820."]
    assert [[e.name for e in pr.entities] for pr in ex.propositions] == [["Ora", "Ada Mireles"], ["Ora", "1820"]]
    assert ex.malformed == 1  # the two-item "triple" makes neither a triple nor a proposition


def test_triples_only_by_default_and_a_bad_layer_is_named(tmp_path):
    imp = OpenIEImport(_openie(tmp_path))
    assert imp.layers == {"triples"}
    with pytest.raises(InputError, match="events"):
        OpenIEImport(_openie(tmp_path), ("events",))


def test_the_plan_uses_the_importer_for_propositions_only_when_asked(tmp_path):
    path = _openie(tmp_path)
    sentences = ExtractionPlan("auto", path, propositions="sentences").extractors()
    assert [sorted(x.layers) for x in sentences] == [["triples"], ["events", "propositions"]]
    verbalised = ExtractionPlan("auto", path, propositions="openie").extractors()
    assert [sorted(x.layers) for x in verbalised] == [["propositions", "triples"], ["events"]]
    # the default: verbalised triples when there is an OpenIE file (they measured better), else sentences
    assert [sorted(x.layers) for x in ExtractionPlan("auto", path).extractors()] == [["propositions", "triples"],
                                                                                     ["events"]]
    assert [sorted(x.layers) for x in ExtractionPlan("auto", None).extractors()] == [
        ["events", "propositions", "triples"]]
    with pytest.raises(ConfigError, match="needs an OpenIE file"):
        ExtractionPlan("auto", None, propositions="openie").check()
