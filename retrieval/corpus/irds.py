"""Collections through ir_datasets (`hoptrace build --irds beir/hotpotqa/test`), an optional
extra: `pip install hoptrace[irds]`.

A dataset's documents become passages under their own ids, its queries questions, and its
qrels their gold (graded ≥ `min_grade`). ir_datasets downloads a dataset's files on first use;
on a machine without the network that fails, and the error names the dataset and what
ir_datasets needs (its files in its home, where its log says)."""
from __future__ import annotations

import os
from pathlib import Path

from ..core.errors import ConfigError, InputError
from ..core.records import Passage, Question
from .collection import DEFAULT_MIN_GRADE, UniqueIds, attach_gold, passage_from


def _library():
    try:
        import ir_datasets
    except ImportError:
        raise ConfigError("--irds reads collections through ir_datasets, which is not installed: "
                          "pip install 'hoptrace[irds]' (or pip install ir_datasets)") from None
    return ir_datasets


def _home() -> Path:
    return Path(os.environ.get("IR_DATASETS_HOME") or Path.home() / ".ir_datasets")


def load_irds(name: str, min_grade: int = DEFAULT_MIN_GRADE) -> tuple[list[Passage], list[Question]]:
    irds = _library()
    try:
        ds = irds.load(name)
    except KeyError:
        raise InputError(f"ir_datasets has no dataset {name!r} (its catalogue: https://ir-datasets.com)") from None
    where = f"ir_datasets {name}"
    try:
        if not ds.has_docs():
            raise InputError(f"{where} has no documents to build a KB from")
        ids, passages = UniqueIds(where), []
        for i, doc in enumerate(ds.docs_iter()):
            text = getattr(doc, "text", None)
            if text is None and hasattr(doc, "default_text"):
                text = doc.default_text()
            p = passage_from(str(doc.doc_id), getattr(doc, "title", "") or "", text or "", f"{where}, document {i + 1}")
            ids.add(p.id, f"document {i + 1}")
            passages.append(p)
        questions = []
        if ds.has_queries():
            questions = [Question(str(q.query_id), getattr(q, "text", None) or q.default_text(), [])
                         for q in ds.queries_iter()]
        grades: dict[str, dict[str, int]] = {}
        if ds.has_qrels():
            for r in ds.qrels_iter():
                grades.setdefault(str(r.query_id), {})[str(r.doc_id)] = int(r.relevance)
    except OSError as e:   # requests' ConnectionError is one: no network to download from
        first = str(e).splitlines()[0][:200]
        raise ConfigError(
            f"ir_datasets could not read {name!r}: it downloads the dataset's files on first use, and that "
            f"failed ({first}). Without the network, put the files where ir_datasets looks for them, under "
            f"{_home()} (IR_DATASETS_HOME; its log above names each file and its URL), or build from a copy "
            "on disk: --corpus FOLDER for a BEIR folder") from None
    if not passages:
        raise InputError(f"{where}: the corpus has no passages")
    questions = [q for q in questions if q.id in grades] if grades else questions
    return passages, attach_gold(questions, grades, {p.id for p in passages}, where, min_grade)
