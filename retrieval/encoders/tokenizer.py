"""A sentence-transformers model read from its folder without importing sentence-transformers:
its layout (modules, pooling, width, length) and its tokenizer.

Importing sentence-transformers (with torch, transformers and scikit-learn) takes ~8 s on a
2-core EPYC, in every process that encodes a query: a CLI bench of 0.3 s of work took 10.4 s.
Once the ONNX export exists (retrieval/encoders/onnx.py), ONNX Runtime and the `tokenizers`
library (the Rust tokenizer that transformers' fast tokenizer runs) are all a query needs:
0.4 s of imports. tests/test_embed.py checks that both paths give the same tokens, spans and
vectors.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np


@dataclass(frozen=True)
class Layout:
    """What the model folder's JSON files say, read without loading any weights."""
    modules: tuple[str, ...]    # e.g. ("Transformer", "Pooling", "Normalize")
    mean_pooled: bool
    dim: int
    max_seq_length: int

    @classmethod
    def read(cls, path: Path) -> Optional["Layout"]:
        """None where a file is missing or unreadable: the caller loads the model instead."""
        try:
            modules = json.loads((path / "modules.json").read_text())
            names = tuple(m["type"].rsplit(".", 1)[-1] for m in modules)
            pooling = next((m for m in modules if m["type"].endswith(".Pooling")), None)
            pool = json.loads((path / pooling["path"] / "config.json").read_text()) if pooling else {}
            length = json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        modes = [k for k, v in pool.items() if k.startswith("pooling_mode") and v is True]
        return cls(names, modes == ["pooling_mode_mean_tokens"], int(pool.get("word_embedding_dimension", 0)),
                   int(length))


class FastTokenizer:
    """The model's tokenizer.json run by `tokenizers`, called as transformers' tokenizer is
    called here: one text or a list, truncated to the model's length, padded to the longest
    when asked, as NumPy arrays or lists."""

    def __init__(self, path: Path, max_length: int):
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        # tokenizer.json carries the settings of whoever saved it (MiniLM's: truncate at 128 and
        # pad every text to 128); transformers replaces them on each call, and so does this.
        self._tok.no_padding()
        self._tok.enable_truncation(max_length)
        self.max_length = max_length
        self.pad_id = _pad_id(path, self._tok)

    @classmethod
    def load(cls, path: Path, max_length: int) -> Optional["FastTokenizer"]:
        if not (path / "tokenizer.json").exists():
            return None
        try:
            return cls(path, max_length)
        except Exception:  # an unreadable tokenizer.json: transformers' own loader decides
            return None

    def __call__(self, texts: Union[str, Sequence[str]], padding: bool = False, truncation: bool = True,
                 max_length: Optional[int] = None, return_tensors: Optional[str] = None,
                 return_offsets_mapping: bool = False, return_attention_mask: bool = True,
                 return_token_type_ids: bool = True) -> dict:
        if not truncation or (max_length or self.max_length) != self.max_length:
            raise ValueError(f"this tokenizer truncates at the model's {self.max_length} tokens only")
        single = isinstance(texts, str)
        encs = self._tok.encode_batch([texts] if single else list(texts))
        fields = {"input_ids": [e.ids for e in encs]}
        if return_token_type_ids:
            fields["token_type_ids"] = [e.type_ids for e in encs]
        if return_attention_mask:
            fields["attention_mask"] = [e.attention_mask for e in encs]
        if return_offsets_mapping:
            fields["offset_mapping"] = [list(e.offsets) for e in encs]
        if return_tensors == "np":
            if not (single or padding) and len({len(e.ids) for e in encs}) > 1:
                raise ValueError("texts of different lengths make an array only when padded")
            return {k: self._array(k, v) for k, v in fields.items()}
        if return_tensors is not None:
            raise ValueError(f"return_tensors={return_tensors!r}: only 'np' or None")
        return {k: v[0] if single else v for k, v in fields.items()}

    def _array(self, key: str, rows: list) -> np.ndarray:
        width = max(len(r) for r in rows)
        if key == "offset_mapping":
            out = np.zeros((len(rows), width, 2), dtype=np.int64)
        else:
            out = np.full((len(rows), width), self.pad_id if key == "input_ids" else 0, dtype=np.int64)
        for i, r in enumerate(rows):
            if r:
                out[i, :len(r)] = r
        return out


def _pad_id(path: Path, tok) -> int:
    """The padding token's id (MiniLM's [PAD] is 0, MPNet's <pad> is 1)."""
    try:
        pad = json.loads((path / "special_tokens_map.json").read_text()).get("pad_token")
    except (OSError, ValueError):
        pad = None
    if isinstance(pad, dict):
        pad = pad.get("content")
    found = tok.token_to_id(pad) if pad else None
    return int(found) if found is not None else 0
