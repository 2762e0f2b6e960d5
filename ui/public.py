"""Public mode: what a deployment open to anyone (a Hugging Face Space) limits and keeps apart.

Off for a local run, on in the Dockerfile (HOPTRACE_PUBLIC=1) or with `hoptrace serve --public`.
Each visitor's browser holds a random id (gr.BrowserState); sessions are stored with it as
owner, and the Traces tab and its export only ever read the caller's own sessions. A session
link (`?session=ID`, 128 random bits) opens that one comparison read-only for whoever has it.
The caps bound the work one request or one visitor can start; each refusal names its limit.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import threading
import time
from collections import OrderedDict, deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from retrieval.core.errors import InputError


class LimitError(InputError):
    """A request over one of public mode's caps; the message names the cap."""


@dataclass
class PublicLimits:
    enabled: bool = False
    max_upload_mb: int = 20
    max_passages: int = 2000          # a rules build of 2,000 passages takes ~1 min on 2 cores
    max_bench_questions: int = 20
    # LLM judging of a pool (traces/judging/): pairs one request may send to the one model server.
    max_judge_pairs: int = 60
    # Questions generated from a KB's graph (retrieval/qgen/) a request may keep: ~15–30 s each on
    # the embedded model (three to four LLM requests a candidate).
    max_generate: int = 20
    max_llm_methods: int = 2          # LLM methods in one request (each holds the one model server)
    llm_extraction: bool = False      # ~10–60 s a passage on the embedded model
    requests_per_minute: int = 6      # asks, benchmarks and builds of one visitor
    # A visitor id is whatever the caller sends, so a script rotates it: the client's address
    # bounds what one machine may start, whatever ids it shows. Twice a visitor's allowance,
    # for two people behind one NAT.
    requests_per_minute_per_address: int = 12
    llm_requests_per_address: int = 1   # requests with LLM methods running at once from one address
    # Take the client's address from the first hop of X-Forwarded-For, as set by a proxy in front
    # (Hugging Face Spaces'); off, the socket's address, and the header is ignored (anyone can send it).
    trust_proxy: bool = False
    show_paths: bool = True           # server paths on the page (the trace DB's location)

    @classmethod
    def from_env(cls, public: bool | None = None) -> "PublicLimits":
        on = public if public is not None else os.environ.get("HOPTRACE_PUBLIC", "") not in ("", "0", "false")
        proxy = os.environ.get("HOPTRACE_TRUST_PROXY", "") not in ("", "0", "false")
        return cls(enabled=True, show_paths=False, trust_proxy=proxy) if on else cls(trust_proxy=proxy)

    # --- the checks each handler makes -------------------------------------------------------
    def check_methods(self, chosen: list[str], uses_llm) -> None:
        llm = [m for m in chosen if uses_llm(m)]
        if self.enabled and len(llm) > self.max_llm_methods:
            raise LimitError(f"this public demo runs at most {self.max_llm_methods} LLM methods a request "
                             f"(you picked {len(llm)}: {', '.join(llm)}); run the others in a second request")

    def check_bench(self, n_questions: int) -> None:
        if self.enabled and n_questions > self.max_bench_questions:
            raise LimitError(f"this public demo benchmarks at most {self.max_bench_questions} questions a run "
                             f"(asked for {n_questions}); run `hoptrace bench` locally for more")

    def check_judge_pairs(self, n_pairs: int) -> None:
        if self.enabled and n_pairs > self.max_judge_pairs:
            raise LimitError(f"this public demo judges at most {self.max_judge_pairs} pooled pairs with the LLM a "
                             f"request ({n_pairs} are left to judge); pool fewer methods or a smaller depth, grade "
                             "them yourself, or run `hoptrace judge` locally")

    def check_generate(self, n: int) -> None:
        if self.enabled and n > self.max_generate:
            raise LimitError(f"this public demo generates at most {self.max_generate} questions a request (asked "
                             f"{n}); generate more with `hoptrace questions generate` locally")

    def check_extractor(self, extractor: str) -> None:
        if self.enabled and extractor == "llm" and not self.llm_extraction:
            raise LimitError("LLM extraction is off on this public demo (10–60 s a passage on its CPU); "
                             "pick rules or openie, or build locally with `hoptrace build --extractor llm`")

    def passage_cap(self) -> int | None:
        return self.max_passages if self.enabled else None

    def upload_cap(self) -> str | None:
        return f"{self.max_upload_mb}mb" if self.enabled else None


