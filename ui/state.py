"""What the app holds between requests: open KBs (store + embedder), their questions, the trace store."""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from retrieval.core.errors import HopTraceError, InputError
from retrieval.core.paths import kb_dir
from retrieval.core.records import Question
from retrieval.encoders.embedder import LazyEmbedder
from retrieval.kb import db as kb_db
from retrieval.kb.readiness import read_status
from retrieval.llm import LLM, LLMSettings, get_llm
from retrieval.llm.settings import PUBLIC_PROMPT_CACHE_MB
from retrieval.methods import Context, targets, units_of, uses_llm
from retrieval.methods.layers import building, missing
from retrieval.store import open_store
from traces.storage.retention import Pruner, Retention
from traces.storage.store import TraceStore, default_path

from .llm_order import Estimates, ModelTurns
from .llm_queue import LLMQueue
from .public import KBOwners, LimitError, LiveRuns, PublicLimits, RateLimiter, client_address


@dataclass
class OpenKB:
    name: str
    ctx: Context
    questions: list[Question]
    gold_by_text: dict[str, list[str]] = field(default_factory=dict)
    version: tuple = ()   # the file's (inode, size, mtime) when opened: a build's new snapshot reopens it


class AppState:
    def __init__(self, trace_path: Path | None = None, llm_settings: LLMSettings | None = None,
                 profile: str | None = None, public: PublicLimits | None = None, otlp: str | None = None):
        self.public = public or PublicLimits.from_env()
        self.rate = RateLimiter(self.public.requests_per_minute)
        self.address_rate = RateLimiter(self.public.requests_per_minute_per_address, who="address")
        self.live_llm = LiveRuns(self.public.llm_requests_per_address)
        self.llm_queue = LLMQueue.from_env()
        # A model that serves one call at a time takes one request's LLM methods shortest first,
        # and requests in arrival order (ui/llm_order.py); ui/app.py gives the estimates the
        # shipped experiment once it is installed.
        self.estimates = Estimates()
        self.model_turns = ModelTurns()
        self.kb_owners = KBOwners(kb_dir() / "owners.json")
        # visitor → when their last Index-tab build ended (ui/app.py `_wire_readiness`); one float a visitor who built
        self.builds_ended_at: dict[str, float] = {}
        # HOPTRACE_TRACES: another trace file (the load test keeps its runs out of the user's)
        self.traces = TraceStore(trace_path or default_path(), recover=True)
        self.traces_kept = True  # False: the trace file does not survive a restart (ui/storage.py)
        self.traces_persistent = False  # True: on the Space's persistent storage
        # Public mode bounds storage: old and excess traces are pruned in the background.
        self.retention = Retention.from_env() if self.public.enabled else None
        self.pruner = Pruner(self.traces, self.retention).start() if self.retention else None
        if self.traces.recovered:
            print(f"hoptrace: warning: {self.traces.recovered}", file=sys.stderr, flush=True)
        # Live span export, only where the operator set it (the flag or the environment): nothing
        # a visitor sends reaches this choice.
        self.export = live_export(otlp)
        if self.export is not None:
            self.traces.on_saved.append(self.export.submit)
        self._kbs: dict[str, OpenKB] = {}
        self._checked: dict[str, tuple] = {}   # KB file name → ((size, mtime), problem or None)
        self._lock = threading.Lock()
        # One LLM for every KB and user; its own semaphore queues concurrent requests.
        self.llm_settings = llm_settings or LLMSettings.parse()
        if self.public.enabled and not os.environ.get("HOPTRACE_PROMPT_CACHE_MB", "").strip():
            self.llm_settings = replace(self.llm_settings, prompt_cache_mb=PUBLIC_PROMPT_CACHE_MB)
        self.llm: LLM | None = get_llm(self.llm_settings)
        self.llm_status = "not started" if self.llm else "none configured"
        self.profile = profile  # None: by backend (methods/profiles.py)

    def start_llm(self) -> None:
        """Start the LLM backend in the background, so the app is ready before the model is."""
        if self.llm is None:
            return

        def start() -> None:
            self.llm_status = "starting…"
            try:
                self.llm.start()
                self.llm_status = "ready"
            except HopTraceError as e:
                # Methods that need it will fail with this message in their column; others run.
                self.llm_status = f"unavailable: {e}"

        threading.Thread(target=start, daemon=True, name="llm-start").start()

    def llm_line(self) -> str:
        if self.llm is None:
            return "none configured (GEAR runs as NaiveGE; GRIEVER and the baselines need none)"
        health = self.llm.health()
        if health.startswith("exited"):  # the model server died after it was ready: say so
            return f"{self.llm.describe()} (server {health})"
        return f"{self.llm.describe()} ({self.llm_status}{' · ' + health if health else ''})"

    def owner_filter(self, visitor: str) -> str | None:
        """Whose runs a visitor may list: their own in public mode, everyone's locally."""
        return (visitor or "") if self.public.enabled else None

    def owner_id(self, visitor: str) -> str:
        """Who owns what a visitor makes (question sets, judgments): the visitor in public mode, the one
        local user ("") otherwise."""
        return (visitor or "") if self.public.enabled else ""

    def throttle(self, visitor: str, request=None) -> None:
        """In public mode: a visitor's requests a minute, and their address's (a rotated id does
        not reset the second)."""
        if self.public.enabled:
            self.address_rate.check(self.address(request))
            self.rate.check(visitor or "anonymous")

    def address(self, request) -> str:
        return client_address(request, self.public.trust_proxy)

    @contextmanager
    def llm_slot(self, request, methods: list[str], answer: bool = False, extra_s: float = 0.0):
        """Held while a request's LLM work runs. In public mode one address may not queue up the
        one model server with several requests at once, and a request is refused at once when the
        work admitted ahead of it would make it wait past the queue's bound (ui/llm_queue.py).
        `extra_s`: LLM work that is no method's (judging a pool), at its estimated seconds."""
        if not (self.public.enabled and (answer or extra_s or any(uses_llm(m) for m in methods))):
            yield
            return
        with self.live_llm.hold(self.address(request)), self.llm_queue.admit(methods, answer, extra_s=extra_s):
            yield

    def kb_names(self, visitor: str | None = None) -> list[str]:
        """The KBs a visitor may pick: in public mode, not those other visitors built."""
        names = sorted(p.stem for p in kb_dir().glob("*.sqlite"))
        if self.public.enabled:
            names = self.kb_owners.usable(names, visitor or "")
        # KBs served by Elasticsearch, listed by spec (docs/deployment.md, "Elasticsearch")
        remote = [s.strip() for s in os.environ.get("HOPTRACE_ES_KBS", "").split(",") if s.strip()]
        return (["demo"] if "demo" in names else []) + [n for n in names if n != "demo"] + remote

    def kb_problems(self) -> dict[str, str]:
        """KBs in the KB folder that are not served, with the reason: a damaged or foreign file, or
        a build that did not finish (a `.building` file with no finished KB beside it). Each file
        is checked once per change (size and mtime), not on every listing."""
        out = {}
        folder = kb_dir()
        for path in sorted(folder.glob("*.sqlite")):
            st = path.stat()
            key = (st.st_size, st.st_mtime_ns)
            cached = self._checked.get(path.name)
            if cached is None or cached[0] != key:
                cached = self._checked[path.name] = (key, kb_db.problem(path))
            if cached[1]:
                out[path.stem] = cached[1]
        for unfinished in folder.glob("*.sqlite.building"):
            name = unfinished.name[: -len(".sqlite.building")]
            if not (folder / f"{name}.sqlite").exists():
                status = read_status(folder / f"{name}.sqlite")
                out[name] = ("its build has just started; it is served as soon as its passages are stored"
                             if status is not None and status.alive else
                             "its build did not finish; run the same `hoptrace build` again to resume it "
                             "(nothing is served from an unfinished build)")
        return out

    def not_ready(self, name: str, methods) -> dict[str, str]:
        """The methods of `methods` KB `name` cannot serve yet, each with its state ("ready in ~40 s",
        "building", "not built (needs events)"); empty for a KB that serves them all."""
        if name.startswith("es+"):
            return {}
        try:
            store = self.kb(name).ctx.store
        except HopTraceError:
            return {}
        status = building(store)
        out = {}
        for m in methods:
            try:
                lacks = missing(store, units_of(m))
            except KeyError:  # a plugin: it reads the passages and their vectors
                lacks = missing(store, ("passages", "passages vectors"))
            if lacks:
                out[m] = status.state(m) if status is not None else f"not built (needs {', '.join(lacks)})"
        return out

    def readiness(self, name: str) -> str | None:
        """Each method's state on KB `name` while a build is making it, or when a build served only
        some methods ("griever: ready in ~40 s"); None for a KB that serves every method."""
        names = list(targets())
        waiting = self.not_ready(name, names)
        if not waiting:
            return None
        return " · ".join(f"{m}: {waiting.get(m, 'ready')}" for m in names)

    def building_kbs(self) -> list[str]:
        """KBs a running build is making (the page refreshes their states)."""
        out = []
        for path in kb_dir().glob("*.sqlite.status.json"):
            status = read_status(path.with_name(path.name[: -len(".status.json")]))
            if status is not None and status.alive:
                out.append(status.kb)
        return sorted(out)

    def kb_choices(self, visitor: str | None = None) -> list[tuple[str, str]]:
        """The Knowledge base list: every usable KB, then those not served, each marked with why
        (in public mode only those the visitor could use if they were sound)."""
        bad = self.kb_problems()
        listed = self.kb_names(visitor)
        extra = sorted(n for n in bad if n not in listed
                       and (not self.public.enabled or self.kb_owners.may_use(n, visitor or "")))
        growing = set(self.building_kbs())
        return ([(f"{n} — building" if n in growing else n, n) for n in listed if n not in bad]
                + [(f"{n} — not served: {bad[n]}", n) for n in listed + extra if n in bad])

    def check_kb(self, name: str, visitor: str) -> None:
        """In public mode, another visitor's KB answers as if it did not exist."""
        if self.public.enabled and not self.kb_owners.may_use(name, visitor):
            raise LimitError(f"no KB named {name!r} on this demo; pick one from the Knowledge base list")

    def kb(self, name: str, warm: bool = True) -> OpenKB:
        """KB `name`, opened once per version of its file. `warm` loads its vectors and the query
        encoder now; without it they load on first use (the page opens before the model has)."""
        if not name.startswith("es+"):
            why = self.kb_problems().get(name)
            if why:
                raise InputError(f"KB {name!r} is not served: {why}")
        version = () if name.startswith("es+") else _file_version(kb_dir() / f"{name}.sqlite")
        with self._lock:
            held = self._kbs.get(name)
            if held is None or held.version != version:
                # A building KB is replaced by each snapshot that serves more methods: the next
                # request opens the new one; runs already going keep the one they started on.
                store = open_store(name if name.startswith("es+") else str(kb_dir() / f"{name}.sqlite"))
                ctx = Context(store, LazyEmbedder(store.info().embed_model), self.llm, profile=self.profile)
                if warm:
                    ctx.warm()
                questions = store.questions()
                self._kbs[name] = OpenKB(name, ctx, questions,
                                         {q.text: q.gold_passage_ids for q in questions}, version)
            return self._kbs[name]

    def forget(self, name: str) -> None:
        """After a rebuild, reopen the KB on next use."""
        with self._lock:
            self._kbs.pop(name, None)


def _file_version(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return ()
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def live_export(flag: str | None):
    """The live span exporter for `hoptrace serve --otlp URL` or HOPTRACE_OTLP_ENDPOINT, or None.
    Imported only then: OpenTelemetry adds to the start of an app that does not export."""
    url = flag or os.environ.get("HOPTRACE_OTLP_ENDPOINT", "").strip()
    if not url:
        return None
    from traces.otel.export import LiveExport

    return LiveExport(url)
