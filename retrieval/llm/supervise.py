"""A child that ends with its parent: runs a server program and stops it as soon as the process
that started us is gone, however that one ended (SIGKILL, a crash, or SIGTERM, which skips atexit
handlers). PR_SET_PDEATHSIG fires when the *thread* that started the child exits, and the app
starts the model from short-lived threads, so the parent's pid is watched instead (an orphan is
re-parented). A SIGTERM to this process stops the server too.

    python -m retrieval.llm.supervise PARENT_PID PROGRAM [ARGS...]
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def main() -> int:
    parent = int(sys.argv[1])
    server = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL)

    def stop(*_args) -> None:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(5)
            except subprocess.TimeoutExpired:
                server.kill()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while server.poll() is None:
        if os.getppid() != parent:
            stop()
        time.sleep(0.5)
    return server.returncode


if __name__ == "__main__":
    sys.exit(main())
