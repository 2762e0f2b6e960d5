"""Importers: every supported file format becomes Passage and Question records.

`load_corpus` and `load_questions` detect the format from the data's shape.
"""
from __future__ import annotations

from pathlib import Path

from ..core.errors import InputError
from ..core.records import Passage, Question
from .hipporag import is_musique_questions, parse_corpus, parse_musique_questions
from .hotpotqa import (
    is_hotpotqa_questions,
    is_title_sentences_corpus,
    parse_hotpotqa_questions,
    parse_title_sentences_corpus,
)
from .readers import read_json
from .twowiki import is_twowiki_questions, parse_twowiki_questions

__all__ = ["load_corpus", "load_questions", "parse_corpus"]


def load_corpus(path: str | Path) -> list[Passage]:
    data = read_json(path)
    if isinstance(data, list):
        return parse_corpus(data, str(path))
    if is_title_sentences_corpus(data):
        return parse_title_sentences_corpus(data, str(path))
    raise InputError(f"{path}: unknown corpus format (expected [{{title, text}}] or {{title: [sentences]}})")


def load_questions(path: str | Path, passages: list[Passage]) -> list[Question]:
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
