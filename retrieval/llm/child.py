"""Entry point of the embedded llama.cpp server's child process: the server, plus a watchdog
that ends it as soon as its parent is gone, and the patches of patches.py (slim prompt-cache
states (slim_state.py); fast grammar sampling; the schema marks; prompt-lookup drafts), each checked
first: a child whose library changed refuses to start and says what changed.

A child started with Popen outlives a parent that is killed (SIGKILL, a crash, or SIGTERM,
which skips atexit handlers), keeping ~2 GB of memory and both cores busy. PR_SET_PDEATHSIG
is not enough either: it fires when the *thread* that started the child exits, and the app
starts the model from a short-lived thread. So the child watches its parent's pid and exits
when it changes (the orphan is re-parented). ctypes releases the GIL during decoding, so the
watchdog runs even while the model computes.

    python -m retrieval.llm.child PARENT_PID <llama_cpp.server arguments>
"""
from __future__ import annotations

import os
import sys
import threading
import time


def watch(parent: int, every_s: float = 0.5) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(0)  # no cleanup to wait for: the parent that wanted the answers is gone
        time.sleep(every_s)


def main() -> None:
    parent = int(sys.argv[1])
    threading.Thread(target=watch, args=(parent,), daemon=True, name="parent-watchdog").start()
    from . import patches

    try:
        patches.apply()
    except patches.PatchRefused as e:
        # One line the app reads back from the log (backends.py), then the details.
        print(f"hoptrace: {e}", file=sys.stderr, flush=True)
        sys.exit(patches.REFUSED)
    import llama_cpp

    print(f"hoptrace: child {os.getpid()} of {parent}: llama-cpp-python {llama_cpp.__version__}, "
          f"patches in place: {', '.join(n for n, on in patches.active().items() if on)}", file=sys.stderr, flush=True)
    from llama_cpp.server.__main__ import main as serve  # after patches: it imports create_app by name

    sys.argv = ["llama_cpp.server", *sys.argv[2:]]
    serve()


if __name__ == "__main__":
    main()
