"""Visitors in headless Chromium: public mode's separation and caps, hostile uploads and toasts that
stay text, and the operator's own retrievers beside the papers'."""
from __future__ import annotations

import json
import re
import time

import pytest

from appbench.page import free_port
from browser.flows import (
    Q,
    add_question_set,
    browser_contexts,
    run_methods,
    send_question_set,
    set_methods,
    set_question,
    snap,
    tab,
    upload,
)

pytestmark = pytest.mark.browser


def test_public_mode_keeps_visitors_apart_and_names_its_caps(chromium, visitors_url, shots):

    with browser_contexts(chromium) as browser:
        ann, bob = (browser.new_context(viewport={"width": 1400, "height": 1000}).new_page() for _ in range(2))
        for pg in (ann, bob):
            pg.goto(visitors_url, wait_until="domcontentloaded")
            pg.wait_for_selector("#run", timeout=60_000)
            assert "traces in" not in pg.locator("#backends").inner_text()  # no server path on the page
        set_question(ann, Q)
        run_methods(ann, {"bm25"})
        assert "/tmp/" not in ann.content()
        sid = ann.locator("#session-link code").inner_text().strip()
        assert len(sid) == 32

        def traces_tab(pg) -> str:
            tab(pg, "Traces")
            pg.click("#refresh-runs")
            pg.wait_for_timeout(1500)
            return pg.locator("#runs-table").inner_text()

        assert "Journal of Psychotherapy Integration" in traces_tab(ann)
        assert "Journal of Psychotherapy Integration" not in traces_tab(bob)
        snap(bob, shots, "public-second-visitor-traces.png", full_page=True)
        # the link opens Ann's comparison for Bob, read-only, without adding it to his list
        bob.goto(f"{visitors_url}?session={sid}", wait_until="domcontentloaded")
        bob.wait_for_selector("#columns .ht-col[data-method='bm25'] table.ht-ranking", timeout=60_000)
        assert "Journal of Psychotherapy Integration" not in traces_tab(bob)
        # a cap refuses with its limit named
        tab(bob, "Ask")
        set_methods(bob, {"gear", "sag", "grasp"})
        bob.click("#run")
        bob.wait_for_function("document.querySelector('#columns').innerText.includes('LLM methods a request')",
                              timeout=30_000)
        assert "at most 2 LLM methods a request" in bob.locator("#columns").inner_text()


def _close_toasts(page) -> None:
    """Closes every toast shown, as a visitor would, and waits until none is left."""
    for close in page.locator(".toast-close").all():
        if close.is_visible():
            close.click()
    page.wait_for_function("document.querySelectorAll('.toast-body').length === 0", timeout=10_000)


def _clear_file(page, box: str) -> None:
    """Clears a file box that holds a file (its ✕), so the next file can be chosen."""
    if page.locator(f"{box} input[type=file]").count():
        return
    page.locator(box).get_by_role("button", name=re.compile("clear|remove", re.I)).first.click()
    page.wait_for_selector(f"{box} input[type=file]", state="attached", timeout=10_000)


