"""What the command groups share: the LLM arguments, the method context a command runs on, the trace store."""
from __future__ import annotations

import argparse
import os
import sys


def _draft_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--draft-tokens", type=int, default=None, metavar="N",
                   help="embedded model only: tokens guessed from the passage and checked in one pass while "
                        "extracting (prompt-lookup drafts, 0 = off; default 3, env HOPTRACE_DRAFT_TOKENS)")


def plugin_args(p: argparse.ArgumentParser) -> None:
    """Every command that takes method names also takes the user's own (methods/plugins/)."""
    p.add_argument("--plugin", action="append", default=[], metavar="PATH_OR_MODULE",
                   help="your own method: a .py file defining retrieve(question, k, kb) or a Method "
                        "subclass, or an importable module (repeatable; HOPTRACE_PLUGINS too)")
    p.add_argument("--method-url", action="append", default=[], metavar="NAME=URL",
                   help="a method behind an HTTP endpoint: POST {question, k} → JSON hits (repeatable; "
                        "HOPTRACE_METHOD_URLS too)")


def load_plugins(args) -> None:
    """Entry points, the environment's and the command line's plugins; each failure one line."""
    from ..methods.plugins import load_and_report

    load_and_report(getattr(args, "plugin", None) or [], getattr(args, "method_url", None) or [])


def _llm_args(p: argparse.ArgumentParser, profile_help: str = "") -> None:
    p.add_argument("--llm", default=None,
                   help="local (default: embedded Qwen2.5-Coder-1.5B) | local:qwen2.5-coder-0.5b | none | openai | "
                        "an OpenAI-compatible base URL; env HOPTRACE_LLM")
    p.add_argument("--llm-model", default=None,
                   help="model name for openai / URL endpoints, or a GGUF file to run embedded (with local); "
                        "env HOPTRACE_LLM_MODEL")
    p.add_argument("--profile", default=None, choices=["paper", "local"],
                   help=profile_help or "methods' hyperparameters: paper (as the papers state them), or local "
                        "(HopTrace's measured choices: a small model's budgets on 2 cores, GRIEVER's ranking); "
                        "default local for LLM-free methods and on the embedded model, paper for an LLM method "
                        "on an endpoint; env HOPTRACE_PROFILE")


def _context(kb: str, args=None, **llm_overrides):
    from ..encoders.embedder import get_embedder
    from ..kb.presets import ensure_demo
    from ..llm import LLMSettings, get_llm
    from ..methods import Context
    from ..store import open_store

    if kb == "demo":
        ensure_demo()
    store = open_store(kb)
    llm = get_llm(LLMSettings.parse(getattr(args, "llm", None), getattr(args, "llm_model", None), **llm_overrides))
    return Context(store, get_embedder(store.info().embed_model), llm, profile=getattr(args, "profile", None))


def _experiments():
    """The stored experiments, with the shipped ones installed first, as the app installs them at
    its start: a fresh home's `compare`, `judge` or `experiments` sees the experiment the README
    points to without the app having run. Said in one line when an install happens."""
    from traces.storage.experiments import Experiments

    store = _trace_store()
    ensure_shipped(store)
    return Experiments(store)


def ensure_shipped(store) -> list[str]:
    """Every shipped experiment file's experiment in `store` (installed once per version)."""
    import time

    from traces.storage import shipped

    from ..core.errors import HopTraceError

    before = set(shipped.shipped_ids(store))
    out = []
    for path in sorted(shipped.SHIPPED_DIR.glob("*.json.xz")):
        t0 = time.perf_counter()
        try:
            e = shipped.install(store, path)
        except HopTraceError as err:   # a damaged file is named; the command goes on without it
            print(f"hoptrace: warning: {err}", file=sys.stderr)
            continue
        if e is None:
            continue
        out.append(e.id)
        if e.id not in before:
            print(f"hoptrace: installed the shipped experiment {e.id[:12]} (KB {e.kb}, {len(e.methods)} methods) "
                  f"into {store.path} in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return out


def _trace_store():
    from traces.storage.store import TraceStore, default_path

    store = TraceStore(default_path(), recover=True)
    if store.recovered:
        print(f"hoptrace: warning: {store.recovered}", file=sys.stderr)
    url = os.environ.get("HOPTRACE_OTLP_ENDPOINT", "").strip()
    if url:  # each run's spans as it is stored, as the app does; sent before the command exits
        import atexit

        from traces.otel.export import LiveExport

        live = LiveExport(url)
        store.on_saved.append(live.submit)
        atexit.register(lambda: (live.flush(60.0), live.shutdown()))
    return store
