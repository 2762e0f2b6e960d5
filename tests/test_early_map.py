"""The first view's map frame started by the page's HTML (ui/early_map.py) and the front-end files
served from memory (ui/static_cache.py), on a real Starlette app."""
import gzip

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from retrieval.trace import hopmap_view
from retrieval.trace.model import RankedPassage, RunResult, Stage, Subgraph
from ui import early_map, render, static_cache

EVIL = "<img src=x onerror=alert(1)></script><script>alert(2)</script>"
PAGE = "<!doctype html><html><head><meta charset='utf-8'><base href='./' /><link rel='stylesheet' href='x.css'>" \
       "</head><body><div id='app'></div></body></html>"


def _app(*middleware):
    routes = [Route("/", lambda r: HTMLResponse(PAGE)), Route("/other", lambda r: HTMLResponse(PAGE)),
              Route("/json", lambda r: JSONResponse({"head": "<base href='./'>"})),
              Route("/{rest:path}", lambda r: PlainTextResponse("from the app", status_code=404))]
    return TestClient(Starlette(routes=routes, middleware=list(middleware)))


def test_the_script_goes_into_the_pages_html_after_its_base_and_nowhere_else():
    script = early_map.head(True)
    client = _app(Middleware(early_map.HeadMiddleware, scripts={"/": script, "/other": "<script>1</script>",
                                                                "/json": ""}))
    page = client.get("/")
    assert page.status_code == 200
    # after <base> (relative URLs resolve as Gradio's do), before any stylesheet (a script waits for those)
    assert page.text == PAGE.replace("<base href='./' />", "<base href='./' />" + script)
    assert int(page.headers["content-length"]) == len(page.content)
    # each route its own script, put in once
    assert client.get("/other").text == PAGE.replace("<base href='./' />", "<base href='./' /><script>1</script>")
    assert client.get("/elsewhere").text == "from the app"        # a route without a script
    assert client.get("/json").json() == {"head": "<base href='./'>"}   # not HTML
    assert client.post("/").status_code == 405                  # not a GET: untouched, refused by the app


def test_the_script_starts_the_frame_only_when_a_first_map_is_served():
    on, off = early_map.head(True), early_map.head(False)
    for script in (on, off):
        assert "window.hoptraceFirstView" in script              # load events wait on it either way
        assert f"'{early_map.ROUTE}'" in script and "moveBefore" in script
    assert "!true) return;" in on and "!false) return;" in off
    assert "%" not in on.replace("100%;", "")                   # every placeholder was filled


def _runs():
    g = Subgraph()
    g.edge(g.node("q", "question", EVIL), g.node("p1", "passage", EVIL, 1.0), "retrieved")
    stage = Stage(name="ranking", title="Final ranking", subgraph=g)
    return {"griever": RunResult(method="griever", question=EVIL, stages=[stage],
                                 ranked=[RankedPassage("p1", 1.0, EVIL)])}


def test_the_first_views_slot_and_document_keep_a_kbs_strings_as_text():
    slot, doc = render.first_map(_runs(), {"p1"}, "griever · ranking")
    assert "ht-hopmap-slot" in slot and 'data-methods="[&quot;griever&quot;]"' in slot
    assert "<img" not in slot and "<img" not in doc
    assert doc.startswith("<!doctype html>") and "hopmap-data" in doc
    assert f"src='{render.VIS_ROUTE}/vis-network.min.js'" in doc   # from this server, never a CDN
    labels = {n["f"] for n in hopmap_view.unpacked(doc)["maps"][0]["nodes"]}
    assert EVIL in labels                                            # whole, as data the viewer sets as text
    # no stage at all: no slot and no document, the plain viewer's message
    empty, none = render.first_map({"griever": RunResult(method="griever", question="q")}, set())
    assert "ht-hopmap-slot" not in empty and none == ""


