"""A build's bfloat16 encoder: the torch model under bf16 autocast, for CPUs that multiply
bf16 natively (AVX512-BF16, AMX).

Matrix products take bf16 inputs and accumulate in fp32; autocast keeps LayerNorm and softmax in
fp32. The vectors stay within cosine 0.99994 of fp32's (0.999986 on average over 9,190 2Wiki texts
of every layer), where int8's are at ~0.993, and on this Zen 4 it encoded 1.45x the tokens a
second of the fp32 ONNX sessions (docs/profiles.md, "Building faster"). A CPU without native
bf16 would emulate it, slower than fp32, so there it is never the default.
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np

from .onnx import Loaded, mean_pooled, padded


def native_bf16() -> bool:
    """True where this CPU multiplies bf16 in hardware (what makes bf16 pay)."""
    try:
        import torch.cpu as cpu

        return bool(cpu._is_avx512_bf16_supported() or cpu.get_capabilities().get("amx_bf16", False))
    except Exception:  # an older torch without these probes: read the kernel's flags
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                flags = f.read()
        except OSError:
            return False
        return " avx512_bf16" in flags or " amx_bf16" in flags


class Bf16Encoder:
    """One worker's copy of the transformer (torch modules are not shared across threads)."""

    def __init__(self, model: Any, tokenizer: Any, max_length: int):
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length

    @classmethod
    def load(cls, embedder: Loaded) -> "Bf16Encoder":
        hf = copy.deepcopy(embedder.model[0].auto_model).eval()  # the live (query) model is never touched
        return cls(hf, embedder.model.tokenizer, embedder.model.max_seq_length)

    def encode_ids(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit vectors of one batch of texts already tokenised (specials included), padded here."""
        import torch

        input_ids, mask = padded(ids)
        ii = torch.from_numpy(input_ids)
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            hidden = self.model(input_ids=ii, attention_mask=torch.from_numpy(mask),
                                token_type_ids=torch.zeros_like(ii), return_dict=True).last_hidden_state
        return mean_pooled(hidden.float().numpy(), mask)
