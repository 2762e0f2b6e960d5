"""Shared fixtures: a small real KB built from the bundled MuSiQue data with the real embedder."""
from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

if not os.environ.get("HOPTRACE_HOME"):   # not setdefault: its argument, a new folder, was made every time
    os.environ["HOPTRACE_HOME"] = tempfile.mkdtemp(prefix="hoptrace-test-")
# What the workers build once and share (small_kb): a folder scripts/test.sh names for its two parts
# (HOPTRACE_TEST_SHARED, fresh each run), else one under xdist's common home, else none.
_SHARED: Path | None = Path(os.environ["HOPTRACE_TEST_SHARED"]) if os.environ.get("HOPTRACE_TEST_SHARED") else None
if os.environ.get("PYTEST_XDIST_WORKER"):
    # scripts/test.sh runs the suite on three pytest-xdist workers. Each gets a home of its own (KBs,
    # trace files and caches are written there; two workers writing one file would mix or tear
    # it); the models' exports are shared, made once and renamed into place whole (encoders/onnx.py).
    _base = Path(os.environ["HOPTRACE_HOME"])
    _home = _base / os.environ["PYTEST_XDIST_WORKER"]
    _home.mkdir(parents=True, exist_ok=True)
    (_base / "models").mkdir(parents=True, exist_ok=True)
    if not (_home / "models").exists():
        (_home / "models").symlink_to(_base / "models")
    os.environ["HOPTRACE_HOME"] = str(_home)
    _SHARED = _SHARED or _base / "shared"
    # Beside another worker the embedded model's two threads stalled at llama.cpp's per-step
    # barrier, 3-8x slower (docs/measurements/suite.md); one thread only waits its turn.
    os.environ["HOPTRACE_LLM_THREADS"] = "1"
    # The same for torch's and the BLAS libraries' thread pools (the encoder's torch fallback, bf16,
    # spaCy): three workers on two cores, each pool's threads waiting at every op for one descheduled.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
if _SHARED is not None:
    _SHARED.mkdir(parents=True, exist_ok=True)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Forced, not defaulted: a test's "local" LLM is the suite's model whatever the shell says (tests/embedded.py).
from embedded import TEST_MODEL  # noqa: E402

os.environ["HOPTRACE_LLM_MODEL"] = TEST_MODEL

from retrieval.corpus import load_corpus, load_questions  # noqa: E402
from retrieval.corpus.datasets import get_dataset  # noqa: E402

N_QUESTIONS = 4  # their 80 paragraphs (20 per question) make the small KB


@pytest.fixture(scope="session")
def musique():
    ds = get_dataset("musique")
    passages = load_corpus(ds.corpus)
    return ds, passages, load_questions(ds.questions, passages)


@pytest.fixture(scope="session")
def small_corpus(musique):
    """The paragraphs of the first questions, in corpus order, and those questions."""
    ds, passages, questions = musique
    qs = questions[:N_QUESTIONS]
    import gzip
    import json
    raw = json.loads(gzip.decompress(ds.questions.read_bytes()))[:N_QUESTIONS]
    from retrieval.core.records import passage_id
    wanted = {passage_id(p["title"].strip(), p["paragraph_text"].strip()) for q in raw for p in q["paragraphs"]}
    return [p for p in passages if p.id in wanted], qs


@pytest.fixture(scope="session")
def embedder():
    from retrieval.encoders.embedder import get_embedder
    return get_embedder()


@pytest.fixture(scope="session")
def small_kb(small_corpus, embedder, tmp_path_factory) -> Path:
    """The small KB, a file of this worker's own. Under xdist it is built once for the session by
    whichever worker asks first (~25 s of CPU the others would repeat) and copied by the rest."""
    path = tmp_path_factory.mktemp("kb") / "small.sqlite"
    if _SHARED is None:
        _build_small_kb(path, small_corpus, embedder)
        return path
    built = _SHARED / "small.sqlite"
    with open(_SHARED / "small.sqlite.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # the others wait here until the first has built it
        if not built.exists():
            part = Path(tempfile.mkdtemp(dir=_SHARED)) / "small.sqlite"
            _build_small_kb(part, small_corpus, embedder)
            os.replace(part, built)        # whole or not at all
    shutil.copyfile(built, path)
    return path


def _build_small_kb(path: Path, small_corpus, embedder) -> None:
    from retrieval.kb.build import build_kb
    from retrieval.kb.extract.openie_import import OpenIEImport
    from retrieval.kb.extract.rules import RulesExtractor

    passages, questions = small_corpus
    build_kb(path, passages, [OpenIEImport(get_dataset("musique").openie), RulesExtractor(("events", "propositions"))],
             embedder, questions=questions, name="small", progress=False)


@pytest.fixture(scope="session")
def small_store(small_kb):
    from retrieval.store.sqlite import SQLiteStore
    return SQLiteStore(small_kb)


@pytest.fixture(scope="session")
def ctx(small_store, embedder):
    from retrieval.methods import Context
    return Context(small_store, embedder)


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory):
    """A real Arize Phoenix on a free loopback port, started once (~19 s) for the session."""
    from phoenix_server import phoenix_server

    yield from phoenix_server(tmp_path_factory)


SPIN = "import time\nt = time.time()\nwhile time.time() - t < {s}:\n    pass\n"


@pytest.fixture()
def busy():
    """A process spinning one core for up to 30 s (in the suite a test reached its first watched unit
    after 12 s had passed), orphaned so it is not in our process tree
    (a child of ours would count as our own work). Ends by itself; killed by its pid after."""
    launcher = ("import subprocess, sys\n"
                f"p = subprocess.Popen([sys.executable, '-c', {SPIN.format(s=30)!r}], start_new_session=True, "
                "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                "print(p.pid)\n")
    pid = int(subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, check=True).stdout)
    time.sleep(0.3)
    yield pid
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# The browser tests' app files share one Chromium and one in-process app (tests/browser/conftest.py,
# session fixtures): they are one unit of work for pytest-xdist, so those are built once, on one
# worker, instead of once per file on whichever workers the files land (~30 s of set-up each).
APP_FILES = "tests/browser/test_app_"
# The files that start the session's Arize Phoenix (the `phoenix` fixture): one unit too, so it is
# started once; on two workers each started its own (~35 CPU s apiece: round 11 of docs/measurements/suite.md).
PHOENIX_FILES = ("tests/test_otel_phoenix.py", "tests/test_tutorial.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile`, but every tests/browser/test_app_*.py in one unit, and the Phoenix files in another."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class AppFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            if scope in PHOENIX_FILES:
                return PHOENIX_FILES[0]
            return APP_FILES if scope.startswith(APP_FILES) else scope

    return AppFilesTogether(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """scripts/test.sh's serial part collects only the files whose text says `mark.alone` (collecting
    the whole suite again to run six tests was ~5 s of it). A test marked alone another way would
    run in neither part: it fails the collection instead. First, before `-m` deselects any item."""
    texts: dict[str, str] = {}
    for item in items:
        if item.get_closest_marker("alone") is not None:
            path = str(item.path)
            if "mark.alone" not in texts.setdefault(path, item.path.read_text()):
                raise pytest.UsageError(f"{item.nodeid} is marked alone, but its file never says `mark.alone`: "
                                        "scripts/test.sh's serial part would not collect it")
