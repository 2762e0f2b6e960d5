"""`hoptrace soak` end to end, briefly: the app in its own process in public mode behind a
pretend proxy, paced visitors with their own addresses, and the closing figures read from the
real trace file. (The 30-minute run is the command's job, not the suite's.)"""
from __future__ import annotations

import shutil

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
