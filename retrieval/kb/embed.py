"""A build's vectors: every distinct text encoded once, whichever layers hold it.

The missing items of the layers asked for are read first, so a string two layers share (an event
that is also a proposition, a name that is an entity and a triple's subject) is encoded once and
its vector written to both; a text another layer already holds a vector for is copied, not
encoded (a build embeds one method's layers at a time: publish.py). Texts are tokenised once,
sorted by length and cut into batches of about `token_budget` padded tokens: long passages go a
few at a time and names many at a time, which measured faster than a fixed batch size per layer.
Vectors are stored every FLUSH_S seconds, so a killed build resumes encoding only texts with no
stored vector. Settings and their measurements: docs/profiles.md, "Building
faster".
"""
from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..core.envvars import positive_number
from ..core.errors import ConfigError
from ..encoders.device import DEVICES, resolve_device
from ..encoders.device import describe as describe_device
from ..encoders.embedder import Embedder
from . import db
from .progress import BuildProgress
from .schema import EMBEDDED_LAYERS

PRECISIONS = ("fp32", "bf16", "int8")
KIND = {"fp32": "full", "bf16": "full", "int8": "int8"}  # precisions whose vectors may share a KB
# Seconds of encoding between two commits of vectors: a killed build loses at most that much (and
# the batches in flight); a resumed one encodes only texts with no stored vector.
FLUSH_S = 1.0
MAX_BATCH = 128


def default_precision() -> str:
    """bf16 where the CPU multiplies it natively (the vectors of fp32 within cosine 0.99994, 1.45x
    faster on these machines), else fp32."""
    from ..encoders.bf16 import native_bf16

    return "bf16" if native_bf16() else "fp32"


def same_kind(a: str, b: str) -> bool:
    return KIND.get(a) == KIND.get(b)


def env_precision() -> Optional[str]:
    """HOPTRACE_BUILD_PRECISION, checked; None when unset."""
    value = os.environ.get("HOPTRACE_BUILD_PRECISION", "").strip()
    if value and value not in PRECISIONS:
        raise ConfigError(f"HOPTRACE_BUILD_PRECISION must be one of {', '.join(PRECISIONS)}, got {value!r}")
    return value or None


@dataclass
class EmbedSettings:
    """How a build encodes. `precision`: fp32; bf16, the same model under bf16 autocast; int8, its
    quantised twin (queries stay fp32 in every case). `workers`: one single-threaded encoder per
    core when 0. `dedupe` off encodes a text again in every layer that holds it (the behaviour
    before, kept to measure it)."""
    precision: str = "fp32"
    workers: int = 0
    token_budget: int = 512
    dedupe: bool = True
    device: str = "auto"     # auto | cpu | cuda (encoders/device.py)

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ConfigError(f"encoder precision {self.precision!r}: choose one of {', '.join(PRECISIONS)}")
        if self.token_budget < 1 or self.workers < 0:
            raise ConfigError("token_budget must be at least 1 and workers at least 0")
        if self.device not in DEVICES:
            raise ConfigError(f"device {self.device!r}: choose one of {', '.join(DEVICES)}")

    @classmethod
    def from_env(cls, precision: Optional[str] = None, device: Optional[str] = None) -> "EmbedSettings":
        """`precision`, else HOPTRACE_BUILD_PRECISION, else `default_precision()`; with
        HOPTRACE_BUILD_WORKERS, _TOKEN_BUDGET and _DEDUPE (0 = off). A bad value is a ConfigError
        naming the variable."""
        workers = positive_number("HOPTRACE_BUILD_WORKERS")
        budget = positive_number("HOPTRACE_BUILD_TOKEN_BUDGET")
        return cls(precision=precision or env_precision() or default_precision(), workers=int(workers or 0),
                   token_budget=int(budget or 512), dedupe=os.environ.get("HOPTRACE_BUILD_DEDUPE", "1") != "0",
                   device=device or os.environ.get("HOPTRACE_BUILD_DEVICE", "").strip() or "auto")


@dataclass
class EmbedReport:
    items: dict[str, int] = field(default_factory=dict)     # vectors written, per layer
    encoded: dict[str, int] = field(default_factory=dict)   # texts run through the encoder, per layer
    seconds: dict[str, float] = field(default_factory=dict)
    precision: str = "fp32"
    encoder: str = ""                                       # "onnxruntime fp32 ×2", "torch bf16 ×2", …
    device: str = ""                                        # "cpu (2 cores)", "cuda (NVIDIA H200)"


