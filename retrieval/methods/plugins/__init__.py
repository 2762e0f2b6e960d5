"""A user's own retrievers beside the papers': a Python file or module, an installed package's
entry point, or an HTTP endpoint (loader.py), each traced, benched, judged and compared like
HopTrace's own methods. `kb` (kbview.py) is what a function plugin may read; hits.py maps what it
returns to the KB's passages."""
from __future__ import annotations

from .kbview import KBView
from .loader import load_all, load_and_report, load_endpoint, load_plugin, problems, user_methods

__all__ = ["KBView", "load_all", "load_and_report", "load_endpoint", "load_plugin", "problems", "user_methods"]
