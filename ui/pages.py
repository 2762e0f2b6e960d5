"""The app's two pages, and the links between them.

`/` holds what a visitor comes for, Ask and Traces; `/lab` holds the experiment tools, Experiments,
Judge and Index. They are two pages (Gradio's `Blocks.route`) rather than five tabs of one because
Gradio processes every component of a page's config in the browser, twice, before it shows any of
them, in time that grows faster than the count: with all five tabs (205 components) the first
view's columns and map came 1.92-2.05 s after the page was asked for, with the Ask page alone (87)
1.62-1.83 s (alternated loads, 2 cores; docs/measurements/app-latency.md).

A link to an experiment (`?experiment=ID`, as experiments print it) keeps working at `/`: it is
sent on to the lab page. A question of an experiment opens on the Ask page (`pair_link`).
"""
from __future__ import annotations

from urllib.parse import parse_qs, urlencode

from .static_cache import app_path

LAB = "lab"
LAB_NAME = "Experiments · Judge · Index"
HOME_NAME = "Ask · Traces"
# The query of a link to one question of an experiment, opened on the Ask page.
PAIR_KEYS = ("experiment", "question", "metric", "a", "b")


def pair_link(exp_id: str, metric: str, a: str, b: str, question_id: str) -> str:
    """The Ask page's link to a question's two stored runs of an experiment. Relative to the
    page's base (`./`), so it is right behind any proxy's prefix."""
    return "./?" + urlencode(dict(zip(PAIR_KEYS, (exp_id, question_id, metric, a, b))))


def kb_link(name: str) -> str:
    """The Ask page opened on a KB (the Index tab's link to a KB it built)."""
    return "./?" + urlencode({"kb": name})


def pair_asked(query: dict) -> tuple[str, str, str, str, str] | None:
    """(experiment, question, metric, a, b) when a request's query asks for one question's pair."""
    got = tuple((query.get(k) or "").strip() for k in PAIR_KEYS)
    return got if got[0] and got[1] else None


class ExperimentLinks:
    """`/?experiment=ID` (no question) is the lab page's: answered with a redirect there, before
    Gradio builds the Ask page for nothing. Everything else goes through untouched."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD") and app_path(scope) == "/":
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            if query.get("experiment") and not query.get("question"):
                where = f"{scope.get('root_path', '').rstrip('/')}/{LAB}?{scope['query_string'].decode('latin-1')}"
                await send({"type": "http.response.start", "status": 307,
                            "headers": [(b"location", where.encode("latin-1")), (b"content-length", b"0")]})
                await send({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send)
