"""The stage trace: what every method emits, and what the UI, CLI, bench and trace store read.

A run is a sequence of Stage records and a ranked passage list. Schema (JSON, see
docs/trace-schema.md): Stage{name, title, started_at, latency_ms, tokens_in, tokens_out,
status, message, payload, subgraph{nodes, edges}, llm_calls}; RunResult{method, question,
config, ranked[{passage_id, score, title}], stages[], latency_ms, tokens_in, tokens_out,
status, error}.

Methods write stages through a Tracer:

    with tracer.stage("bm25", "BM25 candidates") as st:
        hits = store.bm25(...)
        st.payload["candidates"] = [...]

The tracer times the block, catches an exception into the stage (status "error") and
calls `on_stage` as each stage finishes, which is how the app streams.
"""
from __future__ import annotations

import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Callable, ClassVar, Iterator, Optional

import orjson

from ..core import cpu
from ..core.errors import HopTraceError

NODE_TYPES = ("question", "query", "passage", "entity", "triple", "event", "proposition", "subquestion")


_SCALARS = (str, int, float, bool, type(None))
_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(x: Any) -> tuple[str, ...]:
    names = _FIELDS.get(type(x))
    if names is None:
        names = _FIELDS[type(x)] = tuple(f.name for f in fields(x))
    return names


def _json_default(x: Any) -> Any:
    if is_dataclass(x) and not isinstance(x, type):
        return {n: getattr(x, n) for n in _field_names(x)}
    return str(x)


# orjson writes a dataclass's fields and any other instance attribute not starting with "_": the
# records keep their live, unstored state under "_" names (Stage._progress, Subgraph's id index),
# and tests/test_traces.py checks a used Stage serialises to its fields alone.
_ORJSON_OPTS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def dumps(x: Any) -> bytes:
    """JSON bytes of a record tree (dataclasses by their fields, numpy scalars and non-string keys
    included; any other object as its str). NaN and infinities become null, as JSON has none."""
    return orjson.dumps(x, default=_json_default, option=_ORJSON_OPTS)


def plain(x: Any) -> Any:
    """A JSON-ready copy of a record tree. Not dataclasses.asdict: it deep-copies every payload
    value, and storing a run spent most of its time there (12 % of the app's CPU under load)."""
    if isinstance(x, _SCALARS):
        return x
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if is_dataclass(x) and not isinstance(x, type):
        return {n: plain(getattr(x, n)) for n in _field_names(x)}
    return x


@dataclass
class Node:
    id: str
    type: str            # one of NODE_TYPES
    label: str
    score: Optional[float] = None
    attrs: dict = field(default_factory=dict)  # e.g. {"gold": true, "frontier": true}


@dataclass
class Edge:
    source: str
    target: str
    type: str            # e.g. "subject", "object", "mentions", "from_passage", "same_as", "depends_on"
    label: str = ""
    weight: Optional[float] = None


@dataclass
class Subgraph:
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)

    def node(self, id: str, type: str, label: str, score: Optional[float] = None, **attrs: Any) -> str:
        """Adds the node unless one with that id exists. The ids are kept in a set beside the list
        (not a field, so never stored): a linear scan made building GRIEVER's subgraphs
        quadratic, ~9 % of a benchmark's time."""
        ids = self.__dict__.get("_ids")
        if ids is None or len(ids) != len(self.nodes):  # first call, or nodes added directly
            ids = self.__dict__["_ids"] = {n.id for n in self.nodes}
        if id not in ids:
            self.nodes.append(Node(id, type, label, score, attrs))
            ids.add(id)
        return id

    def edge(self, source: str, target: str, type: str, label: str = "", weight: Optional[float] = None) -> None:
        self.edges.append(Edge(source, target, type, label, weight))


@dataclass
class LLMCall:
    model: str
    prompt: str
    completion: str
    tokens_in: int
    tokens_out: int
    latency_ms: float
    cached: bool = False
    error: Optional[str] = None
    purpose: str = ""                 # which step asked (e.g. "read", "reason", "read (repair)")
    started_at: float = 0.0           # unix seconds (0 in runs stored before it was recorded)
    params: dict = field(default_factory=dict)  # max_tokens, temperature, seed, schema: as sent


