"""The CPU this process runs on. The embedded model is built for the CPU it is set up on
(scripts/build_llama_server.sh), so its speed and how its greedy replies round at near-ties
belong to this CPU (docs/profiles.md)."""
from __future__ import annotations

import functools
import os
import platform


@functools.lru_cache(maxsize=1)   # every run is stamped with it: read /proc/cpuinfo once
def _cpuinfo() -> tuple[str, frozenset]:
    """The first processor's model name and flags from /proc/cpuinfo ("" and none elsewhere)."""
    model, flags = "", None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name.strip() == "model name" and not model:
                    model = value.strip()
                elif name.strip() == "flags" and flags is None:
                    flags = frozenset(value.split())
                if model and flags is not None:
                    break
    except OSError:
        pass
    return model, flags or frozenset()


def describe() -> str:
    """Model, cores and widest vector unit, e.g. 'AMD EPYC · 2 cores · avx2'."""
    model, have = _cpuinfo()
    units = [u for u in ("amx_tile", "avx512_bf16", "avx512f", "avx2") if u in have]
    return " · ".join(x for x in (model or platform.processor() or platform.machine(),
                                  f"{os.cpu_count()} cores", units[0] if units else "") if x)
