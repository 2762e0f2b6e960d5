"""Importers: every supported file format becomes Passage and Question records.

`load_corpus` and `load_questions` detect the format from the data's shape.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..core.errors import InputError
from ..core.records import Passage, Question
from .collection import (
    DEFAULT_MIN_GRADE,
    attach_gold,
    corpus_kind,
    read_beir,
    read_jsonl_corpus,
    read_jsonl_questions,
    read_qrels,
    read_tsv_corpus,
)
from .hipporag import is_musique_questions, parse_corpus, parse_musique_questions
from .hotpotqa import (
    is_hotpotqa_questions,
    is_title_sentences_corpus,
    parse_hotpotqa_questions,
    parse_title_sentences_corpus,
)
from .readers import read_json
from .twowiki import is_twowiki_questions, parse_twowiki_questions

__all__ = ["load_corpus", "load_questions", "parse_corpus", "read_beir"]


def load_corpus(path: str | Path) -> list[Passage]:
    """Any corpus format, told apart by the file (retrieval/corpus/collection.py for JSONL, TSV
    and BEIR folders; the JSON formats below)."""
    kind = corpus_kind(Path(path))
    if kind == "beir":
        return read_jsonl_corpus(Path(path) / "corpus.jsonl")
    if kind == "jsonl":
        return read_jsonl_corpus(path)
    if kind == "tsv":
        return read_tsv_corpus(path)
    data = read_json(path)
    if isinstance(data, list):
        return parse_corpus(data, str(path))
    if is_title_sentences_corpus(data):
        return parse_title_sentences_corpus(data, str(path))
    raise InputError(f"{path}: unknown corpus format (expected [{{id?, title, text}}], {{title: [sentences]}}, "
                     "a .jsonl or .tsv file, or a BEIR folder)")


def load_questions(path: str | Path, passages: list[Passage], qrels: Optional[str | Path] = None,
                   min_grade: int = DEFAULT_MIN_GRADE) -> list[Question]:
    """Questions with their gold: MuSiQue, HotpotQA and 2Wiki files name it themselves; a JSONL
    file of questions takes it from TREC qrels (`qrels`), graded ≥ `min_grade`."""
    if Path(path).name.lower().removesuffix(".gz").endswith(".jsonl"):
        questions = read_jsonl_questions(path)
        if qrels is not None:
            attach_gold(questions, read_qrels(qrels), {p.id for p in passages}, str(qrels), min_grade)
        return questions
    if qrels is not None:
        raise InputError(f"{path}: qrels give gold to questions in JSONL ({{id, question, answers?}}); this "
                         "file names its gold itself")
    data = read_json(path)
    if is_musique_questions(data):
        questions = parse_musique_questions(data, str(path))
    elif is_twowiki_questions(data):
        questions = parse_twowiki_questions(data, passages, str(path))
    elif is_hotpotqa_questions(data):
        questions = parse_hotpotqa_questions(data, passages, str(path))
    else:
        raise InputError(
            f"{path}: unknown questions format (expected MuSiQue `paragraphs`, "
            "HotpotQA `supporting_facts` or 2Wiki `supporting_passage_idx`)"
        )
    known = {p.id for p in passages}
    for q in questions:
        missing = [g for g in q.gold_passage_ids if g not in known]
        if missing:
            raise InputError(f"{path}: question {q.id}: {len(missing)} gold passage(s) not in the corpus")
    return questions