@dataclass
class Stage:
    name: str
    title: str
    started_at: float = 0.0           # unix seconds
    latency_ms: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    status: str = "ok"                # ok | empty | error | skipped
    message: str = ""                 # why a stage is empty, errored or skipped
    payload: dict = field(default_factory=dict)
    subgraph: Optional[Subgraph] = None
    llm_calls: list[LLMCall] = field(default_factory=list)
    # Of latency_ms, the time its LLM calls waited for a slot at a model that serves one call at a
    # time (another request's calls ahead): latency_ms - wait_ms is the stage's own work.
    wait_ms: float = 0.0

    def graph(self) -> Subgraph:
        if self.subgraph is None:
            self.subgraph = Subgraph()
        return self.subgraph

    def empty(self, why: str) -> None:
        self.status, self.message = "empty", why

    # Live progress of a running stage (not part of the stored record): what its LLM call is
    # doing, e.g. {"llm": "generating", "tokens_out": 37, "elapsed_s": 2.1}. The tracer sets
    # `_listener` for the block's duration; `report` passes the update on. Both are kept under
    # names starting with "_", which the JSON encoder (orjson) never writes: only fields are stored.
    _progress: ClassVar[dict] = {}
    _listener: ClassVar[Optional[Callable[["Stage"], None]]] = None

    @property
    def progress(self) -> dict:
        return self._progress

    def report(self, **info: Any) -> None:
        self._progress = {**self._progress, **info}
        if self._listener is not None:
            self._listener(self)

    def add_llm_call(self, call: LLMCall) -> None:
        self.llm_calls.append(call)
        self.tokens_in += call.tokens_in
        self.tokens_out += call.tokens_out


@dataclass
class RankedPassage:
    passage_id: str
    score: float
    title: str = ""


@dataclass
class RunResult:
    method: str
    question: str
    config: dict = field(default_factory=dict)
    ranked: list[RankedPassage] = field(default_factory=list)
    stages: list[Stage] = field(default_factory=list)
    latency_ms: float = 0.0
    status: str = "ok"
    error: Optional[str] = None
    answer: Optional[str] = None
    gold: list[str] = field(default_factory=list)  # when the caller knows them (notebook API)
    cost: Optional[dict] = None        # retrieval/llm/prices.py Cost: model, usd (None = price unknown), source, cpu_s
    repetition: Optional[int] = None   # `bench --repeat N`: which of the N runs of this question this is (1-based)
    # Where its latencies were measured: every run made in this process is stamped with this CPU
    # ("AMD EPYC · 2 cores · avx2"); a run read back keeps what it had ("" = not recorded).
    machine: str = field(default_factory=cpu.describe)
    load: str = ""                     # a recorder's verdict on the machine: "idle", "under load"; "" = not checked

    @property
    def tokens_in(self) -> int:
        return sum(s.tokens_in for s in self.stages)

    @property
    def tokens_out(self) -> int:
        return sum(s.tokens_out for s in self.stages)

    def ranked_ids(self) -> list[str]:
        return [r.passage_id for r in self.ranked]

    def to_dict(self) -> dict:
        d = plain(self)
        d["tokens_in"], d["tokens_out"] = self.tokens_in, self.tokens_out
        return d

    def to_json(self) -> str:
        return self.to_json_bytes().decode()

    def to_json_bytes(self) -> bytes:
        """`json.dumps(self.to_dict(), default=str)`, without building the copy first, through
        orjson: storing every run of a benchmark as JSON cost ~3 ms a GRIEVER run with the stdlib
        encoder (it calls back into Python for each dataclass), 0.4 ms with orjson."""
        d = {n: getattr(self, n) for n in _field_names(self)}
        d["tokens_in"], d["tokens_out"] = self.tokens_in, self.tokens_out
        return dumps(d)

    @classmethod
    def from_dict(cls, d: dict) -> "RunResult":
        stages = []
        for s in d.get("stages", []):
            # Only the fields a Stage has: a file written by another version may hold more.
            s = {k: v for k, v in s.items() if k in _STAGE_FIELDS}
            g = s.pop("subgraph", None)
            calls = [LLMCall(**{k: v for k, v in c.items() if k in _CALL_FIELDS}) for c in s.pop("llm_calls", [])]
            st = Stage(**s, llm_calls=calls)
            if g:
                st.subgraph = Subgraph([Node(**n) for n in g["nodes"]], [Edge(**e) for e in g["edges"]])
            stages.append(st)
        fields = {k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k not in ("stages", "ranked")}
        fields.setdefault("machine", "")   # made elsewhere or before runs named their machine: unknown, not ours
        return cls(**fields, ranked=[RankedPassage(**r) for r in d.get("ranked", [])], stages=stages)


