"""`bench --concurrency N` against a real loopback HTTP endpoint (bench/delay_endpoint.py): the
runs overlap at the endpoint, and every ranking equals the one-at-a-time benchmark's. (How much
faster it is, is measured with `hoptrace bench-concurrency`, not asserted here.)"""
from __future__ import annotations

import json
import urllib.request

import pytest

from retrieval.bench.concurrency import measure
from retrieval.bench.delay_endpoint import DelayEndpoint, instance
from retrieval.bench.runner import run_bench
from retrieval.core.errors import ConfigError


def test_the_endpoint_answers_the_first_instance_of_the_schema():
    schema = {"type": "object", "properties": {
        "action": {"enum": ["DONE", "QUERY_AGAIN"]}, "ids": {"type": "array", "items": {"type": "integer"}},
        "name": {"type": "string"}, "why": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
    assert instance(schema, ["Victoria", "Falls"]) == {"action": "DONE", "ids": [1], "name": "Victoria Falls",
                                                       "why": "Victoria Falls"}
    with DelayEndpoint(0.0) as url:
        req = urllib.request.Request(url + "/chat/completions", json.dumps({
            "model": "m", "messages": [{"role": "user", "content": "Where is Victoria Falls?"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}}).encode(),
            headers={"Content-Type": "application/json"})
        body = json.loads(urllib.request.urlopen(req, timeout=10).read())
    assert json.loads(body["choices"][0]["message"]["content"])["action"] == "DONE"
    assert body["usage"]["completion_tokens"] > 0


def test_concurrent_benchmark_overlaps_requests_and_keeps_every_ranking(ctx):
    questions = ctx.store.questions()
    levels = measure(ctx, "small", questions, ["sag"], [1, 4], delay_s=0.05, ks=(5,))
    one, four = levels
    assert one.max_in_flight == 1 and four.max_in_flight >= 2
    assert four.identical and one.runs == four.runs == len(questions)
    assert one.requests == four.requests > 0


def test_concurrency_is_refused_with_a_pause_or_below_one(ctx):
    with pytest.raises(ConfigError, match="at least 1"):
        run_bench(ctx, "small", ctx.store.questions()[:1], ["bm25"], ks=(5,), progress=False, concurrency=0)
    with pytest.raises(ConfigError, match="pause-ms"):
        run_bench(ctx, "small", ctx.store.questions()[:1], ["bm25"], ks=(5,), progress=False, concurrency=2,
                  pause_ms=10)