def test_hostile_uploads_get_errors_naming_the_visitors_file_never_a_server_path(chromium, visitors_url, tmp_path,
                                                                                   shots):
    from test_hostile_uploads import GOOD as HOSTILE_GOOD
    from test_hostile_uploads import HOSTILE, _write

    from retrieval.core.paths import kb_dir

    with browser_contexts(chromium) as browser:
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(visitors_url + "lab", wait_until="domcontentloaded")   # Index is on the lab: one load
        page.wait_for_selector("#tabs", timeout=60_000)
        tab(page, "Index")
        # One form for every file, as a visitor retrying would use it: each file replaces the last,
        # and the toasts of the one before are closed first, so the toast read is this file's.
        for i, name in enumerate(sorted(HOSTILE)):
            content, problem = HOSTILE[name]
            path = _write(tmp_path, name, content)
            _close_toasts(page)
            _clear_file(page, "#up-corpus")
            upload(page, "#up-corpus", path)
            page.fill("#up-name textarea, #up-name input", f"hostile_{i}")
            page.click("#up-build")
            toast = page.locator(".toast-body").last
            toast.wait_for(timeout=120_000)
            text = toast.inner_text()
            assert problem in text and name in text, text
            assert str(tmp_path) not in text and "/tmp" not in text and "gradio" not in text, text
            if name == "types.json":
                page.wait_for_timeout(600)  # the toast slides in
                snap(page, shots, "hostile-upload-error.png")  # the viewport: the toast is fixed
            assert not list(kb_dir().glob(f"hostile_{i}.*"))
        # a questions file whose gold passages are not in the corpus
        corpus = _write(tmp_path, "corpus.json", HOSTILE_GOOD)
        questions = _write(tmp_path, "questions.json", [{"id": "q1", "question": "Where?", "answer": "Zambia",
                                                         "paragraphs": [
            {"idx": 0, "title": "Nowhere", "paragraph_text": "A passage nobody uploaded.", "is_supporting": True}]}])
        _close_toasts(page)
        _clear_file(page, "#up-corpus")
        upload(page, "#up-corpus", corpus)
        upload(page, "#up-questions", questions)
        page.fill("#up-name textarea, #up-name input", "hostile_questions")
        page.click("#up-build")
        toast = page.locator(".toast-body").last
        toast.wait_for(timeout=120_000)
        text = toast.inner_text()
        assert "gold passage(s) not in the corpus" in text and "questions.json" in text and "/tmp" not in text, text
        assert not list(kb_dir().glob("hostile_questions.*"))
        # nothing was stored, and the app keeps serving
        tab(page, "Ask")
        set_question(page, Q)
        run_methods(page, {"bm25"})
        assert page.locator("#columns .ht-col[data-method='bm25'] table.ht-ranking").count() == 1


class _Listener:
    """A loopback HTTP server that counts what reaches it: an address a hostile file names."""

    def __init__(self):
        import http.server
        import threading

        hits = self.hits = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _hit(self):
                hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            do_GET = do_POST = _hit

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_every_toast_quoting_a_visitors_file_is_text(chromium, visitors_url, tmp_path, shots, capfd):
    """Payloads in a CSV header, a duplicate id, a set name and a file name: each toast shows them
    as text, names the visitor's file and no server path; no request leaves for the address the
    payloads name, and the page asks for no image it did not ship. Each refusal logs one line."""
    import re


    listener = _Listener()
    at = listener.url
    header = f"<img src={at}/h1>"
    form = f"<form action={at}/f><input name=q value=1><button>go</button></form>"
    link = f"<a href={at}/a>click me</a>"
    files = {
        "header.csv": f"{header},answer\nWhere?,Here\n",
        "dup.json": json.dumps([{"id": form, "question": "Where?"}, {"id": form, "question": "When?"}]),
        "ok.txt": "Which river?\n",
        # Gradio strips < > from uploaded names; an entity is what a name can still smuggle.
        "a&lt;img src=x&gt;.txt": "",
    }
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    cases = [  # (file, set name, what the toast must show)
        ("header.csv", "my_questions", f"the CSV has no 'question' column (its header is {header}, answer)"),
        ("dup.json", "my_questions", f"item 1: duplicate id {form!r}"),
        ("ok.txt", link, f"question set name {link!r} should be"),
        ("a&lt;img src=x&gt;.txt", "my_questions", "a&lt;img src=x&gt;.txt: no questions in the file"),
    ]
    capfd.readouterr()
    try:
        with browser_contexts(chromium) as browser:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            requests: list[tuple[str, str]] = []
            page.on("request", lambda r: requests.append((r.url, r.resource_type)))
            page.goto(visitors_url + "lab", wait_until="domcontentloaded")   # Index is on the lab: one load
            page.wait_for_selector("#tabs", timeout=60_000)
            tab(page, "Index")
            # A success first: a refusal after it must not leave its message under an error badge.
            add_question_set(page, tmp_path / "ok.txt", "first set")
            shipped = {u for u, kind in requests if kind == "image"}
            for name, set_name, shown in cases:
                page.locator("#qs-file button[aria-label='Clear']").click()  # the last upload goes
                send_question_set(page, tmp_path / name, set_name)
                toast = page.locator(".toast-body").filter(has_text=shown[:40]).last
                toast.wait_for(timeout=60_000)
                text = toast.inner_text()
                assert shown in text, text
                if set_name == "my_questions":     # a refusal of the file names the visitor's own file
                    assert f"{name}: " in text, text
                assert "/tmp" not in text and "gradio" not in text and str(tmp_path) not in text, text
                assert toast.locator("img, form, a, input, button:not(.toast-close)").count() == 0, \
                    toast.inner_html()
                assert "Added to" not in page.locator("#qs-log").inner_text()
                if name == "dup.json":
                    page.wait_for_timeout(700)  # the toast slides in
                    snap(page, shots, "toast-as-text.png")
            page.wait_for_timeout(1500)         # anything a toast could still fetch
    finally:
        listener.close()
    assert listener.hits == [], listener.hits
    assert not [u for u, _ in requests if not u.startswith((visitors_url, "data:", "blob:", "about:"))]
    assert not [u for u, kind in requests if kind == "image" and u not in shipped]
    log = [line for line in capfd.readouterr().err.splitlines() if line.startswith("hoptrace: refused")]
    if shots:
        (shots / "toast-as-text.log").write_text("\n".join(log) + "\n")
    assert len(log) == len(cases), log
    for (name, _, _), line in zip(cases, log):
        assert re.match(r"hoptrace: refused InputError in add_questions \(file '[^']+'\): ", line), line
        assert f"'{name}'" in line and "/tmp" not in line


