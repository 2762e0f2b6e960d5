"""Public mode against a script: limits by client address that a rotated visitor id cannot dodge,
with X-Forwarded-For trusted only when the operator says a proxy is in front; bounded memory."""
from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

from ui.public import LimitError, LiveRuns, PublicLimits, RateLimiter, client_address

Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


def _request(peer: str, forwarded: str | None = None):
    return SimpleNamespace(client=SimpleNamespace(host=peer),
                           headers={"x-forwarded-for": forwarded} if forwarded else {})


def test_the_forwarded_header_counts_only_behind_a_trusted_proxy():
    req = _request("10.0.0.7", "203.0.113.9, 10.0.0.7")
    assert client_address(req, trust_proxy=True) == "203.0.113.9"      # the proxy's first hop: the client
    assert client_address(req, trust_proxy=False) == "10.0.0.7"        # anyone can send the header
    assert client_address(_request("10.0.0.7"), trust_proxy=True) == "10.0.0.7"
    assert client_address(None, trust_proxy=True) == "unknown"


def test_the_limiter_memory_stays_bounded_under_rotating_keys():
    rate = RateLimiter(per_minute=2, max_keys=100)
    for i in range(5000):
        rate.check(f"rotated-{i}", now=float(i) / 100)
    assert len(rate) == 100
    rate.check("a", now=100.0)
    rate.check("a", now=100.5)
    with pytest.raises(LimitError, match="2 requests a minute from one visitor"):
        rate.check("a", now=101.0)


def test_live_llm_requests_per_address_are_held_and_released():
    live = LiveRuns(per_address=1)
    with live.hold("203.0.113.9"):
        with pytest.raises(LimitError, match="at most 1 request"):
            with live.hold("203.0.113.9"):
                pass
        with live.hold("198.51.100.4"):     # another address is not held up
            assert len(live) == 2
    assert len(live) == 0
    with live.hold("203.0.113.9"):
        pass


@pytest.fixture(scope="module")
def public_server(small_kb, tmp_path_factory):
    from appbench.page import serve_free
    from retrieval.core.paths import kb_dir
    from retrieval.llm.settings import LLMSettings
    from ui.app import build
    from ui.state import AppState

    shutil.copyfile(small_kb, kb_dir() / "limitskb.sqlite")
    servers = {}
    for trust in (False, True):
        state = AppState(trace_path=tmp_path_factory.mktemp("limits") / "traces.sqlite",
                         llm_settings=LLMSettings.parse("none"),
                         public=PublicLimits(enabled=True, show_paths=False, trust_proxy=trust))
        app = build(state)
        url = serve_free(app, state)
        servers[trust] = url
    yield servers
    import gradio as gr
    gr.close_all()
    (kb_dir() / "limitskb.sqlite").unlink(missing_ok=True)


def _asks(url: str, n: int, forwarded) -> tuple[int, list[str]]:
    """n asks, each with a fresh visitor id and the given X-Forwarded-For (a callable of i)."""
    import secrets

    from gradio_client import Client

    from ui.picker import GROUPS

    # one picker a paper group, one for its ablations, and the "Yours" group (ui/tabs/ask.py)
    pickers = [["bm25"]] + [[]] * sum(1 + bool(g.ablations) for g in GROUPS)
    answered, refused = 0, []
    # One client, its header set before each ask (it is read as each request is sent): a client a
    # request fetched the app's config and API description 40 times (~0.4 CPU s a time, both sides).
    client = Client(url, verbose=False, headers={"X-Forwarded-For": forwarded(0)})
    for i in range(n):
        client.headers["X-Forwarded-For"] = forwarded(i)
        out = client.predict("limitskb", Q, 5, 2, False, secrets.token_hex(16), *pickers, api_name="/ask")
        html = out[0]
        if "this public demo" in html:      # a refusal (render.error_html) names its limit
            refused.append(html)
        else:
            answered += 1
    return answered, refused


def test_rotating_the_visitor_id_does_not_dodge_the_address_limit(public_server):
    # No proxy declared: a script's forged header is ignored, the socket's address counts.
    answered, refused = _asks(public_server[False], 14, lambda i: f"198.51.100.{i}")
    assert answered == 12 and len(refused) == 2
    assert "12 requests a minute from one address" in refused[0]


def test_behind_a_trusted_proxy_each_client_address_has_its_own_allowance(public_server):
    answered, refused = _asks(public_server[True], 13, lambda i: f"203.0.113.{i}, 10.0.0.1")
    assert answered == 13 and not refused
    answered, refused = _asks(public_server[True], 13, lambda i: "192.0.2.1, 10.0.0.1")
    assert answered == 12 and "from one address" in refused[0]
