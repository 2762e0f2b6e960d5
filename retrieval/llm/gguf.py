"""A model file given by path (`--llm-model PATH.gguf`, HOPTRACE_LLM_MODEL): checked before any
server is started, so a wrong path is refused with its name, not as a server that will not start."""
from __future__ import annotations

from pathlib import Path

from ..core.errors import ConfigError

MAGIC = b"GGUF"


def looks_like_path(name: str) -> bool:
    return name.endswith(".gguf") or "/" in name or name.startswith("~") or Path(name).exists()


def check_gguf(path: str | Path) -> Path:
    """The file's resolved path; ConfigError naming it when it cannot be read or is not GGUF."""
    p = Path(path).expanduser()
    try:
        with open(p, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ConfigError(f"model file {p} cannot be read: {e.strerror or e}") from None
    if magic != MAGIC:
        raise ConfigError(f"model file {p} is not a GGUF file (it starts with {magic!r}, not {MAGIC!r})")
    return p.resolve()


def gguf_path(model: str) -> Path:
    """A packaged model's assembled file, or a GGUF file given by path."""
    from .models import MODELS, model_file

    return model_file(model) if model in MODELS else check_gguf(model)
