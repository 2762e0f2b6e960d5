"""The LLM extractor: one task (triples, events or propositions) over all passages.

One extractor per layer, so each layer keeps its own per-passage state: a passage whose
event failed still gets its triples, and `--retry-failed` redoes only what failed.
Requests go out in parallel up to the LLM's concurrency limit (1 for the embedded model,
4 for HTTP endpoints); results come back in passage order.

Never silently empty: a batch whose answer is unusable after the LLM layer's one repair,
or that leaves passages out, is retried one passage at a time; a passage that still
yields nothing is returned with `failed` set to the reason.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterable, Iterator, Optional

from ....core.records import Extraction, Passage
from ....llm import LLM, LLMCallError, LLMOutputError
from ....trace.model import LLMCall
from .prompts import JOINT_VERSION, PROMPT_VERSION
from .tasks import JOINT, TASKS, Task

READS = ("one", "per-layer")

# Consecutive failed requests (after the HTTP client's own retries) that stop the build:
# the endpoint is down, and marking every remaining passage failed would help nobody.
MAX_CONSECUTIVE_CALL_ERRORS = 3


class UsageMeter:
    """Takes the LLM layer's per-call records (it has the Stage's `add_llm_call`) and sums them."""

    def __init__(self):
        self._lock = threading.Lock()
        self.calls = self.cached = self.tokens_in = self.tokens_out = self.repairs = 0
        self.call_errors_in_a_row = 0

    def add_llm_call(self, call: LLMCall) -> None:
        with self._lock:
            self.calls += 1
            self.cached += call.cached
            self.repairs += call.purpose.endswith("(repair)")
            if not call.cached:  # a cached answer cost nothing this time
                self.tokens_in += call.tokens_in
                self.tokens_out += call.tokens_out
            self.call_errors_in_a_row = self.call_errors_in_a_row + 1 if call.error else 0

    def report(self, **progress) -> None:
        """A request's progress while in flight (a Stage shows it live); a build counts its
        progress per passage instead, so this is deliberately a no-op."""


class LLMExtractor:
    name = "llm"

    def __init__(self, llm: LLM, layer: str, batch_size: Optional[int] = None, retry_round: int = 0,
                 layers: Optional[Iterable[str]] = None):
        if layer not in TASKS and layer != JOINT.layer:
            raise ValueError(f"unknown LLM extraction layer {layer!r}; choose from {', '.join(TASKS)}")
        self.llm = llm
        self.task: Task = JOINT if layer == JOINT.layer else TASKS[layer]
        # The joint task's answer fills three layers; a build that asked for two stores two.
        self.layers = frozenset(layers or self.task.layers)
        self.batch_size = max(1, batch_size or self.task.batch_size)
        # A retry must not be answered from the response cache with the same failed answer:
        # later rounds sample (temperature 0.5) with the round as seed, a fresh cache key.
        self.retry_round = retry_round
        self.version = f"{PROMPT_VERSION}{'/one-read' + JOINT_VERSION if self.task is JOINT else ''}:{llm.model}"
        self.meter = UsageMeter()
        self.failures = 0
        self.passages_done = 0
        self.seconds = 0.0
        self.commit_every = self.batch_size  # a kill loses at most the batches in flight (and the cache has them)

    # --- the Extractor protocol -----------------------------------------------------------------------
    def extract(self, passages: list[Passage]) -> Iterable[Extraction]:
        batches = [passages[i:i + self.batch_size] for i in range(0, len(passages), self.batch_size)]
        workers = max(1, self.llm.settings.max_concurrency)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"extract-{self.task.layer}") as pool:
            window: deque[Future] = deque()
            pending = iter(batches)
            for batch in pending:  # keep `workers` requests in flight, yield in passage order
                window.append(pool.submit(self._run_batch, batch))
                if len(window) >= workers:
                    yield from self._drain(window.popleft(), t0)
            while window:
                yield from self._drain(window.popleft(), t0)

    def _drain(self, fut: Future, t0: float) -> Iterator[Extraction]:
        for ex in fut.result():
            self.passages_done += 1
            self.failures += ex.failed is not None
            self.seconds = time.perf_counter() - t0
            yield ex

    def progress_note(self) -> str:
        m = self.meter
        return (f"{m.tokens_in:,} tok in / {m.tokens_out:,} out · {m.calls} calls ({m.cached} cached) · "
                f"{self.failures} failed")

    def summary(self) -> dict:
        m = self.meter
        return {"layer": self.task.layer, "layers": sorted(self.layers), "model": self.llm.model,
                "backend": self.llm.describe(),
                "prompt_version": PROMPT_VERSION, "batch_size": self.batch_size, "retry_round": self.retry_round,
                "passages": self.passages_done, "failed": self.failures, "calls": m.calls, "cached_calls": m.cached,
                "repairs": m.repairs, "tokens_in": m.tokens_in, "tokens_out": m.tokens_out,
                "seconds": round(self.seconds, 1)}

    # --- one request ----------------------------------------------------------------------------------
    def _run_batch(self, batch: list[Passage]) -> list[Extraction]:
        try:
            results = self._ask(batch)
        except LLMOutputError as e:
            if len(batch) == 1:
                return [Extraction(batch[0].id, failed=str(e))]
            results = [None] * len(batch)
        except LLMCallError as e:
            if self.meter.call_errors_in_a_row >= MAX_CONSECUTIVE_CALL_ERRORS:
                raise LLMCallError(f"{self.meter.call_errors_in_a_row} LLM requests failed in a row ({e}); "
                                   "stopping — run the same build again to resume") from e
            return [Extraction(p.id, failed=f"LLM request failed: {e}") for p in batch]
        if len(batch) == 1:
            return [results[0] or Extraction(batch[0].id, failed="the model's answer did not cover this passage")]
        # Passages the batch answer left out (or a batch that failed) get one request each.
        return [r if r is not None else self._run_batch([p])[0] for p, r in zip(batch, results)]

    def _ask(self, batch: list[Passage]) -> list[Optional[Extraction]]:
        t = self.task
        retry = self.retry_round > 0
        value = self.llm.json(
            self.meter, f"extract {t.layer}", t.messages(batch), t.schema,  # type: ignore[arg-type]
            validate=lambda v: t.check(v, batch), max_tokens=t.max_tokens(len(batch)),
            temperature=0.5 if retry else None, seed=self.retry_round if retry else None)
        return t.parse(value, batch)


def llm_extractors(llm: LLM, layers: Iterable[str], batch_size: Optional[int] = None,
                   retry_round: int = 0, reads: str = "per-layer") -> list[LLMExtractor]:
    """`reads="one"`: one request a passage fills every requested layer (the joint task);
    `"per-layer"`: one extractor per layer, each with its paper's prompt; `batch_size`
    applies to propositions (GRASP A.1.5)."""
    if reads not in READS:
        raise ValueError(f"reads must be one of {', '.join(READS)}, got {reads!r}")
    layers = tuple(layers)
    if reads == "one" and len(layers) > 1:
        return [LLMExtractor(llm, JOINT.layer, retry_round=retry_round, layers=layers)]
    return [LLMExtractor(llm, layer, batch_size if layer == "propositions" else None, retry_round)
            for layer in layers]