def test_your_own_retrievers_stand_beside_the_papers_and_visitors_cannot_add_any(chromium, visitors_url, shots):
    from gradio_client import Client

    from ui.picker import GROUPS

    with browser_contexts(chromium) as browser:
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(visitors_url, wait_until="domcontentloaded")
        page.wait_for_selector("#run", timeout=60_000)
        yours = page.locator("#methods-yours")
        text = yours.inner_text()
        assert "Yours" in text and "mine: file mine.py" in text and "sleepy: file sleepy.py" in text
        assert "not loaded: broken.py: ModuleNotFoundError: No module named 'no_such_library_here'" in text
        assert "/tmp" not in text                                     # public mode: no server path
        set_question(page, Q)
        set_methods(page, {"mine", "griever", "sleepy"})
        page.click("#run")
        for m in ("mine", "griever"):
            page.wait_for_selector(f"#columns .ht-col[data-method='{m}'] table.ht-ranking", timeout=60_000)
        mine = page.locator("#columns .ht-col[data-method='mine']")
        names = mine.locator(".ht-stage summary .ht-meta").all_inner_texts()
        assert [n.split()[0] for n in names] == ["call", "map", "ranking"], names
        page.wait_for_function("document.querySelector(\"#columns .ht-col[data-method='sleepy']\").innerText"
                               ".includes('cut off after 2 s')", timeout=30_000)
        snap(page, shots, "yours-beside-griever.png", full_page=True)
    # A visitor cannot name code or an address: a method name that is a URL is refused, and
    # nothing is sent to it.
    listener = _Listener()
    try:
        pickers = [[]] * sum(1 + bool(g.ablations) for g in GROUPS) + [[f"{listener.url}/search"]]
        client = Client(visitors_url, verbose=False)
        with pytest.raises(Exception) as err:
            client.predict("demo", Q, 5, 2, False, "visitor-x", *pickers, api_name="/ask")
        # Gradio refuses a value the picker does not offer; only the operator's methods are offered.
        assert "is not in the list of choices: ['mine', 'sleepy']" in str(err.value)
        time.sleep(1)
    finally:
        listener.close()
    assert listener.hits == []