def missing_items(con: sqlite3.Connection, layers=None) -> dict[str, list[tuple[int, str]]]:
    """Per layer (all, or `layers`), (rowid, text) of the items that have no vector yet."""
    out = {}
    for layer in EMBEDDED_LAYERS:
        if layers is not None and layer not in layers:
            continue
        done = {r[0] for r in con.execute("SELECT item_rowid FROM vectors WHERE layer=?", (layer,))}
        out[layer] = [(rid, text) for rid, text in con.execute(EMBEDDED_LAYERS[layer]) if rid not in done]
    return out


def stored_vectors(con: sqlite3.Connection, texts: set[str], skip) -> dict[str, bytes]:
    """Vectors another layer already holds for any of `texts`: a build that embeds one method's
    layers at a time still encodes each distinct text once."""
    out: dict[str, bytes] = {}
    if not texts:
        return out
    for layer, sql in EMBEDDED_LAYERS.items():
        if layer in skip:
            continue
        rows = [(rid, t) for rid, t in con.execute(sql) if t in texts and t not in out]
        for start in range(0, len(rows), 500):
            part = dict(rows[start:start + 500])
            marks = ",".join("?" * len(part))
            for rid, vec in con.execute(f"SELECT item_rowid, vec FROM vectors WHERE layer=? AND item_rowid IN "
                                        f"({marks})", (layer, *part)):
                out.setdefault(part[rid], vec)
    return out


def mark_whole(con: sqlite3.Connection, layers) -> None:
    """Record that every item of `layers` up to its current last rowid has its vector
    (readiness.whole_units reads it)."""
    upto = dict(db.get_meta(con, "vectors_upto", {}) or {})
    for layer in layers:
        upto[layer] = con.execute(f"SELECT coalesce(max(rowid), 0) FROM {layer}").fetchone()[0]
    with con:
        db.set_meta(con, "vectors_upto", upto)


def _batches(order: list[int], lengths: list[int], budget: int) -> list[list[int]]:
    """Consecutive runs of `order` (ascending length) whose padded size stays within `budget`."""
    out: list[list[int]] = []
    cur: list[int] = []
    for j in order:
        if cur and (len(cur) + 1) * lengths[j] > budget or len(cur) >= MAX_BATCH:
            out.append(cur)
            cur = []
        cur.append(j)
    if cur:
        out.append(cur)
    return out


