"""Where runs' spans go (traces/otel/spans.py makes them): an OTLP/HTTP collector such as Arize Phoenix,
an OTLP JSON file for offline use, or live from the app as each run is stored.

The live path never costs a request anything: `LiveExport.submit` only puts the run on a bounded
queue; a worker thread builds the spans and hands them to the SDK's BatchSpanProcessor, whose own
thread sends them. A collector that is down or slow fills the queues, which then drop; the run is
stored either way, and `status()` says that export is failing for the page header.
"""
from __future__ import annotations

import json
import logging
import queue
import sqlite3
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from retrieval.core.errors import InputError
from retrieval.trace.model import RunResult

from .spans import RunContext, Texts, run_spans

ENDPOINT_ENV = "HOPTRACE_OTLP_ENDPOINT"
_log = logging.getLogger("hoptrace")
# The SDK's exporter logs every failed batch; Watched says it once instead.
logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter").setLevel(logging.CRITICAL)
TRACES_PATH = "/v1/traces"  # OTLP/HTTP's path for spans


def endpoint_url(url: str) -> str:
    """A collector's OTLP/HTTP traces URL from what a user typed: `http://host:port` gets
    /v1/traces; anything that is not an http(s) URL with a host is refused by name."""
    u = urllib.parse.urlsplit((url or "").strip())
    if u.scheme not in ("http", "https") or not u.hostname:
        raise InputError(f"OTLP endpoint {url!r} is not an http(s) URL with a host (e.g. http://127.0.0.1:6006)")
    path = u.path.rstrip("/")
    return urllib.parse.urlunsplit((u.scheme, u.netloc, path if path else TRACES_PATH, u.query, ""))


