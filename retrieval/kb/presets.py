"""Building KBs from files or bundled datasets, and the demo KB every entry point relies on."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..core.errors import ConfigError, InputError
from ..core.paths import resolve_kb
from ..core.records import Passage, Question
from ..corpus import load_corpus, load_questions
from ..corpus.datasets import DEMO, get_dataset
from ..encoders.embedder import DEFAULT_MODEL, LazyEmbedder
from ..llm import LLMSettings, get_llm
from .build import BuildReport, build_kb
from .embed import env_precision
from .extract.llm import llm_extractors
from .extract.openie_import import OpenIEImport
from .extract.rules import RulesExtractor

EXTRACTORS = ("auto", "rules", "openie", "llm")
ALL_LAYERS = ("triples", "events", "propositions")


@dataclass(frozen=True)
class ExtractionPlan:
    """What `hoptrace build` extracts with: the extractor name, the layers the LLM makes
    (the others come from the LLM-free extractors), the LLM and the propositions batch."""
    extractor: str = "auto"
    openie: Optional[Path] = None
    llm_layers: tuple[str, ...] = ALL_LAYERS
    llm: Optional[LLMSettings] = None
    batch_size: Optional[int] = None
    # Where LLM-free GRASP propositions come from: the rules extractor's sentences, or (with
    # an OpenIE file) the imported triples verbalised (openie_import.verbalise). "auto" takes
    # the verbalised triples whenever there is an OpenIE file: on the demo they measured
    # +8.5 points R@5 over sentences in GRASP's single pass (docs/grasp.md).
    propositions: str = "auto"
    # "one": one LLM request a passage fills every LLM layer (docs/llm-indexing.md, "One read");
    # "per-layer": each paper's own extraction prompt, one request a layer.
    reads: str = "one"

    @property
    def proposition_source(self) -> str:
        if self.propositions == "auto":
            return "openie" if self.openie is not None else "sentences"
        return self.propositions

    def check(self) -> None:
        if self.extractor not in EXTRACTORS:
            raise ConfigError(f"unknown extractor {self.extractor!r}; choose one of {', '.join(EXTRACTORS)}")
        if self.extractor == "openie" and self.openie is None:
            raise ConfigError("--extractor openie needs --openie FILE (HippoRAG OpenIE output)")
        bad = [x for x in self.llm_layers if x not in ALL_LAYERS]
        if bad or not self.llm_layers:
            raise ConfigError(f"--layers takes a comma-separated subset of {', '.join(ALL_LAYERS)}, "
                              f"got {bad or 'none'}")
        if self.propositions not in ("auto", "sentences", "openie"):
            raise ConfigError(f"--propositions must be auto, sentences or openie, got {self.propositions!r}")
        if self.propositions == "openie" and self.openie is None:
            raise ConfigError("--propositions openie needs an OpenIE file (--openie, or a dataset that ships one)")
        if self.reads not in ("one", "per-layer"):
            raise ConfigError(f"--reads must be one or per-layer, got {self.reads!r}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError(f"--batch-size must be at least 1, got {self.batch_size}")
        if self.extractor == "llm" and (self.llm is None or self.llm.backend == "none"):
            raise ConfigError("--extractor llm needs an LLM: use --llm local (the embedded model), openai or a URL")

    def extractors(self) -> list:
        self.check()
        if self.extractor == "rules":
            return [RulesExtractor()]
        if self.extractor != "llm":
            return _llm_free(self.openie, ALL_LAYERS, self.proposition_source)
        llm = get_llm(self.llm)
        rest = tuple(x for x in ALL_LAYERS if x not in self.llm_layers)
        # Fast layers first: a build that is stopped during the LLM part has them already.
        return (_llm_free(self.openie, rest, self.proposition_source)
                + llm_extractors(llm, self.llm_layers, self.batch_size, reads=self.reads))


def _llm_free(openie: Optional[Path], layers: tuple[str, ...], propositions: str = "sentences") -> list:
    """Imported OpenIE triples (and, if asked, propositions) when a file is given, rules for
    everything else."""
    out: list = []
    rest = list(layers)
    if openie is not None:
        mine = [x for x in rest if x == "triples" or (x == "propositions" and propositions == "openie")]
        if mine:
            out.append(OpenIEImport(openie, mine))
            rest = [x for x in rest if x not in mine]
    if rest:
        out.append(RulesExtractor(rest))
    return out


def sample_corpus(passages: list[Passage], questions: list[Question], n: int) -> tuple[list[Passage], list[Question]]:
    """`--sample N`: the gold passages of the first questions, up to half of N, then the
    corpus's first other passages (distractors) up to N; only questions whose gold
    passages all made it are kept, so every kept question is answerable."""
    if n < 1:
        raise ConfigError(f"--sample must be at least 1, got {n}")
    chosen: dict[str, None] = {}
    kept = []
    for q in questions:
        gold = [g for g in q.gold_passage_ids if g not in chosen]
        if len(chosen) + len(gold) > n // 2:
            break
        chosen.update(dict.fromkeys(gold))
        kept.append(q)
    for p in passages:
        if len(chosen) >= n:
            break
        chosen.setdefault(p.id)
    return [p for p in passages if p.id in chosen], kept  # corpus order


IRDS = "irds:"   # a corpus named "irds:beir/hotpotqa/test" is read through ir_datasets


@dataclass(frozen=True)
class Gold:
    """Where a collection's gold comes from when its questions do not name it: TREC qrels (or a
    BEIR folder's qrels/<split>.tsv), graded passages counted gold at `min_grade` and above."""
    qrels: Optional[Path] = None
    split: str = "test"
    min_grade: int = 1