class _Encoder:
    """One worker per core (ONNX Runtime sessions, or torch copies for bf16) when they load, else
    the torch model in fp32; `texts` are tokenised once here and `lengths` holds their token
    counts (estimated for the fallback)."""

    def __init__(self, embedder: Embedder, settings: EmbedSettings, texts: list[str]):
        from ..encoders.parallel import ParallelEncoder

        self.embedder = embedder
        self.texts = texts
        device = resolve_device(settings.device, settings.precision)
        self.par = ParallelEncoder.load(embedder, settings.precision, settings.workers, device)
        self.precision = settings.precision if self.par is not None else "fp32"
        self.label = (f"{self.par.runtime} {self.precision} ×{len(self.par.workers)}" if self.par
                      else "torch fp32")
        self.device = describe_device(device)
        self.budget = settings.token_budget
        self.ids = self.par.tokenize(texts) if self.par is not None else None
        self.lengths = [len(x) for x in self.ids] if self.ids is not None else [len(t) // 4 + 2 for t in texts]

    def encode(self, idx: list[int], done) -> None:
        """Encode texts[idx] (ascending length); `done(indices, vectors)` per finished batch."""
        batches = _batches(idx, self.lengths, self.budget)
        if self.par is not None:
            self.par.run(self.ids, batches, done)
            return
        for b in batches:
            done(b, self.embedder.encode([self.texts[j] for j in b], batch_size=len(b)))


class _Tally:
    """Counts what is left as batches finish and tells the progress display."""

    def __init__(self, progress: BuildProgress, lengths: list[int], texts: list[str], tokens: int):
        self.progress, self.lengths, self.texts = progress, lengths, texts
        self.tokens_left, self.texts_left = tokens, len(texts)
        self.tokens_done = 0
        self.t0 = time.perf_counter()
        self.layer, self.layer_left = "", 0
        self.got: dict[str, np.ndarray] = {}
        self.flush = lambda: None
        self.flushed = time.perf_counter()

    def batch_done(self, batch, vectors) -> None:
        for j, v in zip(batch, vectors):
            self.got[self.texts[j]] = v.astype(np.float16)
        if time.perf_counter() - self.flushed >= FLUSH_S:
            self.flush()
            self.flushed = time.perf_counter()
        ntok = sum(self.lengths[j] for j in batch)
        self.tokens_left -= ntok
        self.tokens_done += ntok
        self.texts_left -= len(batch)
        self.layer_left -= len(batch)
        spent = time.perf_counter() - self.t0
        measured = spent > 2 and self.tokens_done > 0  # the first batches include the sessions warming up
        rate = self.tokens_done / spent if measured else self.progress.tokens_prior_rate()
        self.progress.advance(len(batch), f"{self.layer_left:,} texts left in {self.layer}, "
                                          f"{self.texts_left:,} in all layers",
                              self.tokens_left / rate + self.progress.synonyms_s(), not measured,
                              step=f"embed {self.layer}")


def embed_layers(con: sqlite3.Connection, embedder: Embedder, settings: EmbedSettings,
                 progress: BuildProgress, only=None) -> EmbedReport:
    """Write a vector for every item of every layer (or of the layers `only` names) that has
    none, and mark those layers whole."""
    report = EmbedReport(precision=settings.precision)
    todo = missing_items(con, only)
    asked = list(todo)
    layers = [layer for layer in EMBEDDED_LAYERS if todo.get(layer)]
    if not layers:
        mark_whole(con, asked)
        return report
    if settings.dedupe and only is not None:
        # Texts another layer already holds a vector for are copied, not encoded again.
        reuse = stored_vectors(con, {t for layer in layers for _, t in todo[layer]}, skip=set(layers))
        for layer in layers:
            rows = [(layer, rid, reuse[t]) for rid, t in todo[layer] if t in reuse]
            if rows:
                with con:
                    con.executemany("INSERT OR REPLACE INTO vectors(layer, item_rowid, vec) VALUES(?,?,?)", rows)
                # Every layer with vectors gets an entry in each of the three tallies, 0 where
                # nothing was encoded: a reader keyed by `items` (the build's report) finds one.
                report.items[layer] = len(rows)
                report.encoded[layer], report.seconds[layer] = 0, 0.0
            todo[layer] = [(rid, t) for rid, t in todo[layer] if t not in reuse]
        layers = [layer for layer in layers if todo[layer]]
        if not layers:
            mark_whole(con, asked)
            return report
    # Each layer's distinct texts; with dedupe, only those no earlier layer holds.
    per_layer_texts: dict[str, list[str]] = {}
    earlier: set[str] = set()
    for layer in layers:
        distinct = list(dict.fromkeys(t for _, t in todo[layer]))
        per_layer_texts[layer] = [t for t in distinct if t not in earlier] if settings.dedupe else distinct
        earlier.update(distinct)
    # A vector is kept in memory only while a later layer still needs it.
    last_use: dict[str, int] = {}
    for i, layer in enumerate(layers):
        for _, text in todo[layer]:
            last_use[text] = i

    texts = [t for layer in layers for t in per_layer_texts[layer]]
    enc = _Encoder(embedder, settings, texts)
    report.precision, report.encoder, report.device = enc.precision, enc.label, enc.device
    lengths = enc.lengths
    tally = _Tally(progress, lengths, texts, sum(lengths))
    progress.entities = len(todo.get("entities", ()))
    progress.start(f"embed {layers[0]}", len(texts), "text")
    carry: dict[str, np.ndarray] = {}  # vectors a later layer still needs
    lo = 0  # where the layer's own texts start in `texts`

    for i, layer in enumerate(layers):
        t0 = time.perf_counter()
        n = len(per_layer_texts[layer])
        idx = sorted(range(lo, lo + n), key=lambda j: lengths[j])
        items_of: dict[str, list[int]] = {}
        for rid, text in todo[layer]:
            items_of.setdefault(text, []).append(rid)
        pending = [(rid, t) for rid, t in todo[layer] if t in carry] if settings.dedupe else []
        tally.layer, tally.layer_left = layer, n

        def flush(layer=layer, i=i, items_of=items_of) -> None:
            """Store what the finished batches encoded (called from the encoding loop's thread)."""
            nonlocal pending
            rows = [(layer, rid, v.tobytes()) for t, v in tally.got.items() for rid in items_of.get(t, ())]
            rows += [(layer, rid, carry[t].tobytes()) for rid, t in pending]
            pending = []
            with con:
                con.executemany("INSERT OR REPLACE INTO vectors(layer, item_rowid, vec) VALUES(?,?,?)", rows)
            if settings.dedupe:
                carry.update((t, v) for t, v in tally.got.items() if last_use.get(t, i) > i)
            tally.got = {}

        tally.got, tally.flush = {}, flush
        if idx:
            enc.encode(idx, tally.batch_done)
        flush()
        for t in [t for t in carry if last_use.get(t, i) <= i]:
            del carry[t]
        report.items[layer] = report.items.get(layer, 0) + len(todo[layer])
        report.encoded[layer] = n
        report.seconds[layer] = round(time.perf_counter() - t0, 1)
        lo += n
    progress.close()
    mark_whole(con, asked)
    return report
