"""Finding a user's methods: installed packages, files or modules, and HTTP endpoints.

- Installed packages: the entry-point group `hoptrace.methods`; each entry point names a Method
  subclass, a `retrieve(question, k, kb)` function (the method takes the entry point's name) or a
  module holding either.
- A file or module: `--plugin PATH_OR_MODULE` on the commands that take methods, and
  HOPTRACE_PLUGINS (paths or module names, separated by `,` or the OS's path separator) for the
  app and the notebook.
- An endpoint: `--method-url NAME=URL`, or HOPTRACE_METHOD_URLS (`NAME=URL,NAME=URL`).

A plugin that fails to load is named with its reason (`problems()`, printed at start by the CLI
and the app); everything else works. Loading the same plugin again changes nothing.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Optional

from ...core.errors import ConfigError, HopTraceError
from ..base import Method
from ..registry import METHODS, ORIGINS, register_plugin
from .function import FunctionMethod
from .http import EndpointMethod, parse_url_spec

GROUP = "hoptrace.methods"


@dataclass(frozen=True)
class Problem:
    plugin: str
    reason: str

    def line(self) -> str:
        return f"plugin {self.plugin} not loaded: {self.reason}"


_PROBLEMS: dict[str, Problem] = {}
_LOADED: set[str] = set()


def problems() -> list[Problem]:
    """Every plugin that failed to load so far, with its reason."""
    return list(_PROBLEMS.values())


def _function_method(fn: Any, name: str, origin: str, doc: str = "") -> type[Method]:
    if not callable(fn):
        raise ConfigError(f"retrieve in {origin} is not a function")
    params = [p for p in inspect.signature(fn).parameters.values() if p.kind in (p.POSITIONAL_ONLY,
                                                                                 p.POSITIONAL_OR_KEYWORD)]
    if len(params) < 3 and not any(p.kind == p.VAR_POSITIONAL for p in inspect.signature(fn).parameters.values()):
        raise ConfigError(f"retrieve in {origin} should take (question, k, kb); it takes "
                          f"({', '.join(p.name for p in params)})")
    title = (doc or "").strip().splitlines()[0] if (doc or "").strip() else f"{name} (your retriever)"
    return type(f"Plugin_{name}", (FunctionMethod,), {"name": name, "title": title, "fn": staticmethod(fn),
                                                      "origin": origin, "__module__": __name__})


def _methods_of(module: ModuleType, default_name: str, origin: str) -> list[type[Method]]:
    """Method subclasses the module defines, or its module-level retrieve()."""
    own = [c for c in vars(module).values() if inspect.isclass(c) and issubclass(c, Method)
           and c.__module__ == module.__name__ and not inspect.isabstract(c)
           and isinstance(getattr(c, "name", None), str)]
    if own:
        for c in own:
            c.origin = origin
        return own
    fn = getattr(module, "retrieve", None)
    if fn is None:
        raise ConfigError("defines neither retrieve(question, k, kb) nor a Method subclass with a name")
    name = getattr(module, "NAME", None) or default_name
    return [_function_method(fn, str(name), origin, module.__doc__ or "")]


def _import(spec: str) -> tuple[ModuleType, str, str]:
    """A file path or an importable module → (module, default method name, origin)."""
    path = Path(spec).expanduser()
    if spec.endswith(".py") or path.exists():
        if not path.is_file():
            raise ConfigError(f"no file {spec}")
        mod_name = "hoptrace_plugin_" + re.sub(r"\W", "_", path.stem)
        loaded = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(loaded)
        sys.modules[mod_name] = module   # dataclasses and pickling look a class's module up here
        try:
            loaded.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(mod_name, None)
            raise
        return module, path.stem, f"file {path.name}"
    return importlib.import_module(spec), spec.rpartition(".")[2], f"module {spec}"


def _register_all(classes: list[type[Method]], origin: str) -> list[str]:
    for c in classes:
        register_plugin(c, origin)
    return [c.name for c in classes]


def _attempt(key: str, label: str, load) -> list[str]:
    """Run one plugin's load; on failure keep its problem, never raise."""
    if key in _LOADED:
        return []
    try:
        names = load()
    except (Exception, SystemExit) as e:  # noqa: BLE001  (a broken plugin must not stop HopTrace)
        reason = str(e) if isinstance(e, HopTraceError) else f"{type(e).__name__}: {e}"
        _PROBLEMS[key] = Problem(label, reason)
        return []
    _PROBLEMS.pop(key, None)
    _LOADED.add(key)
    return names


def load_plugin(spec: str) -> list[str]:
    """A file or module; returns the method names it added ([] and a problem if it failed)."""
    def load():
        module, default, origin = _import(spec)
        return _register_all(_methods_of(module, default, origin), origin)
    return _attempt(f"plugin:{spec}", spec, load)


def load_endpoint(spec: str) -> list[str]:
    def load():
        name, url = parse_url_spec(spec)
        cls = type(f"Endpoint_{name}", (EndpointMethod,), {"name": name, "title": f"{name} (HTTP endpoint)",
                                                            "url": url, "__module__": __name__})
        return _register_all([cls], "HTTP endpoint")
    return _attempt(f"url:{spec}", spec.partition("=")[0] or spec, load)


def load_entry_points() -> list[str]:
    names: list[str] = []
    for ep in entry_points(group=GROUP):
        def load(ep=ep):
            target = ep.load()
            origin = f"entry point {ep.name} ({ep.value})"
            if inspect.ismodule(target):
                classes = _methods_of(target, ep.name, origin)
            elif inspect.isclass(target) and issubclass(target, Method):
                target.origin = origin
                classes = [target]
            else:
                classes = [_function_method(target, ep.name, origin, getattr(target, "__doc__", "") or "")]
            return _register_all(classes, origin)
        names += _attempt(f"ep:{ep.name}={ep.value}", f"entry point {ep.name}", load)
    return names


def _split(value: Optional[str]) -> list[str]:
    return [s.strip() for s in re.split(rf"[,{re.escape(os.pathsep)}]", value or "") if s.strip()]


def load_all(plugins: Iterable[str] = (), urls: Iterable[str] = (), env: bool = True) -> list[str]:
    """Entry points, then HOPTRACE_PLUGINS / HOPTRACE_METHOD_URLS (when `env`), then the given
    plugins and URLs. Returns the names added; `problems()` says what failed."""
    names = load_entry_points()
    specs = (_split(os.environ.get("HOPTRACE_PLUGINS")) if env else []) + list(plugins)
    eps = ([s.strip() for s in (os.environ.get("HOPTRACE_METHOD_URLS") or "").split(",") if s.strip()]
           if env else []) + list(urls)
    for s in specs:
        names += load_plugin(s)
    for s in eps:
        names += load_endpoint(s)
    return names


def load_and_report(plugins: Iterable[str] = (), urls: Iterable[str] = ()) -> list[str]:
    """`load_all`, then one stderr line for each plugin that failed to load: how the CLI and the
    app start."""
    names = load_all(plugins, urls)
    for p in problems():
        print(f"hoptrace: warning: {p.line()}", file=sys.stderr, flush=True)
    return names


def user_methods() -> list[str]:
    """The methods that came from plugins and endpoints, in load order."""
    return [n for n in ORIGINS if n in METHODS]
