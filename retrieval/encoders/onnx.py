"""Batch sentence encoding through ONNX Runtime: a faster path for KB builds.

The torch model is exported once per model (to $HOPTRACE_HOME/models/NAME.onnx) and run
with mean pooling and L2 normalisation, which is what the sentence-transformers models we
ship do (checked on load: if the module list differs, or onnxruntime is missing, or the
export fails, callers fall back to torch). Queries use it too (`hidden`): one native call
holds the GIL once, where torch's forward takes and releases it at every op, and under a
loaded app those hand-offs made a 12 ms query encoding take ~190 ms. The token vectors
GRIEVER reuses come from the same forward pass either way.
"""
from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Protocol, Sequence

import numpy as np

from ..core.paths import cache_dir


class Loaded(Protocol):
    """What the twin is made from: a sentence-transformers model (loaded on first use), its name,
    folder layout and tokenizer (an Embedder, which holds this encoder, so it is described here
    rather than imported)."""
    name: str
    model: Any
    layout: Any
    max_seq_length: int

    def fast_tokenizer(self) -> Any: ...


log = logging.getLogger(__name__)
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# After a run, ONNX Runtime's pool threads spin for more work. A build or a bench runs one
# encoding after another and gains from it; a serving app does not: between two visitors'
# queries the spinning thread held the second core while the web server rendered (issue 17
# item 9). The app turns it off before its first encoder loads (`serving_mode`).
_allow_spinning = True


def serving_mode() -> None:
    """Encoders loaded from now on let their pool threads sleep as soon as a run ends."""
    global _allow_spinning
    _allow_spinning = False


# Sessions kept for the next build: making one optimises the model's graph again (~0.2 s of CPU,
# one per core a build), which every KB build in the app, or a hundred in the test suite, paid
# each time. Keyed by the model file's version, the threads, the spinning setting and the slot;
# the latest few are kept (a model's fp32 and int8 twins on two cores), the rest freed.
_SESSIONS: "OrderedDict[tuple, Any]" = OrderedDict()
_SESSIONS_KEEP = 4
_sessions_lock = threading.Lock()


def _session(ort, path: Path, threads: int, slot: int):
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size, threads, _allow_spinning, slot)
    with _sessions_lock:
        if key in _SESSIONS:
            _SESSIONS.move_to_end(key)
            return _SESSIONS[key]
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        if threads:
            opts.intra_op_num_threads = threads
        if not _allow_spinning:
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        _SESSIONS[key] = session
        while len(_SESSIONS) > _SESSIONS_KEEP:
            _SESSIONS.popitem(last=False)
        return session


