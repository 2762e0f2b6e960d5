"""The benchmark datasets bundled under data/ (see data/SOURCES.md), by short name."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..core.errors import ConfigError
from ..core.paths import DATA_DIR


@dataclass(frozen=True)
class Dataset:
    name: str
    corpus: Path
    questions: Path
    openie: Optional[Path] = None   # pre-extracted triples; without it the rules extractor runs


DATASETS = {
    "musique": Dataset("musique", DATA_DIR / "musique/musique_train_corpus.json.gz",
                       DATA_DIR / "musique/musique_train.json.gz",
                       DATA_DIR / "musique/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json.gz"),
    "hotpotqa": Dataset("hotpotqa", DATA_DIR / "hotpotqa/hotpotqa_train_corpus.json.gz",
                        DATA_DIR / "hotpotqa/hotpotqa_train.json.gz"),
    "2wiki": Dataset("2wiki", DATA_DIR / "2wikimultihopqa/2wikimultihopqa_corpus.json.gz",
                     DATA_DIR / "2wikimultihopqa/2wikimultihopqa_dev93_questions.json.gz"),
}

# The embedded default: MuSiQue with GPT-3.5 OpenIE triples, 1,890 passages, 100 questions.
DEMO = "musique"


def get_dataset(name: str) -> Dataset:
    if name not in DATASETS:
        raise ConfigError(f"unknown dataset {name!r}; bundled: {', '.join(DATASETS)}")
    return DATASETS[name]
