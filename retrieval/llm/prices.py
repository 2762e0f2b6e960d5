"""What an LLM's tokens cost in money.

Prices come from `genai-prices` (pydantic's database of model prices, kept current by its
maintainers; nothing here is typed in by hand). A price file (`--prices FILE` or
`HOPTRACE_PRICES`) overrides or adds models, e.g. a self-hosted endpoint at the team's own rate:

    # model,input_usd_per_mtok,output_usd_per_mtok[,cached_input_usd_per_mtok]
    my-vllm-qwen-7b,0.05,0.10

The embedded model costs $0 (its CPU seconds are what a question costs, and the bench reports
them). A model with no known price is "price unknown", never $0.

Token counts are those the runs recorded, cache hits of HopTrace's own response cache
included: the cost is what the method's calls cost an endpoint, not what this machine happened
to pay on a warm cache. Input tokens are priced as uncached input (the endpoints' usage
reports, as HopTrace records them, do not say which were read from a provider's cache).
"""
from __future__ import annotations

import csv
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..core.errors import ConfigError
from ..core.money import EMBEDDED, UNKNOWN, cost_text, usd_text  # noqa: F401 (usd_text: the money format, re-exported)

PRICES_ENV = "HOPTRACE_PRICES"


@dataclass(frozen=True)
class Price:
    """USD per million tokens, and where the figure came from."""
    model: str
    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: Optional[float] = None
    source: str = "genai-prices"   # genai-prices | the price file's name | embedded

    def usd(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1e6


def read_price_file(path: Path) -> dict[str, Price]:
    """model (lower case) → Price. A bad line is a ConfigError naming the file and the line. Read
    once per version of the file: every run's cost asks for it (bench, the app's columns)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"price file {path} does not exist")
    st = path.stat()
    return dict(_parse_price_file(path.resolve(), st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=8)
def _parse_price_file(path: Path, mtime_ns: int, size: int) -> tuple[tuple[str, Price], ...]:
    out: dict[str, Price] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        for n, row in enumerate(csv.reader(fh), 1):
            if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                continue
            cells = [c.strip() for c in row]
            if n == 1 and cells[0].lower() == "model":
                continue   # a header line
            where = f"price file {path.name}, line {n}"
            if len(cells) not in (3, 4):
                raise ConfigError(f"{where}: expected model,input_usd_per_mtok,output_usd_per_mtok"
                                  f"[,cached_input_usd_per_mtok], got {len(cells)} fields: {','.join(row)!r}")
            try:
                nums = [float(c) for c in cells[1:]]
            except ValueError:
                raise ConfigError(f"{where}: prices must be numbers (USD per million tokens), got "
                                  f"{','.join(cells[1:])!r}") from None
            if any(x < 0 for x in nums) or not cells[0]:
                raise ConfigError(f"{where}: a model name and prices of 0 or more are needed, got {','.join(row)!r}")
            if cells[0].lower() in out:
                raise ConfigError(f"{where}: model {cells[0]!r} is priced twice in this file")
            out[cells[0].lower()] = Price(cells[0], nums[0], nums[1], nums[2] if len(nums) == 3 else None, path.name)
    return tuple(out.items())


def _env_file() -> Optional[Path]:
    raw = os.environ.get(PRICES_ENV, "").strip()
    return Path(raw) if raw else None


@functools.lru_cache(maxsize=256)
def _from_database(model: str) -> Optional[Price]:
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # pragma: no cover - a dependency; an image without it prices nothing
        return None
    try:
        calc = calc_price(Usage(input_tokens=1_000_000, output_tokens=1_000_000), model)
    except (LookupError, ValueError):
        return None
    mp = calc.model_price
    cached = getattr(mp, "cache_read_mtok", None)
    return Price(model, float(calc.input_price), float(calc.output_price),
                 float(cached) if cached is not None else None,
                 f"genai-prices ({calc.provider.id})")


def price_for(model: str, backend: str = "openai", price_file: Optional[Path] = None) -> Optional[Price]:
    """The price of `model`'s tokens: the price file's first, then genai-prices; the embedded
    backend is $0; None when no source knows the model."""
    if backend == "local":
        return Price(model, 0.0, 0.0, 0.0, EMBEDDED)
    if backend == "none" or not model:
        return None
    path = price_file or _env_file()
    if path is not None:
        own = read_price_file(path).get(model.lower())
        if own is not None:
            return own
    return _from_database(model)


@dataclass
class Cost:
    """One run's cost: `usd` None when the price is unknown."""
    model: str
    usd: Optional[float]
    source: str
    cpu_s: Optional[float] = None   # the embedded model's runs: CPU seconds, this process and the model's

    def to_dict(self) -> dict:
        return {"model": self.model, "usd": self.usd, "source": self.source, "cpu_s": self.cpu_s}

    def label(self) -> str:
        return cost_text(self.to_dict())


def cost_of(llm, tokens_in: int, tokens_out: int, price_file: Optional[Path] = None) -> Optional[Cost]:
    """A run's cost on `llm` (retrieval.llm.client.LLM, or None for an LLM-free run: $0 when it
    spent no tokens)."""
    if llm is None:
        return Cost("", 0.0, "no LLM") if not (tokens_in or tokens_out) else Cost("", None, UNKNOWN)
    s = llm.settings
    price = price_for(s.model, s.backend, price_file)
    if price is None:
        return Cost(s.model, None if (tokens_in or tokens_out) else 0.0, UNKNOWN)
    return Cost(s.model, round(price.usd(tokens_in, tokens_out), 8), price.source)


def attach_cost(run, llm, price_file: Optional[Path] = None, cpu_s: Optional[float] = None):
    """Record `run`'s cost on it (RunResult.cost) and return the Cost. Every caller that runs a
    method does this (bench, the app, `ask`, the notebook), so each stored run carries its cost."""
    cost = cost_of(llm, run.tokens_in, run.tokens_out, price_file)
    if cpu_s is not None:
        cost.cpu_s = round(cpu_s, 3)
    run.cost = cost.to_dict()
    return cost


class CpuClock:
    """CPU seconds of this process and of the embedded model's server (a child process, and its own
    child for llama-server, that `resource.getrusage` does not count until it exits). Meaningful for
    runs made one at a time."""

    def __init__(self, llm=None):
        import psutil

        self._psutil = psutil
        self._me = psutil.Process()
        self._llm = llm
        self._child = None

    def _server(self):
        """The model server's process, once the LLM has started it (it starts on the first request)."""
        if self._child is None and self._llm is not None:
            proc = getattr(getattr(self._llm, "_backend", None), "proc", None)
            if proc is not None and proc.poll() is None:
                self._child = self._psutil.Process(proc.pid)
        return self._child

    def seconds(self) -> float:
        t = self._me.cpu_times()
        total = t.user + t.system
        child = self._server()
        if child is not None:
            try:
                # llama-server runs under a supervisor (llm/supervise.py): the seconds are its child's
                for c in (p.cpu_times() for p in (child, *child.children(recursive=True))):
                    total += c.user + c.system
            except self._psutil.Error:  # the server stopped: its seconds are no longer counted
                self._child = self._llm = None
        return total
