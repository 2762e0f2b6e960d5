"""Money as HopTrace prints it: dollars with enough digits to tell small costs apart, and a
price nobody knows said in words, never as $0."""
from __future__ import annotations

from typing import Optional

UNKNOWN = "price unknown"
EMBEDDED = "embedded"


def usd_text(usd: Optional[float]) -> str:
    """$0.0123, $0.00045, $4.5e-06; "price unknown" for None."""
    if usd is None:
        return UNKNOWN
    if usd == 0:
        return "$0"
    if usd >= 0.01:
        return f"${usd:.4f}"
    return f"${usd:.5f}" if usd >= 1e-4 else f"${usd:.2g}"


def cost_text(cost: Optional[dict]) -> str:
    """A run's recorded cost (RunResult.cost) in a few words; "" when none was recorded."""
    if not cost:
        return ""
    if cost.get("usd") is None:
        return UNKNOWN + (f" ({cost['model']})" if cost.get("model") else "")
    if cost.get("source") == EMBEDDED:
        cpu = cost.get("cpu_s")
        return "$0, embedded model" + (f" · {cpu:.1f} CPU s" if cpu is not None else "")
    return usd_text(cost["usd"])
