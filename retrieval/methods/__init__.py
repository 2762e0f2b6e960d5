"""The retrieval methods, by name: the registry (registry.py) filled with every method's class."""
from __future__ import annotations

from .base import Method
from .baselines import BM25, Composed, Dense, RRFHybrid
from .context import Context
from .gear import Gear, NaiveGE, SyncGE
from .grasp import Grasp, GraspSinglePass
from .griever import Griever
from .hipporag2 import HippoRAG2, HippoRAG2NoFilter
from .registry import (
    METHODS,
    ORIGINS,
    VARIANTS,
    make_method,
    method_names,
    origin,
    register,
    root_method,
    targets,
    units_of,
    uses_llm,
)
from .sag import Sag

register(BM25, Dense, RRFHybrid, Composed, Griever, NaiveGE, SyncGE, Gear, Sag, Grasp, GraspSinglePass, HippoRAG2,
         HippoRAG2NoFilter)

__all__ = ["METHODS", "ORIGINS", "VARIANTS", "Context", "Method", "make_method", "method_names", "origin",
           "root_method", "targets", "units_of", "uses_llm"]
