"""Every message the app shows is text (ui/messages.py): one way to a toast, escaped, naming the
visitor's file and never its upload folder; a refusal logs one line, a bug its traceback."""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

import gradio as gr
import pytest

from retrieval.core.errors import InputError
from ui import messages

ROOT = Path(__file__).resolve().parent.parent
TOASTS = {"Error", "Warning", "Info"}
PAYLOAD = "<img src=http://127.0.0.1:9/h1><form action=http://127.0.0.1:9/f><button>go</button></form>"


def _ui_modules():
    return [p for p in sorted((ROOT / "ui").rglob("*.py")) if p.name != "messages.py" or p.parent.name != "ui"]


def test_no_module_of_the_app_makes_a_toast_but_through_ui_messages():
    """gr.Error / gr.Warning / gr.Info, named any way (gr.X, gradio.X, from gradio import X), appear
    only in ui/messages.py: everything else raises a HopTraceError, which guard() turns into text."""
    found = []
    for path in _ui_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Attribute) and node.attr in TOASTS and isinstance(node.value, ast.Name)
                    and node.value.id in ("gr", "gradio")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value.id}.{node.attr}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gradio"):
                found += [f"{path.relative_to(ROOT)}:{node.lineno} from {node.module} import {a.name}"
                          for a in node.names if a.name in TOASTS | {"exceptions"}]
    assert not found, "make toasts with ui/messages.py (refused, warn, inform): " + "; ".join(found)


def test_every_progress_description_goes_through_ui_messages():
    found = []
    for path in _ui_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    v = kw.value
                    through = (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
                               and v.func.attr == "progress_text")
                    if kw.arg == "desc" and not through:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, "pass progress descriptions through messages.progress_text: " + ", ".join(found)


@pytest.fixture()
def uploads(tmp_path, monkeypatch):
    root = tmp_path / "gradio-uploads"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(root))
    folder = root / "5f1c0ffee0ddba11"
    folder.mkdir(parents=True)
    return folder


def test_a_refusal_is_escaped_names_the_visitors_file_and_logs_one_line(uploads, capsys):
    path = str(uploads / "dup.json")

    def add_questions(file, name):
        raise InputError(f"{file}: item 1: duplicate id {PAYLOAD!r}")

    with pytest.raises(gr.Error) as err:
        messages._guarded(add_questions, show_paths=True)(path, "set")
    shown = err.value.message
    assert "<img" not in shown and "<form" not in shown and "&lt;img src=http://127.0.0.1:9/h1&gt;" in shown
    assert shown.startswith("dup.json: item 1: duplicate id") and str(uploads) not in shown
    assert err.value.print_exception is False              # Gradio prints no traceback for it
    log = capsys.readouterr().err.strip().splitlines()
    assert len(log) == 1, log
    assert log[0].startswith("hoptrace: refused InputError in add_questions (file 'dup.json'): dup.json: item 1")
    assert "Traceback" not in log[0] and str(uploads) not in log[0]


def test_public_mode_cuts_every_other_server_path(uploads):
    def f():
        raise InputError(f"KB /srv/home/u/.cache/hoptrace/kbs/x.sqlite is locked; {uploads}/c.csv: bad header")

    with pytest.raises(gr.Error) as err:
        messages._guarded(f, show_paths=False)()
    assert err.value.message == "KB x.sqlite is locked; c.csv: bad header"


def test_an_unexpected_error_keeps_its_traceback_and_reaches_the_page_as_text(capsys):
    def broken(x):
        raise KeyError(PAYLOAD)

    with pytest.raises(gr.Error) as err:
        messages._guarded(broken, show_paths=True)(1)
    assert "unexpected error (KeyError)" in err.value.message and "<img" not in err.value.message
    assert "Traceback" in capsys.readouterr().err


def test_a_generator_handler_is_guarded_and_still_streams():
    def stream(n):
        yield from range(n)
        raise InputError(PAYLOAD)

    wrapped = messages._guarded(stream, show_paths=True)
    got = []
    with pytest.raises(gr.Error) as err:
        for v in wrapped(3):
            got.append(v)
    assert got == [0, 1, 2] and "&lt;img" in err.value.message


def test_markdown_status_text_shows_links_emphasis_and_html_as_themselves():
    out = messages.md("[x](http://127.0.0.1:9/) **b** <img src=x> $a$")
    assert "<img" not in out and "](" not in out and "**" not in out and "$a$" not in out
    assert out.startswith(r"\[x\]\(http://127\.0\.0\.1:9/\)")


def test_the_built_app_guards_every_handler_and_keeps_gradios_injections(small_kb, tmp_path):
    """Wrapped handlers keep the signature Gradio reads for gr.Request and gr.Progress."""
    import inspect

    from retrieval.core.paths import kb_dir
    from retrieval.llm.settings import LLMSettings
    from ui.app import build
    from ui.state import AppState

    shutil.copyfile(small_kb, kb_dir() / "messageskb.sqlite")
    try:
        state = AppState(trace_path=tmp_path / "traces.sqlite", llm_settings=LLMSettings.parse("none"))
        app = build(state)
        fns = [f.fn for f in app.fns.values() if f.fn is not None]
        assert fns and all(getattr(fn, "_hoptrace_guarded", False) for fn in fns)
        index = next(fn for fn in fns if fn.__name__ == "index")
        params = inspect.signature(index).parameters
        assert "request" in params and "progress" in params
        from gradio.helpers import special_args
        _, progress_index, _, _ = special_args(index)
        assert progress_index == list(params).index("progress")
    finally:
        (kb_dir() / "messageskb.sqlite").unlink(missing_ok=True)
