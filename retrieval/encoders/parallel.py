"""A build's encoder: one single-threaded worker per core, each taking the next batch from a
shared list. On 2 cores this ran ~5-10 % more texts a second than one worker with two intra-op
threads, which synchronise inside every op of a small batch (docs/profiles.md, "Building
faster"). The workers are ONNX Runtime sessions (fp32, int8) or torch copies under bf16
autocast; both release the GIL while they compute.
"""
from __future__ import annotations

import os
import queue
import threading
from typing import Callable, Optional, Protocol, Sequence

import numpy as np

from .onnx import Loaded, OnnxEncoder


class Worker(Protocol):
    tokenizer: object
    max_length: int

    def encode_ids(self, ids: Sequence[Sequence[int]]) -> np.ndarray: ...


class ParallelEncoder:
    def __init__(self, workers: Sequence[Worker], precision: str, device: str = "cpu"):
        self.workers = list(workers)
        self.precision = precision
        self.device = device
        self.tokenizer = self.workers[0].tokenizer
        self.max_length = self.workers[0].max_length

    @property
    def runtime(self) -> str:
        if self.device == "cuda":
            return "torch cuda"
        return "torch" if self.precision == "bf16" else "onnxruntime"

    @classmethod
    def load(cls, embedder: Loaded, precision: str = "fp32", workers: int = 0,
             device: str = "cpu") -> Optional["ParallelEncoder"]:
        """None when an ONNX precision cannot load (no onnxruntime, a failed export): the caller
        falls back to the torch model in fp32. On CUDA: one worker, the model on the GPU."""
        if device == "cuda":
            from .device import CudaEncoder

            return cls([CudaEncoder.load(embedder, precision)], precision, device)
        n = workers or os.cpu_count() or 1
        if precision == "bf16":
            from .bf16 import Bf16Encoder

            return cls([Bf16Encoder.load(embedder) for _ in range(n)], precision)
        if os.environ.get("HOPTRACE_ONNX", "1") == "0":
            return None
        made = []
        for slot in range(n):
            enc = OnnxEncoder.load(embedder, precision, threads=1 if n > 1 else 0, slot=slot)
            if enc is None:
                return None
            made.append(enc)
        return cls(made, precision)

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, truncated as the model truncates, specials included."""
        return self.tokenizer(list(texts), truncation=True, max_length=self.max_length,
                              return_attention_mask=False, return_token_type_ids=False)["input_ids"]

    def run(self, ids: Sequence[Sequence[int]], batches: Sequence[Sequence[int]],
            done: Optional[Callable[[Sequence[int], np.ndarray], None]] = None) -> None:
        """Encode every batch; `done(indices, vectors)` is called for each, from the caller's
        thread, in the order batches finish."""
        todo: "queue.Queue" = queue.Queue()
        for b in batches:
            todo.put(b)
        results: "queue.Queue" = queue.Queue()

        def work(enc: Worker) -> None:
            try:
                _one_thread()
                while True:
                    try:
                        b = todo.get_nowait()
                    except queue.Empty:
                        return
                    results.put((b, enc.encode_ids([ids[j] for j in b])))
            except BaseException as e:  # surfaced in the caller's thread below
                results.put(e)

        threads = [threading.Thread(target=work, args=(e,), daemon=True) for e in self.workers]
        for t in threads:
            t.start()
        for _ in range(len(batches)):
            got = results.get()
            if isinstance(got, BaseException):
                while not todo.empty():  # the other workers stop after their current batch
                    todo.get_nowait()
                raise got
            if done is not None:
                done(*got)
        for t in threads:
            t.join()


def _one_thread() -> None:
    """torch's intra-op thread count is a per-thread setting in OpenMP: a new thread would start
    with every core, and two such workers would fight over both."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
