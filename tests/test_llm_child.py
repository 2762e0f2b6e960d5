"""The embedded llama-server dies with the process that started it, however that process
ends: SIGTERM (what process managers send), SIGINT, SIGKILL, or a crash in native code."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.slow

# A parent that starts the server from a short-lived thread (as the app does), prints the
# child's pid, then waits to be ended.
PARENT = textwrap.dedent("""
    import faulthandler, os, signal, sys, threading, time
    # A shell starts background jobs with SIGINT ignored, and Python then keeps it ignored; a
    # process that forks while it blocks SIGINT (a test runner, a supervisor) passes the block on,
    # and a blocked SIGINT stays pending for ever (reproduced: the parent never exits). Act as a
    # terminal-started app would, whoever runs the suite.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for stacks if it hangs
    from retrieval.llm import LLMSettings
    from retrieval.llm.choose import make_backend
    box = {}
    settings = LLMSettings(backend="local", model=os.environ["HOPTRACE_LLM_MODEL"], n_ctx=512)  # the suite's
    t = threading.Thread(target=lambda: box.update(srv=make_backend(settings)))
    t.start(); t.join()
    pid = box["srv"].proc.pid
    # llama-server runs under a supervisor (retrieval/llm/supervise.py): both must go
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        print(" ".join([str(pid), *f.read().split()]), flush=True)
    if sys.argv[1] == "crash":
        import ctypes; ctypes.string_at(0)   # a segfault in native code
    for _ in range(6000):  # short sleeps, as Gradio's launch() blocks
        time.sleep(0.1)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        # a zombie has exited; only its parent (gone) could reap it
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):  # gone, or reaped between the two looks
        return False


def _why_stuck(pid: int) -> str:
    """What a parent that did not exit was doing: its signal masks and every thread's stack."""
    try:
        with open(f"/proc/{pid}/status") as f:
            masks = "; ".join(line.strip() for line in f if line.startswith(("Sig", "Shd", "Threads", "State")))
        os.kill(pid, signal.SIGUSR1)  # faulthandler writes all threads' stacks to its stderr
        time.sleep(1.0)
        return masks
    except (ProcessLookupError, FileNotFoundError):
        return "(exited meanwhile)"


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL", "crash"])
def test_the_server_child_dies_with_its_parent(how, tmp_path):
    from retrieval.llm.errors import LLMUnavailable
    from retrieval.llm.server import server_binary
    try:
        server_binary()
    except LLMUnavailable as e:
        pytest.skip(str(e))
    stderr = open(tmp_path / "parent.err", "w+")
    parent = subprocess.Popen([sys.executable, "-c", PARENT, how], stdout=subprocess.PIPE, stderr=stderr, text=True,
                              env={**os.environ, "HOPTRACE_LLM_CACHE": "0"})
    line = ""
    pids: list[int] = []
    try:
        line = parent.stdout.readline().strip()
        pids = [int(p) for p in line.split() if p.isdigit()]
        assert len(pids) >= 2, f"the parent did not start the server and its supervisor (printed {line!r})"
        assert all(_alive(p) for p in pids)
        if how != "crash":
            parent.send_signal(getattr(signal, how))
        try:
            parent.wait(30)
        except subprocess.TimeoutExpired:
            masks = _why_stuck(parent.pid)
            stderr.seek(0)
            pytest.fail(f"the parent did not exit within 30 s of {how} ({masks}); its stacks:\n{stderr.read()[-4000:]}")
        deadline = time.time() + 10
        while any(_alive(p) for p in pids) and time.time() < deadline:
            time.sleep(0.2)
        assert not any(_alive(p) for p in pids), \
            f"llama-server and its supervisor {pids}: one outlived its parent ended by {how}"
    finally:
        if parent.poll() is None:
            parent.kill()
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)  # never leave one behind, even when the test fails
        stderr.close()
