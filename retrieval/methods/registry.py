"""Method registry: CLI and UI names → method classes, plus named ablation variants."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Optional

from ..core.errors import ConfigError
from . import profiles
from .base import Method
from .context import Context

# Filled once by the package (methods/__init__.py register), in the order the CLI and the app list
# them. The registry imports no method: GEAR looks others up here to use them as its base.
METHODS: dict[str, type[Method]] = {}
# Where a method came from, for `hoptrace methods` and the app's "Yours" group: built-in methods
# have none; a plugin names its file, module, entry point or endpoint (methods/plugins/).
ORIGINS: dict[str, str] = {}


def register(*classes: type[Method]) -> None:
    METHODS.update({m.name: m for m in classes})


def register_plugin(cls: type[Method], origin: str) -> None:
    """A user's method beside the built-in ones. A name HopTrace already uses is refused, so a
    plugin can never silently replace a paper's method in a comparison."""
    taken = ORIGINS.get(cls.name, "built-in" if cls.name in METHODS or cls.name in VARIANTS else None)
    if taken is not None and taken != origin:
        raise ConfigError(f"method name {cls.name!r} is taken ({taken}); set NAME in the plugin to another name")
    METHODS[cls.name] = cls
    ORIGINS[cls.name] = origin


def origin(name: str) -> str:
    """'built-in', 'variant of griever', or the plugin's origin."""
    if name in ORIGINS:
        return ORIGINS[name]
    return f"variant of {VARIANTS[name][0]}" if name in VARIANTS else "built-in"

# Ablations as names, so `bench --methods` can compare them side by side (GRIEVER Table 3).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "griever_full_triples": ("griever", {"shortlist_index": "triples"}),
    "griever_no_shortlist": ("griever", {"shortlist": False}),
    "griever_rrf_first": ("griever", {"first_retriever": "rrf_hybrid"}),
    # GRIEVER ranked by its §4.4 passage score alone (the paper's final ranking; ours adds the cosine)
    "griever_path_ranking": ("griever", {"final_ranking": "paths"}),
    # GEAR Table 4: beam search without the diversity weight.
    "syncge_no_diversity": ("syncge", {"diversity": False}),
    # GRIEVER Table 4: GEAR with GRIEVER as its base retriever, called with k = 5 (its footnote).
    "gear_griever": ("gear", {"base": "griever", "base_k": 5}),
    # SAG Table 4 (no expansion); and no rerank at all (coarse order), the floor under Table 6's
    # lightweight reranker, whose model has no offline package (docs/sag.md).
    "sag_h0": ("sag", {"hops": 0}),
    "sag_no_rerank": ("sag", {"reranker": "none"}),
    # GRASP A.1.7: no entity selection; uniform weighting instead of RankVote.
    "grasp_no_selection": ("grasp", {"entity_selection": False}),
    "grasp_uniform": ("grasp", {"vote": "uniform"}),
    # GRASP Table 2, standard single-pass setting (no LLM): RankVote vs uniform weighting.
    "grasp_single_pass_uniform": ("grasp_single_pass", {"vote": "uniform"}),
    # HippoRAG 2's "w/o passage node" ablation: PPR reset on the facts' phrases alone, as HippoRAG 1.
    "hipporag2_no_passage_node": ("hipporag2", {"passage_node_weight": 0.0}),
}


# Names that changed, so an old command line gets told the new one instead of "unknown".
RENAMED = {"sag_light": "sag_no_rerank (it keeps the coarse order; it never was a reranker)"}


def root_method(name: str) -> str:
    """The registered method a name runs: itself, or the base of a variant."""
    return VARIANTS[name][0] if name in VARIANTS else name


def uses_llm(name: str) -> bool:
    """Does the method (or the variant's base) call an LLM? Unknown names do not."""
    return getattr(METHODS.get(root_method(name)), "uses_llm", False)


def method_names() -> list[str]:
    return [*METHODS, *VARIANTS]


def make_method(name: str, ctx: Context, profile: Optional[str] = None, **overrides: Any) -> Method:
    """A method by name, configured as profile → variant → overrides (methods/profiles.py)."""
    if name in RENAMED:
        raise ConfigError(f"method {name!r} is now called {RENAMED[name]}")
    if name not in METHODS and name not in VARIANTS:
        raise ConfigError(f"unknown method {name!r}; available: {', '.join(method_names())}")
    root = root_method(name)
    cls = METHODS[root]
    # An LLM-free method with no local value of its own (BM25, dense, ...) has nothing to choose.
    chosen = (profiles.resolve(profile or ctx.profile, ctx.llm, cls.uses_llm)
              if cls.uses_llm or root in profiles.LOCAL else "paper")
    settings = {**profiles.settings_for(root, chosen), **(VARIANTS[name][1] if name in VARIANTS else {}), **overrides}
    method = cls(ctx, **settings)
    method.name = name  # traces and bench rows carry the variant's name
    method.profile = chosen
    method.paper_config = cls.Config()
    return method


def units_of(name: str) -> tuple[str, ...]:
    """The KB units method `name` (a registered method or a variant) reads with its default config
    (methods/layers.py)."""
    cls = METHODS[root_method(name)]
    config = cls.Config()
    if name in VARIANTS:
        config = replace(config, **VARIANTS[name][1])
    return cls.units_for(config)


def targets(names: Optional[Iterable[str]] = None) -> dict[str, tuple[str, ...]]:
    """Method → the units it reads, for a build to serve (retrieval/kb/publish.py): the methods
    named, in that order, or every built-in method in the app's order. An unknown name is refused,
    listing the known ones."""
    if names is None:
        names = [m for m in METHODS if m not in ORIGINS]
    out = {}
    for name in names:
        if root_method(name) not in METHODS:
            raise ConfigError(f"--methods: unknown method {name!r}; known: {', '.join(method_names())}")
        out[name] = units_of(name)
    return out
