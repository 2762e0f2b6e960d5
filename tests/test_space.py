"""What the Space's page and log say: where traces are kept (ui/storage.py) and the public banner's
caps (ui/public.py)."""
from __future__ import annotations

from pathlib import Path

from ui.public import PublicLimits, banner
from ui.storage import trace_location


def test_traces_go_to_persistent_storage_when_it_exists_and_can_be_written(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    path, why, kept, persistent = trace_location({"HOPTRACE_PERSIST_DIR": str(data),
                                                  "HOPTRACE_HOME": str(tmp_path / "home")})
    assert path == data / "hoptrace" / "traces.sqlite" and kept and "kept across restarts" in why and persistent
    assert not list((data / "hoptrace").glob(".probe-*")), "the write probe leaves nothing behind"


def test_a_missing_or_read_only_storage_leaves_traces_in_the_home_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("HOPTRACE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HOPTRACE_TRACES", raising=False)
    path, why, kept, persistent = trace_location({"HOPTRACE_PERSIST_DIR": str(tmp_path / "absent")})
    assert not kept and not persistent and path == tmp_path / "home" / "traces.sqlite"
    assert "lost at a restart" in why and "does not exist" in why
    # A folder nobody can create files in, whatever their uid (root passes permission checks):
    # /proc/1 stands in for a read-only mount.
    path, why, kept, persistent = trace_location({"HOPTRACE_PERSIST_DIR": "/proc/1"})
    assert not kept and not persistent and "is not writable" in why and path == tmp_path / "home" / "traces.sqlite"
    assert Path("/proc/1").is_dir()


def test_hoptrace_traces_wins_and_no_persist_dir_keeps_the_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOPTRACE_HOME", str(tmp_path / "home"))
    assert trace_location({"HOPTRACE_TRACES": str(tmp_path / "t.sqlite"),
                           "HOPTRACE_PERSIST_DIR": str(tmp_path)})[0] == tmp_path / "t.sqlite"
    assert trace_location({})[0] == tmp_path / "home" / "traces.sqlite"


def test_the_public_banner_states_the_configured_caps():
    limits = PublicLimits(enabled=True, max_llm_methods=3, requests_per_minute=9, max_upload_mb=7,
                          max_passages=1234, max_bench_questions=15)
    text = banner(limits, "someone/hoptrace")
    for part in ("**Public demo**", "at most 3 LLM methods a request", "9 requests a minute", "uploads up to 7 MB",
                 "1,234 passages", "benchmarks up to 15 questions",
                 "(https://huggingface.co/spaces/someone/hoptrace/blob/main/README.md)"):
        assert part in text, part
    assert "huggingface.co" not in banner(limits, "<img src=x onerror=alert(1)>")
    assert f"{PublicLimits.from_env(True).requests_per_minute} requests a minute" in banner(PublicLimits.from_env(True))