def check_reachable(url: str, timeout_s: float = 5.0) -> None:
    """Send an empty OTLP request, so an unreachable or wrong URL is named before any run is read."""
    req = urllib.request.Request(url, data=b"", method="POST", headers={"Content-Type": "application/x-protobuf"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s):
            return
    except urllib.error.HTTPError as e:
        raise InputError(f"the OTLP endpoint {url} answered HTTP {e.code} ({e.reason}): is it a collector's "
                         f"OTLP/HTTP traces URL?") from e
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise InputError(f"the OTLP collector at {url} cannot be reached ({reason})") from e


# --- OTLP JSON ------------------------------------------------------------------------------------
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def otlp_json(spans: Sequence[ReadableSpan]) -> dict:
    """An ExportTraceServiceRequest as OTLP/JSON: protobuf's JSON mapping, with the ids in hex as
    the OTLP specification requires (protobuf writes bytes as base64)."""
    import base64

    doc = MessageToDict(encode_spans(spans))
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                for key in _ID_FIELDS:
                    if sp.get(key):
                        sp[key] = base64.b64decode(sp[key]).hex()
    return doc


class JsonlFileExporter(SpanExporter):
    """One OTLP/JSON request a line (what the OpenTelemetry Collector's file exporter writes)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._f = open(self.path, "w", encoding="utf-8")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._f.write(json.dumps(otlp_json(spans), ensure_ascii=False) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._f.close()


class Watched(SpanExporter):
    """An exporter that remembers how its exports went, for the header and the CLI."""

    def __init__(self, inner: SpanExporter, where: str):
        self.inner, self.where = inner, where
        self.sent = self.failed = 0
        self.failing_since: Optional[float] = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter must not raise into the SDK's worker
            result = SpanExportResult.FAILURE
        if result == SpanExportResult.SUCCESS:
            if self.failing_since is not None:
                _log.warning("span export to %s works again", self.where)
            self.sent += len(spans)
            self.failing_since = None
        else:
            if self.failing_since is None:  # said once, not once a batch
                _log.warning("span export to %s is failing; runs are still stored", self.where)
            self.failed += len(spans)
            self.failing_since = self.failing_since or time.time()
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def otlp_exporter(url: str, timeout_s: float = 10.0) -> OTLPSpanExporter:
    return OTLPSpanExporter(endpoint=url, timeout=timeout_s)


# --- passage texts --------------------------------------------------------------------------------
class PassageTexts:
    """Passage ids → texts from each KB's file, read-only, for the documents' content. A KB that is
    gone or damaged gives no texts (the documents keep their titles); never an error."""

    def __init__(self, resolve: Callable[[str], Path]):
        self._resolve = resolve
        self._cons: dict[str, Optional[sqlite3.Connection]] = {}

    def of(self, kb: str) -> Texts:
        def lookup(ids: list[str]) -> dict[str, str]:
            con = self._connect(kb)
            if con is None or not ids:
                return {}
            try:
                rows = con.execute("SELECT id, text FROM passages WHERE id IN (SELECT value FROM json_each(?))",
                                   [json.dumps(list(ids))]).fetchall()
            except sqlite3.Error:
                return {}
            return dict(rows)
        return lookup

    def _connect(self, kb: str) -> Optional[sqlite3.Connection]:
        if kb not in self._cons:
            con = None
            try:
                path = self._resolve(kb)
                if path.exists():
                    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
            except (sqlite3.Error, OSError, InputError):
                con = None
            self._cons[kb] = con
        return self._cons[kb]

    def close(self) -> None:
        for con in self._cons.values():
            if con is not None:
                con.close()
        self._cons.clear()


def kb_texts() -> PassageTexts:
    from retrieval.core.paths import resolve_kb

    return PassageTexts(lambda name: Path(resolve_kb(name)))


# --- stored runs ----------------------------------------------------------------------------------
# A bulk export resends a refused or timed-out batch with backoff, and sends the next batch only once
# the receiver has taken this one: the receiver's pace is the export's. (Handed to a BatchSpanProcessor
# instead, 2,200 stored runs overran its queue on a two-core Phoenix and 386-711 spans were dropped.)
DEADLINE_S = 1800.0
BACKOFF_S = (0.5, 30.0)   # first wait after a failed batch, the longest wait


@dataclass
class ExportReport:
    runs: int = 0                  # runs delivered
    spans: int = 0                 # spans delivered
    seconds: float = 0.0
    failed_spans: int = 0          # spans of the batch still refused when the deadline passed
    where: str = ""
    retries: int = 0               # batches sent again after a refusal or a time-out
    undelivered: list = field(default_factory=list)   # run ids not delivered by the deadline, in order

    def line(self) -> str:
        """The command's last line."""
        text = (f"exported {self.runs} runs as {self.spans} spans to {self.where} in {self.seconds} s "
                f"({self.spans / max(self.seconds, 1e-9):.0f} spans/s); "
                + (f"{len(self.undelivered)} runs NOT delivered by the deadline" if self.undelivered else "0 lost"))
        return text + (f"; {self.retries} batches sent again after a refusal or time-out" if self.retries else "")


def _send(exporter: SpanExporter, spans: list, deadline: float, rep: ExportReport,
          sleep: Callable[[float], None] = time.sleep) -> bool:
    """One batch, sent until the receiver takes it or the deadline passes (exponential backoff)."""
    wait = BACKOFF_S[0]
    while True:
        try:
            ok = exporter.export(spans) == SpanExportResult.SUCCESS
        except Exception:  # an exporter that raises (a dropped connection) is a failed try, not an end
            ok = False
        if ok:
            return True
        if time.monotonic() + wait > deadline:
            return False
        rep.retries += 1
        sleep(wait)
        wait = min(wait * 2, BACKOFF_S[1])


def export_stored(store, run_ids: Iterable[str], exporter: SpanExporter, where: str,
                  texts: Optional[PassageTexts] = None, batch_runs: int = 20,
                  deadline_s: float = DEADLINE_S) -> ExportReport:
    """Send stored runs, a batch of runs a request, each batch resent until the receiver takes it
    (nothing is dropped while the deadline holds). Once `deadline_s` has passed, the batch that
    failed and every run after it are listed in `undelivered`, unsent, so that a second export of
    exactly those (`hoptrace export --resume`) completes the first. Runs are read one at a time, so
    memory stays that of one batch whatever the number of runs."""
    texts = texts or kb_texts()
    watched = Watched(exporter, where)
    rep = ExportReport(where=where)
    t0 = time.perf_counter()
    deadline = time.monotonic() + deadline_s
    ids = list(run_ids)
    pending: list[ReadableSpan] = []
    batch: list[str] = []

    def flush(rest: int) -> bool:
        nonlocal pending, batch
        if _send(watched, pending, deadline, rep):
            rep.runs += len(batch)
            rep.spans += len(pending)
            pending, batch = [], []
            return True
        rep.undelivered = batch + ids[rest:]
        rep.failed_spans = len(pending)
        return False

    try:
        for i, rid in enumerate(ids):
            run, info = store.load_run(rid)
            pending.extend(run_spans(run, RunContext(rid, info["session_id"], info["kb"], tuple(info["gold"])),
                                     texts.of(info["kb"])))
            batch.append(rid)
            if len(batch) == batch_runs and not flush(i + 1):
                break
        else:
            if pending:
                flush(len(ids))
    finally:
        watched.shutdown()
        texts.close()
    rep.seconds = round(time.perf_counter() - t0, 2)
    return rep


def write_undelivered(path: Path, where: str, run_ids: Sequence[str]) -> Path:
    """The runs a deadline left unsent, one id a line after a comment naming the endpoint:
    what `hoptrace export --resume FILE` reads."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# hoptrace export: runs not delivered to {where}\n" + "".join(f"{r}\n" for r in run_ids))
    return path


def read_undelivered(path: Path) -> list[str]:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise InputError(f"cannot read the resume file {path}: {e.strerror}") from e
    ids = [x.strip() for x in lines if x.strip() and not x.startswith("#")]
    if not ids:
        raise InputError(f"the resume file {path} lists no run ids (one a line, as a failed export wrote it)")
    return ids


# --- live, from the app ---------------------------------------------------------------------------
class LiveExport:
    """Each stored run's spans to a collector, in the background (module docstring)."""

    def __init__(self, url: str, texts: Optional[PassageTexts] = None, max_runs_waiting: int = 256,
                 exporter: Optional[SpanExporter] = None):
        self.url = endpoint_url(url)
        self.watched = Watched(exporter or otlp_exporter(self.url, timeout_s=5.0), self.url)
        self.processor = BatchSpanProcessor(self.watched, max_queue_size=8192, schedule_delay_millis=1000,
                                            max_export_batch_size=512, export_timeout_millis=10000)
        self.texts = texts or kb_texts()
        self.dropped_runs = 0
        self._queue: queue.Queue = queue.Queue(maxsize=max_runs_waiting)
        self._worker = threading.Thread(target=self._work, name="otlp-live-export", daemon=True)
        self._worker.start()

    def submit(self, run_id: str, session_id: str, kb: str, run: RunResult, gold: list[str]) -> None:
        """What TraceStore calls after storing a run: a put on a queue, never a wait."""
        try:
            self._queue.put_nowait((run, RunContext(run_id, session_id, kb, tuple(gold))))
        except queue.Full:
            self.dropped_runs += 1

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            run, ctx = item
            try:
                for span in run_spans(run, ctx, self.texts.of(ctx.kb)):
                    self.processor.on_end(span)
            except Exception as e:  # a run the mapping cannot read must not stop the worker
                logging.getLogger("hoptrace").warning("span export skipped run %s: %s", ctx.run_id, e)
            finally:
                self._queue.task_done()

    def status(self) -> Optional[str]:
        """One line for the page header while export is failing; None while it works."""
        if self.watched.failing_since is None and not self.dropped_runs:
            return None
        since = time.strftime("%H:%M:%S", time.localtime(self.watched.failing_since or time.time()))
        return (f"span export to {self.url} is failing since {since} ({self.watched.failed} spans not sent"
                + (f", {self.dropped_runs} runs dropped" if self.dropped_runs else "") + "); runs are still stored")

    def flush(self, timeout_s: float = 30.0) -> bool:
        deadline = time.time() + timeout_s
        while self._queue.unfinished_tasks and time.time() < deadline:
            time.sleep(0.05)
        return self.processor.force_flush(int(max(0.0, deadline - time.time()) * 1000))

    def shutdown(self) -> None:
        self._queue.put(None)
        self.processor.shutdown()
        self.texts.close()
