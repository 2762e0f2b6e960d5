"""A free local TCP port, for the servers HopTrace starts (the app, the embedded model's child,
the benchmarks' and tests' servers)."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now. Another process may take it before the caller binds it:
    callers that bind later retry on a new one (appbench/page.spawn_app, LlamaServer.start)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
