"""Reading JSON files strictly: bad bytes and duplicate keys are errors that name the spot."""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from ..core.errors import InputError


def read_text(path: str | Path) -> str:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            raise InputError(f"{path}: not a readable gzip file ({e})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise InputError(
            f"{path}: invalid UTF-8 at byte {e.start} (line {line}): {raw[e.start:e.start + 4]!r}"
        ) from None


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    # json.loads keeps the last of two equal keys silently; in a title -> sentences corpus
    # that would drop a passage without a word.
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise InputError(f"duplicate key {key!r} in a JSON object (a duplicate title?)")
        seen[key] = value
    return seen


def read_json(path: str | Path) -> Any:
    text = read_text(path)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply (no corpus or questions format nests more than a "
                         "few levels)") from None
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