def test_front_end_files_come_from_memory_compressed_once(tmp_path):
    body = ("export const x = 1;\n" * 200).encode()
    (tmp_path / "Index-abc.js").write_bytes(body)
    (tmp_path / "tiny.css").write_text("a{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "in.js").write_text("no")
    cache = "public, max-age=31536000, immutable"
    client = _app(Middleware(static_cache.StaticCache, mounts=(("/assets/", tmp_path, cache, None),
                                                               ("/vis/", tmp_path, "public", frozenset({"tiny.css"})))))
    plain = client.get("/assets/Index-abc.js", headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and plain.content == body
    assert plain.headers["content-type"] == "application/javascript; charset=utf-8"
    assert plain.headers["cache-control"] == cache and "content-encoding" not in plain.headers
    packed = client.get("/assets/Index-abc.js", headers={"Accept-Encoding": "gzip, deflate"})
    assert packed.headers["content-encoding"] == "gzip" and packed.content == body   # the client inflated it
    raw = client.get("/assets/Index-abc.js", headers={"Accept-Encoding": "gzip"})
    assert int(raw.headers["content-length"]) < len(body) / 5
    assert client.get("/assets/tiny.css").headers.get("content-encoding") is None   # too small to pay
    assert client.head("/assets/Index-abc.js").content == b""
    # anything else is the app's to answer: no such file, a subfolder, a way out, a name not listed
    for path in ("/assets/missing.js", "/assets/sub/in.js", "/assets/../secret", "/assets/.hidden",
                 "/assets/a%00b.js", "/assets/" + "x" * 300 + ".js", "/vis/Index-abc.js"):
        got = client.get(path)
        assert (got.status_code, got.text) == (404, "from the app"), path
    assert client.get("/vis/tiny.css").text == "a{}"
    assert gzip.decompress(static_cache.Entry(body, "application/javascript").gz) == body
    # names asked for in vain are not kept: they must not grow the server's memory
    cache = static_cache.StaticCache(None, mounts=(("/assets/", tmp_path, "public", None),))
    assert all(cache._lookup(f"/assets/missing-{i}.js") is None for i in range(50))
    assert cache._lookup("/assets/Index-abc.js") is not None and list(cache.entries) == ["/assets/Index-abc.js"]


def test_behind_a_root_path_the_apps_own_paths_are_matched():
    assert static_cache.app_path({"path": "/proxy/7860/", "root_path": "/proxy/7860"}) == "/"
    assert static_cache.app_path({"path": "/proxy/7860", "root_path": "/proxy/7860"}) == "/"
    assert static_cache.app_path({"path": "/proxy/7860/assets/a.js", "root_path": "/proxy/7860"}) \
        == "/assets/a.js"
    assert static_cache.app_path({"path": "/assets/a.js", "root_path": ""}) == "/assets/a.js"
    assert static_cache.app_path({"path": "/other", "root_path": "/proxy"}) == "/other"


def test_an_idle_queue_looks_for_work_fifty_times_a_second_not_a_thousand():
    # Gradio's own loop, run as the server runs it, with its sleeps counted: a Gradio that stops
    # reading the attribute ui/idle_frames.py sets shows here as a thousand looks a second again.
    import asyncio
    import threading
    from unittest import mock

    import gradio as gr

    from ui import idle_frames  # importing it calms every queue made after (ui/app.py imports it)

    with gr.Blocks() as app:
        gr.Markdown("idle")
    app.queue(default_concurrency_limit=2, max_size=32)   # as ui/app.py's serve does
    real_sleep, slept = asyncio.sleep, []

    async def counted(delay, *args):
        slept.append(delay)
        await real_sleep(delay)

    async def watch(seconds: float) -> None:
        with mock.patch("gradio.queueing.asyncio.sleep", counted):
            task = asyncio.ensure_future(app._queue.start_processing())
            await real_sleep(seconds)
            task.cancel()

    # In a thread of its own: a browser test before it in the same worker leaves Playwright's
    # event loop running in this one, where asyncio.run refuses to start (seen once in the suite).
    loop_thread = threading.Thread(target=asyncio.run, args=(watch(0.5),))
    loop_thread.start()
    loop_thread.join(30)
    assert slept and set(slept) == {idle_frames.QUEUE_POLL_S}
    assert len(slept) <= 0.5 / idle_frames.QUEUE_POLL_S + 2
