"""A real Arize Phoenix for the span-export tests, started once a session (test_otel_phoenix.py and
the tutorial's export step share it: each reads back only its own spans) from .venv-phoenix
(scripts/setup.sh --test installs it there: its ~850 MB of pinned packages stay out of the app's
environment), on a free loopback port, stopped by its pid."""
from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from retrieval.core.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
PHOENIX_PY = Path(os.environ.get("HOPTRACE_PHOENIX_PYTHON", ROOT / ".venv-phoenix" / "bin" / "python"))


def phoenix_server(tmp_path_factory):
    if not PHOENIX_PY.exists():
        pytest.fail(f"{PHOENIX_PY} is missing: `bash scripts/setup.sh --test` installs Phoenix for these tests")
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_WORKING_DIR": str(work),
           "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = open(work / "phoenix.log", "wb")
    proc = subprocess.Popen([str(PHOENIX_PY), "-m", "phoenix.server.main", "serve"], stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"Phoenix exited with {proc.returncode}: {(work / 'phoenix.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                pytest.fail("Phoenix did not answer within 180 s")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