_STAGE_FIELDS = frozenset(Stage.__dataclass_fields__)
_CALL_FIELDS = frozenset(LLMCall.__dataclass_fields__)

# The stages open on each thread, innermost last: where charge_reused books a cost.
_open = threading.local()


def charge_reused(ms: float, what: str) -> None:
    """Count work this run reused from another run of the same request (the app's shared query
    encoding) at what it cost, in the stage open on this thread: latencies then say what the
    method takes alone. The stage's payload names it under "reused"; nothing happens outside a stage."""
    stack = getattr(_open, "stages", None)
    if stack and ms > 0:
        stack[-1]._reused.append((ms, what))


def reused_ms(stage: "Stage") -> float:
    return float((stage.payload.get("reused") or {}).get("ms", 0.0))


def count_reused(run: "RunResult") -> "RunResult":
    """The run's latency plus what its stages reused (charge_reused), so it says what the method
    takes alone. The app calls it on every run of a request, where work is shared; a run that
    reused nothing is unchanged."""
    reused = sum(reused_ms(st) for st in run.stages)
    if reused:
        run.latency_ms = round(run.latency_ms + reused, 3)
    return run


class StageFailed(Exception):
    """Raised out of a `tracer.stage` block after the error is recorded, to stop the run."""


class Tracer:
    def __init__(self, on_stage: Optional[Callable[[Stage], None]] = None,
                 on_progress: Optional[Callable[[Stage], None]] = None):
        self.stages: list[Stage] = []
        self.on_stage = on_stage
        self.on_progress = on_progress  # a stage as it starts, and on each report() while it runs
        self.answer: Optional[str] = None  # a method that generates its own answer (GRASP) puts it here

    @contextmanager
    def stage(self, name: str, title: str) -> Iterator[Stage]:
        st = Stage(name=name, title=title, started_at=time.time())
        st._reused = []
        stack = getattr(_open, "stages", None)
        if stack is None:
            stack = _open.stages = []
        stack.append(st)
        t0 = time.perf_counter()
        if self.on_progress:
            st._listener = self.on_progress
            st.report(running=True)
        try:
            yield st
        except StageFailed:
            raise
        except HopTraceError as e:
            st.status, st.message = "error", str(e)
            raise StageFailed(str(e)) from e
        except Exception as e:  # a bug in a stage must not take the app down; show it in the trace
            st.status = "error"
            st.message = f"{type(e).__name__}: {e}"
            st.payload["traceback"] = traceback.format_exc(limit=6)
            raise StageFailed(st.message) from e
        finally:
            st.latency_ms = round((time.perf_counter() - t0) * 1000, 3)
            stack.remove(st)
            if st._reused:
                ms = sum(m for m, _ in st._reused)
                st.payload["reused"] = {"ms": round(ms, 3), "what": sorted({w for _, w in st._reused}),
                                        "wall_ms": st.latency_ms}
                st.latency_ms = round(st.latency_ms + ms, 3)
            del st._reused
            st._listener = None
            self.stages.append(st)
            if self.on_stage:
                self.on_stage(st)

    def add(self, st: Stage) -> None:
        """A stage measured elsewhere (a remote retriever's own report), kept as it came."""
        self.stages.append(st)
        if self.on_stage:
            self.on_stage(st)


class NestedTracer(Tracer):
    """A method run inside another method's pipeline (GEAR over GRIEVER, GRIEVER Table 4): its
    stages go to the parent's trace, named `<prefix>.<stage>`, streamed as they finish."""

    def __init__(self, parent: Tracer, prefix: str, label: str):
        super().__init__(None, None)
        self.parent, self.prefix, self.label = parent, prefix, label

    @contextmanager
    def stage(self, name: str, title: str) -> Iterator[Stage]:
        with self.parent.stage(f"{self.prefix}.{name}", f"{self.label} › {title}") as st:
            yield st
