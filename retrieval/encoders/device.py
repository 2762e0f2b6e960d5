"""Where a build encodes: every CPU core (the default), or a CUDA GPU when torch sees one.

`--device auto` takes CUDA when `torch.cuda.is_available()`, else the CPU; `cuda` asked on a
machine without one is refused, naming what torch sees. On CUDA the build encodes with one copy of
the transformer on the GPU (fp32, or bf16 autocast where asked); the query encoder stays on the
CPU, so a KB built on a GPU is asked exactly as one built on the CPU. int8 is a CPU quantisation
(ONNX Runtime) and runs on the CPU whatever the device.
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np

from ..core.errors import ConfigError
from .onnx import Loaded, mean_pooled, padded

DEVICES = ("auto", "cpu", "cuda")


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # a torch without CUDA support at all
        return False


def resolve_device(asked: str, precision: str) -> str:
    """The device a build with `asked` (auto | cpu | cuda) and `precision` runs on."""
    if asked not in DEVICES:
        raise ConfigError(f"device {asked!r}: choose one of {', '.join(DEVICES)}")
    if precision == "int8":
        if asked == "cuda":
            raise ConfigError("--precision int8 is an ONNX Runtime CPU quantisation: build it with --device cpu "
                              "(or auto), or choose fp32 or bf16 for CUDA")
        return "cpu"
    if asked == "cuda" and not cuda_available():
        raise ConfigError("--device cuda: torch sees no CUDA GPU on this machine (torch.cuda.is_available() "
                          "is False; the CPU wheel has no CUDA support); use --device auto or cpu")
    if asked == "auto":
        return "cuda" if cuda_available() else "cpu"
    return asked


def describe(device: str) -> str:
    """"cuda (NVIDIA H200)" or "cpu (16 cores)", for `kb info` and the build's report."""
    import os

    if device == "cuda":
        try:
            import torch

            return f"cuda ({torch.cuda.get_device_name(0)})"
        except Exception:
            return "cuda"
    return f"cpu ({os.cpu_count() or 1} cores)"


class CudaEncoder:
    """The transformer on the GPU: batches of token ids in, unit vectors out."""

    def __init__(self, model: Any, tokenizer: Any, max_length: int, bf16: bool):
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.bf16 = bf16

    @classmethod
    def load(cls, embedder: Loaded, precision: str) -> "CudaEncoder":
        hf = copy.deepcopy(embedder.model[0].auto_model).to("cuda").eval()  # the query model stays on the CPU
        return cls(hf, embedder.model.tokenizer, embedder.model.max_seq_length, precision == "bf16")

    def encode_ids(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        import torch

        input_ids, mask = padded(ids)
        ii = torch.from_numpy(input_ids).to("cuda")
        mm = torch.from_numpy(mask).to("cuda")
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.bf16):
            hidden = self.model(input_ids=ii, attention_mask=mm, token_type_ids=torch.zeros_like(ii),
                                return_dict=True).last_hidden_state
        return mean_pooled(hidden.float().cpu().numpy(), mask)
