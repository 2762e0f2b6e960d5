"""What the browser tests do on the app's pages: open a tab, pick methods, run, find the hop map."""
from __future__ import annotations

import re
from contextlib import contextmanager

EVIL = "<img src=x onerror=alert(1)>"
Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"

# The shipped experiment the lab opens on, in the browser fixture (conftest.py).
LAB_METHODS = ["bm25", "composed", "griever"]


class Contexts:
    """The session's browser as one test sees it: what it opens is closed when the test ends."""

    def __init__(self, browser):
        self.browser, self.opened = browser, []

    def new_context(self, **kw):
        self.opened.append(self.browser.new_context(**kw))
        return self.opened[-1]

    def new_page(self, **kw):
        return self.new_context(**kw).new_page()


@contextmanager
def browser_contexts(browser):
    ctx = Contexts(browser)
    try:
        yield ctx
    finally:
        for c in ctx.opened:
            c.close()


# Ask and Traces are tabs of the page at /, Experiments, Judge and Index of the page at /lab (ui/pages.py).
LAB_TABS = {"Experiments", "Judge", "Index"}


def tab(page, name: str, query: str = "") -> None:
    """Opens a tab, going to its page first when it is on the other one."""
    on_lab = page.evaluate("location.pathname").rstrip("/").endswith("/lab")
    if (name in LAB_TABS) != on_lab or query:
        page.goto(page.evaluate("location.origin") + ("/lab" if name in LAB_TABS else "/") + query,
                  wait_until="domcontentloaded")
        page.wait_for_selector("#tabs", timeout=60_000)
    page.get_by_role("tab", name=name).click()
    if name == "Experiments":   # the forms that make experiments are folded under the view
        for fold, inside in (("#bench-fold", "#bench-run"), ("#repro-fold", "#repro-run")):
            if not page.locator(inside).is_visible():
                page.locator(f"{fold} .label-wrap").first.click()
                page.wait_for_selector(inside, state="visible", timeout=10_000)


def set_question(page, text: str) -> None:
    page.fill("#question textarea", text)


def set_methods(page, wanted: set[str]) -> None:
    for label in page.locator("#methods label").all():
        name = label.inner_text().strip()
        box = label.locator("input")
        if box.is_checked() != (name in wanted):
            label.click()


def first_run_id(page) -> str:
    ids = re.findall(r"\b[0-9a-f]{16}\b", page.locator("#runs-table").inner_text())
    assert ids, "the traces table lists no run"
    return ids[0]


def run_methods(page, methods: set[str]) -> None:
    set_methods(page, methods)
    page.click("#run")
    for m in methods:
        page.wait_for_selector(f"#columns .ht-col[data-method='{m}'] table.ht-ranking", timeout=120_000)


def map_frame(page):
    """The Ask tab's hop map frame, once it has drawn. The frame is sandboxed (another origin): its
    window is read through playwright's frame, never from the page."""
    page.wait_for_selector("#graph iframe.ht-hopmap", timeout=60_000)
    frame = page.locator("#graph iframe").element_handle().content_frame()
    frame.wait_for_function("window.hopmapDrawn === true", timeout=30_000)
    return frame


def drawn_pixels(page) -> int:
    """Pixels the graph's canvas painted (vis-network runs in a sandboxed srcdoc frame)."""
    frame = page.locator("#graph iframe").element_handle().content_frame()
    return frame.evaluate("""() => { const c = document.querySelector('canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }""")


def wait_drawn(page, tries: int = 20, every_ms: int = 300) -> int:
    """`drawn_pixels` read until the map has painted over 1000 pixels or `tries` reads have passed;
    the last count. A read while the frame is being replaced counts as nothing drawn."""
    drawn = 0
    for _ in range(tries):
        page.wait_for_timeout(every_ms)
        try:
            drawn = drawn_pixels(page)
        except Exception:   # the frame is being replaced
            drawn = 0
        if drawn > 1000:
            break
    return drawn


def snap(target, shots, name: str, **kw) -> None:
    """A screenshot for a person to look at (a page or one element), taken when HOPTRACE_SCREENSHOTS
    names a folder (`shots`; None otherwise): no check reads them, and a full-page one of a tall page
    costs Chromium a layout, a paint and a PNG of the whole height."""
    if shots is not None:
        target.screenshot(path=str(shots / name), **kw)


def upload(page, box: str, path) -> None:
    """A file chosen in the file box `box` (a CSS selector), waited for until its upload has ended:
    a click sent while a file is still uploading gets no value for it."""
    page.locator(f"{box} input[type=file]").set_input_files(str(path))
    page.wait_for_function(f"""() => {{ const b = document.querySelector({box!r});
        return b && !b.querySelector('.uploading') && b.querySelector("button[aria-label='Clear']"); }}""",
                           timeout=60_000)


def send_question_set(page, path, name: str) -> None:
    """The Index tab's form sent: `path` as question set `name` of the picked KB."""
    upload(page, "#qs-file", path)
    page.fill("#qs-name textarea, #qs-name input", name)
    page.click("#qs-add")


def add_question_set(page, path, name: str) -> str:
    """`send_question_set`, waited for until added; the log's text. A refusal fails at once with
    what the page showed, instead of a wait that times out silently."""
    send_question_set(page, path, name)
    page.wait_for_function("""() => document.querySelector('#qs-log').innerText.includes('Added to')
        || document.querySelector('#qs-log .error, #qs-log [class*=error]')
        || [...document.querySelectorAll('.toast-body')].some(t => t.innerText.includes('Error'))""",
                           timeout=120_000)
    log = page.locator("#qs-log").inner_text()
    assert "Added to" in log, f"question set {name!r} not added: log {log!r}, " \
                              f"toasts {page.locator('.toast-body').all_inner_texts()}"
    return log
