"""A retriever behind an HTTP endpoint: `--method-url NAME=URL`, or HOPTRACE_METHOD_URLS.

Request: POST `{"question": ..., "k": ...}` as JSON. Reply: a JSON list of hits, or an object
`{"hits": [...], "stages": [{"name", "ms", "payload"}]}`; a hit is as in hits.py. The stages the
service reports become stages of the trace (`remote.<name>`), with the time it says they took.

A timeout, an HTTP error or a reply that is not that JSON fails the run with its reason; the run is
stored like any failed run, and nothing else fails. The URL is the operator's: it is never put in
a trace, a payload or a message, so a public page cannot show it.
"""
from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import ClassVar

from ...core.envvars import positive_number
from ...core.errors import ConfigError, InputError
from ...trace.model import RankedPassage, Stage, Tracer
from ..base import Method, final_stage
from .function import stage_hits
from .kbview import KBView

DEFAULT_TIMEOUT_S = 30.0
MAX_REPLY_BYTES = 20_000_000
MAX_STAGES = 50


def default_timeout_s() -> float:
    """HOPTRACE_METHOD_TIMEOUT_S, read when a method is made (a bad value is named then), else 30 s."""
    return positive_number("HOPTRACE_METHOD_TIMEOUT_S") or DEFAULT_TIMEOUT_S


@dataclass
class EndpointConfig:
    timeout_s: float = field(default_factory=default_timeout_s)   # a run past it fails, named


def parse_url_spec(spec: str) -> tuple[str, str]:
    """'NAME=URL' → (name, url), or a ConfigError naming what is wrong."""
    name, sep, url = (spec or "").partition("=")
    name, url = name.strip(), url.strip()
    if not sep or not name or not url:
        raise ConfigError(f"--method-url wants NAME=URL, got {spec!r}")
    if not name.replace("_", "").replace("-", "").isalnum():
        raise ConfigError(f"--method-url: method name {name!r}: letters, digits, - and _ only")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"--method-url {name}: the URL should start with http:// or https://")
    return name, url


def _post(url: str, body: dict, timeout: float) -> tuple[int, bytes]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json",
                                                                  "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310  (the operator's URL)
            return r.status, r.read(MAX_REPLY_BYTES + 1)
    except urllib.error.HTTPError as e:
        raise InputError(f"the endpoint answered HTTP {e.code} ({e.reason})") from None
    except (socket.timeout, TimeoutError):
        raise InputError(f"the endpoint did not answer within {timeout:g} s") from None
    except urllib.error.URLError as e:
        if isinstance(e.reason, (socket.timeout, TimeoutError)):
            raise InputError(f"the endpoint did not answer within {timeout:g} s") from None
        raise InputError(f"the endpoint could not be reached ({type(e.reason).__name__})") from None


def _reply(raw: bytes) -> tuple[list, list]:
    if len(raw) > MAX_REPLY_BYTES:
        raise InputError(f"the endpoint's reply is over {MAX_REPLY_BYTES // 1_000_000} MB")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"the endpoint's reply is not JSON ({e.msg if hasattr(e, 'msg') else e}): "
                         f"{raw[:80].decode('utf-8', 'replace')!r}") from None
    if isinstance(data, list):
        return data, []
    if isinstance(data, dict) and isinstance(data.get("hits"), list):
        stages = data.get("stages") or []
        if not isinstance(stages, list):
            raise InputError("the endpoint's 'stages' should be a list of {name, ms, payload}")
        return data["hits"], stages
    raise InputError("the endpoint's reply should be a JSON list of hits or an object with a 'hits' list")


def stage_remote(tracer: Tracer, stages: list) -> None:
    """The service's own stages, as it reported them (its clock, not ours)."""
    for i, s in enumerate(stages[:MAX_STAGES]):
        if not isinstance(s, dict) or not s.get("name"):
            raise InputError(f"the endpoint's stage {i + 1} should be an object with a 'name'")
        try:
            ms = float(s.get("ms") or 0.0)
        except (TypeError, ValueError):
            raise InputError(f"the endpoint's stage {s['name']!r}: 'ms' should be a number") from None
        payload = s.get("payload") if isinstance(s.get("payload"), dict) else {"value": s.get("payload")}
        tracer.add(Stage(name=f"remote.{str(s['name'])[:60]}", title=f"Endpoint › {str(s['name'])[:60]}",
                         started_at=time.time(), latency_ms=round(ms, 3), payload={**payload, "reported_ms": ms}))


class EndpointMethod(Method):
    """Subclassed per endpoint by the loader, with `name` and `url` set."""
    Config = EndpointConfig
    k_dependent: ClassVar[bool] = True
    url: ClassVar[str] = ""
    origin: ClassVar[str] = "HTTP endpoint"

    def retrieve(self, question: str, k: int, tracer: Tracer) -> list[RankedPassage]:
        kb = KBView(self.ctx)
        with tracer.stage("request", f"Endpoint {self.name}: POST the question") as st:
            t0 = time.perf_counter()
            status, raw = _post(type(self).url, {"question": question, "k": k}, self.config.timeout_s)
            hits, stages = _reply(raw)
            st.payload = {"endpoint": self.name, "http_status": status, "reply_bytes": len(raw),
                          "hits": len(hits), "stages_reported": len(stages),
                          "round_trip_ms": round((time.perf_counter() - t0) * 1000, 3)}
        stage_remote(tracer, stages)
        ranked = stage_hits(tracer, hits, kb, k, "the endpoint")
        return final_stage(tracer, ranked, question, f"{self.name}'s order, mapped to the KB")
