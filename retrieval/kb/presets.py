"""Building KBs from files or bundled datasets, and the demo KB every entry point relies on."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..corpus import load_corpus, load_questions
from ..datasets import DEMO, get_dataset
from ..embed import DEFAULT_MODEL, get_embedder
from ..errors import ConfigError
from ..paths import resolve_kb
from .build import BuildReport, build_kb
from .extract.openie_import import OpenIEImport
from .extract.rules import RulesExtractor

EXTRACTORS = ("auto", "rules", "openie")


def choose_extractors(extractor: str, openie: Optional[Path]) -> list:
    """`auto`: imported OpenIE triples when a file is given, rules for everything else."""
    if extractor not in EXTRACTORS:
        raise ConfigError(f"unknown extractor {extractor!r}; choose one of {EXTRACTORS} "
                          "(LLM extraction comes with the LLM layer)")
    if extractor == "openie" and openie is None:
        raise ConfigError("--extractor openie needs --openie FILE (HippoRAG OpenIE output)")
    if openie is not None and extractor in ("auto", "openie"):
        return [OpenIEImport(openie), RulesExtractor(("events", "propositions"))]
    return [RulesExtractor()]


def build_from_files(out: Path, corpus: Path, questions: Optional[Path] = None, openie: Optional[Path] = None,
                     extractor: str = "auto", embed_model: str = DEFAULT_MODEL, name: Optional[str] = None,
                     progress: bool = True) -> BuildReport:
    passages = load_corpus(corpus)
    qs = load_questions(questions, passages) if questions else None
    extractors = choose_extractors(extractor, openie)
    return build_kb(out, passages, extractors, get_embedder(embed_model), questions=qs,
                    name=name or Path(corpus).name, progress=progress)


def build_dataset(dataset: str, out: Optional[Path] = None, extractor: str = "auto",
                  embed_model: str = DEFAULT_MODEL, progress: bool = True) -> BuildReport:
    ds = get_dataset(dataset)
    name = "demo" if dataset == DEMO and out is None else dataset
    return build_from_files(out or resolve_kb(name), ds.corpus, ds.questions, ds.openie, extractor,
                            embed_model, name=name, progress=progress)


def demo_path() -> Path:
    return resolve_kb("demo")


def ensure_demo(progress: bool = True) -> Path:
    """The demo KB, built on first use (about three minutes on two cores) and reused after."""
    path = demo_path()
    if not path.exists():
        build_dataset(DEMO, progress=progress)
    return path