def load_sources(corpus: Path, questions: Optional[Path] = None, sample: Optional[int] = None,
                 gold: Gold = Gold()) -> tuple[list[Passage], Optional[list[Question]]]:
    from ..corpus import read_beir
    from ..corpus.collection import corpus_kind

    if isinstance(corpus, str) and corpus.startswith(IRDS):   # `build --irds NAME`
        from ..corpus.irds import load_irds

        passages, qs = load_irds(corpus[len(IRDS):], gold.min_grade)
    elif corpus_kind(Path(corpus)) == "beir" and questions is None:
        passages, qs = read_beir(corpus, gold.split, gold.min_grade)
    else:
        passages = load_corpus(corpus)
        qs = load_questions(questions, passages, gold.qrels, gold.min_grade) if questions else None
    if sample:
        passages, qs = sample_corpus(passages, qs or [], sample)
    return passages, qs


def build_from_files(out: Path, corpus: Path, questions: Optional[Path] = None, openie: Optional[Path] = None,
                     extractor: str = "auto", embed_model: str = DEFAULT_MODEL, name: Optional[str] = None,
                     progress: bool = True, plan: Optional[ExtractionPlan] = None, sample: Optional[int] = None,
                     retry_failed: bool = False, max_passages: Optional[int] = None,
                     precision: Optional[str] = None, listener=None, targets=None,
                     device: Optional[str] = None, gold: Gold = Gold()) -> BuildReport:
    plan = plan or ExtractionPlan(extractor, openie)
    plan.check()  # before reading anything, so a bad option fails fast
    passages, qs = load_sources(corpus, questions, sample, gold)
    if max_passages is not None and len(passages) > max_passages:
        # Checked before anything is written: a refused corpus leaves the KB as it was.
        raise InputError(f"the corpus has {len(passages):,} passages; this server builds at most "
                         f"{max_passages:,} at once (use --sample, or build locally)")
    return build_kb(out, passages, plan.extractors(), LazyEmbedder(embed_model), questions=qs,
                    name=name or Path(corpus).name, progress=progress, retry_failed=retry_failed,
                    precision=precision, listener=listener, targets=targets, device=device)


def dataset_out(dataset: str, out: Optional[Path]) -> tuple[Path, str]:
    name = "demo" if dataset == DEMO and out is None else dataset
    return out or resolve_kb(name), name


# The demo KB is encoded in fp32 wherever it is built (unless HOPTRACE_BUILD_PRECISION or --precision
# says otherwise): the shipped showcase and experiment were recorded on an fp32 demo (AVX2-only
# machines have no bf16), and the default bf16 of a machine that has it made another KB (other
# synonym edges near their threshold, another fingerprint) that a resumed recording refused and on
# which a visitor's live runs need not be the recorded ones.
DEMO_PRECISION = "fp32"


def demo_precision(asked: Optional[str] = None) -> str:
    return asked or env_precision() or DEMO_PRECISION


def build_dataset(dataset: str, out: Optional[Path] = None, extractor: str = "auto",
                  embed_model: str = DEFAULT_MODEL, progress: bool = True, targets=None,
                  listener=None, precision: Optional[str] = None) -> BuildReport:
    ds = get_dataset(dataset)
    path, name = dataset_out(dataset, out)
    if dataset == DEMO and out is None:
        precision = demo_precision(precision)
    return build_from_files(path, ds.corpus, ds.questions, ds.openie, extractor, embed_model, name=name,
                            progress=progress, targets=targets, listener=listener, precision=precision)


def demo_path() -> Path:
    return resolve_kb("demo")


def ensure_demo(progress: bool = True) -> Path:
    """The demo KB, built on first use (on two cores: 142 s in fp32, its precision wherever it is built,
    DEMO_PRECISION; 75 s with HOPTRACE_BUILD_PRECISION=int8) and reused after; an unfinished
    one (a build stopped half-way) is finished."""
    path = demo_path()
    if not demo_complete():
        build_dataset(DEMO, progress=progress)
    return path


def demo_complete() -> bool:
    path = demo_path()
    if not path.exists():
        return False
    from . import db

    con = db.connect(path, readonly=True)
    try:
        return bool(db.get_meta(con, "complete", False))
    finally:
        con.close()