@dataclass
class RateLimiter:
    """At most `per_minute` requests per key (a visitor id, or an address) in any 60 s (a sliding
    window). Memory stays bounded: a key idle for a minute is dropped when met, and past `max_keys`
    the least recently seen keys are evicted (a script rotating ids or addresses only ever
    evicts its own old entries, whose windows it could not use anyway)."""
    per_minute: int
    who: str = "visitor"
    max_keys: int = 10_000
    _seen: "OrderedDict[str, deque]" = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, key: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            q = self._seen.pop(key, None) or deque()
            while q and now - q[0] >= 60:
                q.popleft()
            self._seen[key] = q          # most recent last
            while len(self._seen) > self.max_keys:
                self._seen.popitem(last=False)
            if len(q) >= self.per_minute:
                wait = 60 - (now - q[0])
                raise LimitError(f"this public demo takes at most {self.per_minute} requests a minute from one "
                                 f"{self.who}; try again in {wait:.0f} s")
            q.append(now)

    def __len__(self) -> int:
        return len(self._seen)


class LiveRuns:
    """Requests with LLM methods in flight per address: at most `per_address` at once."""

    def __init__(self, per_address: int):
        self.per_address = per_address
        self._live: dict[str, int] = {}
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, address: str) -> Iterator[None]:
        with self._lock:
            n = self._live.get(address, 0)
            if n >= self.per_address:
                raise LimitError(f"this public demo runs at most {self.per_address} request(s) with LLM methods at "
                                 "once from one address; wait for the one running to finish")
            self._live[address] = n + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._live.get(address, 1) - 1
                if left > 0:
                    self._live[address] = left
                else:
                    self._live.pop(address, None)   # bounded: only addresses with work in flight

    def __len__(self) -> int:
        return len(self._live)


def client_address(request, trust_proxy: bool) -> str:
    """Who sent a request: the first hop of X-Forwarded-For when a trusted proxy sets it, else the
    socket's peer (ui/app.py `serve` stops uvicorn from rewriting it from that header)."""
    if request is None:
        return "unknown"
    if trust_proxy:
        first = (request.headers.get("x-forwarded-for") or "").split(",")[0].strip()
        if first:
            return first
    client = getattr(request, "client", None)
    return getattr(client, "host", None) or "unknown"


_DIRS = re.compile(r"(?<![\w.~])(?:/[^\s/'\"`:,()\[\]<>]+)+/(?=[^\s/])")


def visitor_message(message: str, uploads: dict[str, str]) -> str:
    """An error as a public visitor sees it: each uploaded file's server path replaced by the name
    the visitor gave it, and any other absolute path cut to its last part (public mode shows no
    server path)."""
    for path, name in uploads.items():
        if path:
            message = message.replace(str(path), name)
    return _DIRS.sub("", message)


def new_visitor_id() -> str:
    return secrets.token_hex(16)


class KBOwners:
    """Which visitor built which KB, so that in public mode a KB a visitor builds is listed for,
    and opened by, that visitor alone. KBs with no owner (the bundled ones, anything built
    from the command line) are everyone's. Kept as a small JSON file beside the KBs."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def _read(self) -> dict[str, str]:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}

    def claim(self, kb: str, visitor: str) -> None:
        with self._lock:
            owners = self._read()
            owners[kb] = visitor
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(owners, indent=1))
            tmp.replace(self.path)  # never a half-written file, whatever happens mid-write

    def usable(self, kbs: list[str], visitor: str) -> list[str]:
        """The KBs of `kbs` this visitor may use (the owners file is read once)."""
        owners = self._read()
        return [kb for kb in kbs if owners.get(kb) is None or (bool(visitor) and owners[kb] == visitor)]

    def may_use(self, kb: str, visitor: str) -> bool:
        return bool(self.usable([kb], visitor))


def banner(limits: PublicLimits, space_id: str = "") -> str:
    """The public page's first line: that it is the public demo, its caps, and how to run it
    without them (Markdown; every value is the operator's, none a visitor's)."""
    ok = bool(re.fullmatch(r"[\w.-]+/[\w.-]+", space_id or ""))  # Spaces sets SPACE_ID=owner/name
    local = (f"[run it locally without caps](https://huggingface.co/spaces/{space_id}/blob/main/README.md)"
             if ok else "run it locally without caps: `bash scripts/setup.sh && .venv/bin/python app.py`")
    return (f"**Public demo** · at most {limits.max_llm_methods} LLM methods a request · "
            f"{limits.requests_per_minute} requests a minute · uploads up to {limits.max_upload_mb} MB and "
            f"{limits.max_passages:,} passages · benchmarks up to {limits.max_bench_questions} questions · "
            f"each visitor sees only their own runs — {local}")
