"""`hoptrace soak` end to end, briefly: the app in its own process in public mode behind a
pretend proxy, paced visitors with their own addresses, and the closing figures read from the
real trace file. (The 30-minute run is the command's job, not the suite's.)"""
from __future__ import annotations

import os
import shutil
import socket

import pytest

from appbench import page
from retrieval.core.errors import ConfigError
from retrieval.core.paths import kb_dir


def test_a_short_soak_reports_no_error_no_lost_or_mixed_trace(small_kb):
    from appbench.soak import soak

    demo = kb_dir() / "demo.sqlite"
    if not demo.exists():
        shutil.copyfile(small_kb, demo)
    res = soak(minutes=0.2, users=3, llm_users=0, llm="none", cap_mb=20)
    assert res["errors"] == 0 and res["refused"] == 0, res
    assert res["answered"] >= 3 and res["lost"] == 0 and res["mixed_runs"] == 0
    assert res["sessions_missing_runs"] == 0 and res["db_under_cap"]
    assert res["fast_p50_by_window"] and res["app_mb_end"] > 0


# A stand-in for app.py (spawn_app runs `python APP_DIR/app.py`): it exits as Gradio's launch does
# when its port is taken, or with another error, or serves the page.
_STAND_IN = '''
import http.server, os, socket, sys
port = int(os.environ["GRADIO_SERVER_PORT"])
if os.environ.get("STAND_IN_FAILS"):
    sys.exit("ValueError: no KB named 'nowhere'")
try:
    server = http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler)
except OSError:
    sys.exit(f"OSError: Cannot find empty port in range: {port}-{port}.")
server.serve_forever()
'''


def test_an_app_whose_port_was_taken_starts_again_on_another_and_a_failed_start_quotes_its_log(tmp_path,
                                                                                                monkeypatch):
    (tmp_path / "app.py").write_text(_STAND_IN)
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    ports = iter([held.getsockname()[1]])
    real = page.free_port
    monkeypatch.setattr(page, "free_port", lambda: next(ports, None) or real())
    proc, url, _ = page.spawn_app(dict(os.environ), tmp_path / "app.log", app_dir=tmp_path, timeout_s=30)
    try:
        assert url != f"http://127.0.0.1:{held.getsockname()[1]}/"
    finally:
        page.stop(proc)
        held.close()
    assert proc.returncode is not None
    with pytest.raises(ConfigError, match=r"exited during start-up \(exit 1\); its log .* no KB named 'nowhere'"):
        page.spawn_app(dict(os.environ, STAND_IN_FAILS="1"), tmp_path / "app.log", app_dir=tmp_path, timeout_s=30)
