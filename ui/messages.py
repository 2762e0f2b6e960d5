"""Every message the app puts on the page outside a stage record: error, warning and info toasts,
status lines and progress descriptions.

Gradio renders a toast's message as HTML (its sanitiser keeps `<img>`, `<form>` and `<a>`), and
gr.Markdown renders Markdown and HTML, so a message that quotes a visitor's file (a CSV header, a
duplicate id, a set name) could fetch images or draw forms. Everything here therefore turns a
message into text first: escaped, each temporary upload path replaced by the file name the visitor
gave (Gradio keeps an upload as `<upload folder>/<hash>/<their name>`), and in public mode no
other server path.

`guard(app)` wraps every handler of the page once it is built, so that the one way an error
reaches a visitor is `refused()`: a HopTraceError a handler lets through becomes its toast, and
an unexpected exception keeps its traceback in the log but reaches the page as text too. A
refused input writes one line to the log, never a traceback: a public Space's log must not fill
with tracebacks of visitors' typos. tests/test_messages.py checks that ui/ raises no gr.Error,
gr.Warning or gr.Info any other way.
"""
from __future__ import annotations

import functools
import html
import inspect
import os
import re
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

import gradio as gr

from retrieval.core.errors import HopTraceError

from .public import visitor_message


def upload_root() -> str:
    """Where Gradio keeps uploads (gradio.utils.get_upload_folder, read per call so that a test's
    GRADIO_TEMP_DIR counts)."""
    return os.environ.get("GRADIO_TEMP_DIR") or str((Path(tempfile.gettempdir()) / "gradio").resolve())


def _upload_paths(root: str) -> re.Pattern:
    # <root>/<one folder per upload>/<the visitor's file name>: the folder part goes.
    return re.compile(re.escape(root.rstrip("/")) + r"/[^/\s]+/")


def uploads_in(args: Iterable[Any]) -> list[str]:
    """The visitor's file names among a handler's arguments (upload paths, alone or in lists)."""
    root = upload_root().rstrip("/") + "/"
    out: list[str] = []
    for a in args:
        for v in (a if isinstance(a, (list, tuple)) else [a]):
            if isinstance(v, (str, Path)) and str(v).startswith(root):
                out.append(Path(v).name)
    return out


def plain(message: Any, show_paths: bool = True) -> str:
    """The message as a visitor may read it, still unescaped: uploads named as the visitor named
    them and, where server paths are not shown (public mode), any other path cut to its name."""
    text = _upload_paths(upload_root()).sub("", str(message))
    return text if show_paths else visitor_message(text, {})


def text(message: Any, show_paths: bool = True) -> str:
    """For HTML and toasts: the plain message, escaped so that every character shows as itself."""
    return html.escape(plain(message, show_paths), quote=True)


_MD_SPECIALS = re.compile(r"([\\`*_{}\[\]()#+\-.!|~$])")


def md(value: Any, show_paths: bool = True) -> str:
    """For gr.Markdown: escaped as HTML, and Markdown's own syntax (links, emphasis, `$` maths)
    backslash-escaped, so `[x](http://…)` in a set name stays text."""
    return _MD_SPECIALS.sub(r"\\\1", html.escape(plain(value, show_paths), quote=False))


def progress_text(message: Any, show_paths: bool = True) -> str:
    """For a progress description. Gradio shows it as text (a `<b>` stays `<b>`, tested in
    tests/browser), so it is not escaped; paths are named as elsewhere."""
    return plain(message, show_paths)


def refused(reason: Any, show_paths: bool = True, files: Iterable[str] = (), where: str = "") -> gr.Error:
    """The toast for a refused input or request, to raise: the reason as text, and one log line
    naming the kind of error, the handler and the visitor's files."""
    kind = type(reason).__name__ if isinstance(reason, BaseException) else "refused"
    shown = plain(reason, show_paths)
    names = list(dict.fromkeys(files))
    # One line, whatever the message holds: its newlines would read as further log entries.
    line = " ".join(shown.split())
    print(f"hoptrace: refused {kind}" + (f" in {where}" if where else "")
          + (f" (file {', '.join(repr(n) for n in names)})" if names else "") + f": {line}",
          file=sys.stderr, flush=True)
    return gr.Error(html.escape(shown, quote=True), print_exception=False)


def warn(message: Any, show_paths: bool = True) -> None:
    """A warning toast, as text."""
    gr.Warning(text(message, show_paths))


def inform(message: Any, show_paths: bool = True) -> None:
    """An info toast, as text."""
    gr.Info(text(message, show_paths))


def _failure(e: BaseException, fn: Callable, args: tuple, show_paths: bool) -> gr.Error:
    where = getattr(fn, "__name__", "")
    if isinstance(e, HopTraceError):
        return refused(e, show_paths, uploads_in(args), where)
    # Unexpected: the traceback stays in the log; the page gets the message as text.
    traceback.print_exc()
    return gr.Error(text(f"unexpected error ({type(e).__name__}): {e}; the app's log has the details", show_paths),
                    print_exception=False)


def _guarded(fn: Callable, show_paths: bool) -> Callable:
    """fn with its errors turned into text toasts. functools.wraps keeps the signature and the
    annotations Gradio reads to inject gr.Request and gr.Progress."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except gr.Error:
                raise
            except Exception as e:  # noqa: BLE001  (every failure reaches the page as text)
                raise _failure(e, fn, args, show_paths) from None
        return gen

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except Exception as e:  # noqa: BLE001
            raise _failure(e, fn, args, show_paths) from None
    return call


def guard(app: gr.Blocks, show_paths: bool = True) -> gr.Blocks:
    """Wrap every handler registered on the built page (see the module's docstring)."""
    for block_fn in app.fns.values():
        fn = block_fn.fn
        if fn is None or getattr(fn, "_hoptrace_guarded", False):
            continue
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(f"{fn.__name__}: async handlers are not guarded; make it sync or extend guard()")
        wrapped = _guarded(fn, show_paths)
        wrapped._hoptrace_guarded = True
        block_fn.fn = wrapped
    return app