class OnnxEncoder:
    def __init__(self, session, tokenizer, max_length: int):
        self.session = session
        self.tokenizer = tokenizer
        self.max_length = max_length
        self._lock = threading.Lock()

    @classmethod
    def load(cls, embedder: Loaded, precision: str = "fp32", threads: int = 0,
             slot: int = 0) -> Optional["OnnxEncoder"]:
        """`precision` int8: the weights of every MatMul quantised per channel (onnxruntime's
        dynamic quantisation), made once from the fp32 export. `threads`: the session's
        intra-op threads (0 = onnxruntime's default, every core). `slot`: which of a build's
        parallel encoders this is (each keeps a session of its own, `_session`)."""
        try:
            import onnxruntime as ort
        except ImportError:
            return None
        # Read from the model's folder, not the loaded model: with the export made, nothing here
        # imports sentence-transformers (retrieval/encoders/tokenizer.py).
        layout = embedder.layout
        if layout is None or layout.modules[:2] != ("Transformer", "Pooling") or not layout.mean_pooled:
            return None
        tokenizer = embedder.fast_tokenizer() or embedder.model.tokenizer
        path = cache_dir() / "models" / f"{embedder.name}.onnx"
        try:
            _made_once(path, lambda: _export(embedder, path))
            if precision == "int8":
                path = _quantised(path)
            session = _session(ort, path, threads, slot)
        except Exception as e:  # any failure here only costs speed
            log.warning("ONNX encoder unavailable (%s); using torch", e)
            return None
        return cls(session, tokenizer, embedder.max_seq_length)

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        order = np.argsort([len(t) for t in texts], kind="stable")  # similar lengths pad less
        out = np.zeros((len(texts), 0), dtype=np.float32)
        chunks = []
        with self._lock:
            for i in range(0, len(texts), batch_size):
                idx = order[i:i + batch_size]
                batch = self.tokenizer([texts[j] for j in idx], padding=True, truncation=True,
                                       max_length=self.max_length, return_tensors="np")
                feed = {k: batch[k].astype(np.int64) for k in _INPUTS if k in batch}
                vecs = mean_pooled(self.session.run(None, feed)[0], batch["attention_mask"])
                chunks.append((idx, vecs))
        if chunks:
            out = np.zeros((len(texts), chunks[0][1].shape[1]), dtype=np.float32)
            for idx, vecs in chunks:
                out[idx] = vecs
        return out


    def encode_ids(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit vectors of one batch of texts already tokenised (specials included), padded here."""
        input_ids, mask = padded(ids)
        with self._lock:
            hidden = self.session.run(None, {"input_ids": input_ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(input_ids)})[0]
        return mean_pooled(hidden, mask)

    def hidden(self, feed: dict) -> np.ndarray:
        """Token vectors (n_tokens, dim) of one tokenised text: what the torch model's
        token_embeddings are, in one native call (the GIL is released once, not per layer)."""
        feed = {k: np.asarray(feed[k]).astype(np.int64) for k in _INPUTS if k in feed}
        if "token_type_ids" not in feed:
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        return self.session.run(None, feed)[0][0]


def padded(ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of a batch padded to its longest text, and their attention mask (int64 both)."""
    width = max(len(x) for x in ids)
    input_ids = np.zeros((len(ids), width), dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    for row, x in enumerate(ids):
        input_ids[row, :len(x)] = x
        mask[row, :len(x)] = 1
    return input_ids, mask


def mean_pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The models' pooling: the mean of the unpadded token vectors, then unit length."""
    m = mask[..., None].astype(np.float32)
    vecs = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    return vecs.astype(np.float32)


def _quantised(fp32: Path) -> Path:
    """The int8 twin of an fp32 export, made once. Only MatMul weights, per output channel:
    quantising every op (the tool's default, which includes the embedding Gather) or per
    tensor moved vectors to cosine ~0.96 of fp32's; per-channel MatMul-only keeps ~0.993
    at the same speed (measured on 2Wiki texts, docs/profiles.md)."""
    path = fp32.with_name(fp32.stem + ".int8-matmul-per-channel.onnx")  # the recipe in the name: no stale twin
    _made_once(path, lambda: _quantise(fp32, path))
    return path


def _quantise(fp32: Path, path: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = path.with_suffix(f".{os.getpid()}.partial")   # as in _export: a name of this process's own
    root = logging.getLogger()
    was, root.disabled = root.disabled, True  # it logs advice to pre-process first, which MatMul-only needs not
    try:
        quantize_dynamic(str(fp32), str(tmp), op_types_to_quantize=["MatMul"], per_channel=True,
                         weight_type=QuantType.QInt8)
    finally:
        root.disabled = was
    tmp.rename(path)


def _made_once(path: Path, make: Callable[[], None]) -> None:
    """`make()` unless `path` exists, checked again once this process holds the lock (another
    process may have made it while this one waited)."""
    if path.exists():
        return
    with _making(path):
        if not path.exists():
            make()


@contextmanager
def _making(path: Path) -> Iterator[None]:
    """One process at a time makes `path`; the others wait for it and then find it made. Processes
    sharing a home start together (the app and a CLI build; the suite's three workers, which each
    spent ~10 CPU s exporting the same model beside the others). Each writes under a name of its
    own and renames the whole file into place, so a reader never sees half of one either way."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _export(embedder: Loaded, path: Path) -> None:
    import copy

    import torch

    hf = copy.deepcopy(embedder.model[0].auto_model).eval()  # the live model is never touched

    class Wrapped(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                              return_dict=True).last_hidden_state

    dummy = embedder.model.tokenizer(["a b"], return_tensors="pt")
    if "token_type_ids" not in dummy:
        dummy["token_type_ids"] = torch.zeros_like(dummy["input_ids"])
    path.parent.mkdir(parents=True, exist_ok=True)
    # A name of this process's own: two processes sharing a home (the app and a CLI build) may
    # export at once, and each renames a whole file into place.
    tmp = path.with_suffix(f".{os.getpid()}.onnx.partial")
    axes = {k: {0: "batch", 1: "seq"} for k in (*_INPUTS, "hidden")}
    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on constant shapes; axes are dynamic
        torch.onnx.export(Wrapped(hf), tuple(dummy[k] for k in _INPUTS), str(tmp), input_names=list(_INPUTS),
                          output_names=["hidden"], dynamic_axes=axes, opset_version=17, dynamo=False)
    tmp.rename(path)
