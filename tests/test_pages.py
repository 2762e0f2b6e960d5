"""The app's two pages (ui/pages.py): the links between them, the redirect of an experiment's link
at `/` on a real Starlette app, the lab page in the app's own config, and a first view whose stage
lines come before their bodies."""
from urllib.parse import parse_qs, urlparse

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from retrieval.trace import html as trace_html
from retrieval.trace.model import Stage
from ui import pages

EVIL = "<img src=x onerror=alert(1)>&a=b#x"


def _client(root_path: str = ""):
    routes = [Route("/", lambda r: PlainTextResponse("home " + r.url.query)),
              Route("/lab", lambda r: PlainTextResponse("lab " + r.url.query))]
    app = Starlette(routes=routes, middleware=[Middleware(pages.ExperimentLinks)])
    return TestClient(app, root_path=root_path, follow_redirects=False)


def test_an_experiments_link_at_the_root_goes_to_the_lab_page_and_nothing_else_does():
    client = _client()
    r = client.get("/?experiment=abc123&metric=ndcg%405")
    assert r.status_code == 307 and r.headers["location"] == "/lab?experiment=abc123&metric=ndcg%405"
    assert client.get(r.headers["location"]).text == "lab experiment=abc123&metric=ndcg%405"
    # a question of an experiment is the Ask page's; other links and other methods pass through
    assert client.get("/?experiment=abc&question=q1").text == "home experiment=abc&question=q1"
    assert client.get("/?session=abc").text == "home session=abc"
    assert client.get("/lab?experiment=abc").text == "lab experiment=abc"
    assert client.post("/?experiment=abc").status_code == 405


def test_behind_a_proxys_prefix_the_redirect_keeps_it():
    r = _client("/space").get("/space/?experiment=abc")
    assert r.status_code == 307 and r.headers["location"] == "/space/lab?experiment=abc"


def test_the_links_between_the_pages_carry_any_name_as_data():
    link = pages.pair_link("e1", "recall@5", "bm25", EVIL, "q 1")
    assert link.startswith("./?") and "<" not in link and " " not in link
    query = {k: v[0] for k, v in parse_qs(urlparse(link).query).items()}
    assert pages.pair_asked(query) == ("e1", "q 1", "recall@5", "bm25", EVIL)
    assert pages.pair_asked({"experiment": "e1"}) is None          # no question: the lab page's link
    assert pages.pair_asked({"experiment": " ", "question": "q"}) is None
    kb = pages.kb_link(EVIL)
    assert "<" not in kb and parse_qs(urlparse(kb).query) == {"kb": [EVIL]}


def test_a_stage_line_without_its_body_is_the_same_line():
    st = Stage(name="shortlist_1", title="Shortlist (§4.2.3)", payload={"triples": [{"s": EVIL}]})
    full = trace_html.stage_html(st, set(), method="griever")
    line = trace_html.stage_html(st, set(), method="griever", body=False)
    assert full.split("</summary>")[0] == line.split("</summary>")[0]
    assert trace_html.BODY_TO_COME in line and "onerror" not in line
    assert "&lt;img" in full and "<img" not in full


def test_the_ask_page_holds_ask_and_traces_and_the_lab_page_the_experiment_tools(small_kb, tmp_path):
    import shutil

    from retrieval.core.paths import kb_dir
    from retrieval.llm.settings import LLMSettings
    from ui.app import build
    from ui.state import AppState

    shutil.copyfile(small_kb, kb_dir() / "pageskb.sqlite")
    try:
        app = build(AppState(trace_path=tmp_path / "traces.sqlite", llm_settings=LLMSettings.parse("none")))
        cfg = app.get_config_file()
    finally:
        (kb_dir() / "pageskb.sqlite").unlink(missing_ok=True)
    by_id = {c["id"]: c for c in cfg["components"]}
    tabs = {page: [by_id[i]["props"]["label"] for i in p["components"] if by_id[i]["type"] == "tabitem"]
            for page, p in cfg["page"].items()}
    assert tabs == {"": ["Ask", "Traces"], pages.LAB: ["Experiments", "Judge", "Index"]}
    assert [tuple(p[:2]) for p in cfg["pages"]] == [("", "Home"), (pages.LAB, pages.LAB_NAME)]
    # each page has its own header: the KB picker, the backends line, the visitor's id
    for page in cfg["page"].values():
        ids = [by_id[i]["props"].get("elem_id") for i in page["components"]]
        assert ids.count("kb") == 1 and ids.count("backends") == 1 and ids.count("pages") == 1
    # the Ask page's config is what Gradio processes before the first view: the lab's is not in it
    assert len(cfg["page"][""]["components"]) < 100
