"""What the deployment files promise each other: client and server majors, the image's context and settings."""
from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _server_major() -> int:
    compose = (ROOT / "deploy" / "elasticsearch" / "compose.yaml").read_text()
    tag = re.search(r"image:\s*docker\.elastic\.co/elasticsearch/elasticsearch:(\d+)\.", compose)
    assert tag, "compose.yaml names no elasticsearch image"
    return int(tag.group(1))


def test_the_elasticsearch_client_and_the_compose_server_share_a_major():
    server = _server_major()
    pin = re.search(r'"elasticsearch>=(\d+)[^,"]*,<(\d+)"', (ROOT / "pyproject.toml").read_text())
    assert pin, "pyproject.toml must bound the elasticsearch client's major (e.g. >=8.15,<9)"
    low, high = int(pin.group(1)), int(pin.group(2))
    assert low == server and high == server + 1, (
        f"pyproject allows client majors {low}..{high - 1}, the compose server is {server}.x")
    installed = int(version("elasticsearch").split(".")[0])
    assert installed == server, f"installed client {version('elasticsearch')} vs server {server}.x: reinstall"


def test_the_image_leaves_local_state_out_and_runs_public_without_analytics():
    ignored = [x for x in (ROOT / ".dockerignore").read_text().splitlines() if x and not x.startswith("#")]
    assert ".git" in ignored and "**/.venv" in ignored and "**/.venv-*" in ignored  # .venv-phoenix too
    # Docker's syntax: a file pattern without **/ would match at the context's root only.
    for pattern in ("*.sqlite", "*.gguf", "*.pyc", "*.onnx"):
        assert f"**/{pattern}" in ignored, pattern
    docker = (ROOT / "Dockerfile").read_text()
    assert "GRADIO_ANALYTICS_ENABLED=False" in docker and "HOPTRACE_PUBLIC=1" in docker
