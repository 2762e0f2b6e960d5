"""The imports follow docs/architecture.md: layers from the entry points down to the ground floor,
each importing only its own layer or those below it, and no import circle anywhere.

Every import counts, at the top of a module, inside a function or under TYPE_CHECKING: each is a
dependency all the same. `python tests/test_layering.py` prints the report (circles, loose modules
at the root of retrieval/, each layer and what it imports).
"""
from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("retrieval", "traces", "ui", "appbench")
DOC = ROOT / "docs" / "architecture.md"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the project's packages, and the Spaces entry point app.py."""
    out = {_module_name(p, root): p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))}
    if (root / "app.py").exists():
        out["app"] = root / "app.py"
    return out


def imports(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, anywhere in it, relative imports resolved."""
    def resolve(mod: str) -> str | None:
        while mod and mod not in known:
            mod = mod.rpartition(".")[0]
        return mod or None

    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {r for a in node.names if (r := resolve(a.name))}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:  # `from pkg import submodule` depends on the submodule
                sub = f"{mod}.{a.name}"
                if (r := sub if sub in known else resolve(mod)):
                    out.add(r)
    out.discard(name)
    return out


@functools.lru_cache(maxsize=None)  # each test reads the same tree: parse it once
def graph(root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(root)
    return {m: imports(p, m, known) for m, p in known.items()}


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def layers(doc: Path = DOC) -> list[tuple[str, list[str]]]:
    """(layer name, its paths) from the architecture doc's table, top layer first."""
    out = []
    for line in doc.read_text().splitlines():
        m = re.match(r"^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|", line)
        if m:
            out.append((m.group(2), re.findall(r"`([^`]+)`", m.group(3))))
    return out


def layer_of(module: str, path: Path, table: list[tuple[str, list[str]]], root: Path = ROOT) -> int | None:
    """The index of the layer whose path holds the module (the longest path that matches)."""
    rel = path.relative_to(root).as_posix()
    best, best_len = None, -1
    for i, (_, paths) in enumerate(table):
        for p in paths:
            hit = rel == p if p.endswith(".py") else rel.startswith(p.rstrip("/") + "/")
            if hit and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def upward(g: dict[str, set[str]], table, root: Path = ROOT) -> list[str]:
    known = modules(root)
    out = []
    for m in sorted(g):
        lm = layer_of(m, known[m], table, root)
        for d in sorted(g[m]):
            ld = layer_of(d, known[d], table, root)
            if lm is not None and ld is not None and ld < lm:
                out.append(f"{known[m].relative_to(root)} (layer {lm + 1}, {table[lm][0]}) imports "
                           f"{known[d].relative_to(root)} (layer {ld + 1}, {table[ld][0]})")
    return out


def test_no_import_circles():
    assert circles(graph()) == [], "import circles (each a set of modules that import each other)"


def test_every_module_sits_in_a_documented_layer():
    table, known = layers(), modules()
    assert len(table) >= 8, f"{DOC.name}'s layer table was not found"
    missing = [str(p.relative_to(ROOT)) for m, p in known.items() if layer_of(m, p, table) is None]
    assert missing == [], f"modules in no layer of {DOC.relative_to(ROOT)}: {missing}"


def test_no_import_points_up_a_layer():
    assert upward(graph(), layers()) == []


def _reaching(prefix: str, into: tuple[str, ...]) -> list[str]:
    known = modules()
    return [f"{known[m].relative_to(ROOT)} imports {sorted(d for d in ds if d.split('.')[0] in into)}"
            for m, ds in sorted(graph().items()) if m.startswith(prefix) and not m.startswith("retrieval.cli")
            and any(d.split(".")[0] in into for d in ds)]


def test_the_core_imports_nothing_from_the_ui_or_the_trace_store():
    """The command line (retrieval/cli/) is the one place in retrieval/ that wires all three."""
    assert _reaching("retrieval", ("ui", "traces")) == []


def test_the_trace_store_imports_nothing_from_the_ui():
    assert _reaching("traces", ("ui",)) == []


def test_every_documented_path_exists():
    gone = [p for _, paths in layers() for p in paths if not (ROOT / p).exists()]
    assert gone == [], f"{DOC.relative_to(ROOT)} names paths that do not exist: {gone}"


def test_the_root_of_retrieval_holds_few_loose_modules():
    loose = sorted(p.name for p in (ROOT / "retrieval").glob("*.py"))
    assert len(loose) <= 5, loose


MAX_LINES = 550   # the house's limit: past it a module holds more than one concept


def test_no_source_file_is_over_the_house_limit():
    """Every module of the packages, app.py and scripts/ (tests are held to their own shape: one
    module a feature, fixtures shared)."""
    files = [*modules().values(), *sorted((ROOT / "scripts").glob("*.py"))]
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"over {MAX_LINES} lines (split by concept): {long}"


def test_the_app_package_holds_views_not_benchmarks():
    """What drives the app from outside (a browser, a client of its API) is a benchmark of it: it
    lives in appbench/, so a newcomer looking for a view in ui/ finds views."""
    drivers = ("playwright", "gradio_client")
    found = []
    for p in sorted((ROOT / "ui").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{p.relative_to(ROOT)} imports {n}" for n in names if n.split(".")[0] in drivers]
    # The Benchmark tab (ui/tabs/benchmark.py) is a view; these names were the app's benchmarks.
    benchy = [p.name for p in (ROOT / "ui").rglob("*.py")
              if p.stem in ("load", "soak", "first_start") or re.search(r"^bench_|_bench$", p.stem)]
    assert found == [] and benchy == [], (found, benchy)


def test_every_package_says_what_it_holds():
    silent = [str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py")
              if ast.get_docstring(ast.parse(p.read_text())) is None]
    assert silent == []


def test_the_check_sees_lazy_and_type_checking_imports_and_names_a_circle(tmp_path):
    pkg = tmp_path / "retrieval"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""x"""\n')
    (pkg / "a.py").write_text("def f():\n    from .b import g\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from retrieval import a\n")
    g = graph(tmp_path)
    assert g["retrieval.a"] == {"retrieval.b"} and g["retrieval.b"] == {"retrieval.a"}
    assert circles(g) == [["retrieval.a", "retrieval.b"]]


def test_the_check_names_an_upward_import(tmp_path):
    for d in ("retrieval/core", "ui"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "__init__.py").write_text('"""x"""\n')
    (tmp_path / "retrieval" / "core" / "low.py").write_text("import ui.page\n")
    (tmp_path / "ui" / "page.py").write_text("")
    table = [("app", ["ui/"]), ("ground floor", ["retrieval/core/"])]
    assert upward(graph(tmp_path), table, tmp_path) == [
        "retrieval/core/low.py (layer 2, ground floor) imports ui/page.py (layer 1, app)"]


def report() -> str:
    g, table, known = graph(), layers(), modules()
    loose = sorted(p.name for p in (ROOT / "retrieval").glob("*.py"))
    lines = [f"import circles: {len(circles(g))}"] + [f"  {' <-> '.join(c)}" for c in circles(g)]
    lines.append(f"loose modules at the root of retrieval/: {len(loose)} ({', '.join(loose)})")
    lines.append(f"imports up a layer: {len(upward(g, table))}")
    lines += [f"  {u}" for u in upward(g, table)]
    for i, (name, paths) in enumerate(table):
        here = [m for m in g if layer_of(m, known[m], table) == i]
        below = sorted({table[j][0] for m in here for d in g[m]
                        if (j := layer_of(d, known[d], table)) is not None and j != i})
        lines.append(f"layer {i + 1} {name} ({len(here)} modules: {', '.join(paths)}) imports: "
                     f"{', '.join(below) or 'nothing of HopTrace'}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
