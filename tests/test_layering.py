"""The layers point one way: retrieval (the core) ← traces (storage and analysis) ← ui.

The command line (retrieval/cli.py and its evidence commands, retrieval/cli_evidence.py) is the one place that wires all three together, as an
entry point does; nothing else in the core may import what sits above it, not even lazily
inside a function.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENTRY_POINTS = {ROOT / "retrieval" / "cli.py", ROOT / "retrieval" / "cli_evidence.py"}


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def _offenders(package: str, above: set[str]) -> list[str]:
    return [f"{p.relative_to(ROOT)} imports {sorted(_imports(p) & above)}"
            for p in sorted((ROOT / package).rglob("*.py")) if p not in ENTRY_POINTS and _imports(p) & above]


def test_the_core_imports_nothing_from_the_ui_or_the_trace_store():
    assert _offenders("retrieval", {"ui", "traces"}) == []


def test_the_trace_store_imports_nothing_from_the_ui():
    assert _offenders("traces", {"ui"}) == []


def test_the_check_sees_a_lazy_import_inside_a_function(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from ui.render import column_html\n    import traces.store\n")
    assert _imports(f) == {"ui", "traces"}
