"""The method picker's groups: by paper, the ablations folded under their method, each with the
paper tables it reproduces and its expected time a question on this kind of machine."""
from __future__ import annotations

from dataclasses import dataclass

from retrieval.methods import root_method, uses_llm


@dataclass(frozen=True)
class Group:
    title: str
    tables: str
    methods: tuple[str, ...]
    ablations: tuple[str, ...] = ()


GROUPS = (
    Group("Baselines", "first-stage retrievers", ("bm25", "dense", "rrf_hybrid", "composed")),
    Group("GRIEVER", "Tables 1, 3, 4", ("griever",),
          ("griever_path_ranking", "griever_full_triples", "griever_no_shortlist", "griever_rrf_first")),
    Group("GEAR", "Tables 2, 4", ("gear", "syncge", "naivege"), ("syncge_no_diversity", "gear_griever")),
    Group("SAG", "Tables 4, 6, 7", ("sag",), ("sag_h0", "sag_no_rerank")),
    Group("GRASP", "Table 2, A.1.7", ("grasp",),
          ("grasp_no_selection", "grasp_uniform", "grasp_single_pass", "grasp_single_pass_uniform")),
    # The baseline SAG (Table 2) and GRASP (Table 2) measure themselves against.
    Group("HippoRAG 2", "baseline of SAG Table 2, GRASP Table 2", ("hipporag2", "hipporag2_nofilter"),
          ("hipporag2_no_passage_node",)),
)

# p50 seconds a question on the demo KB, 2 CPU cores. LLM-free methods: what one click costs,
# which is what a column shows (docs/measurements/app-latency.md): `HOPTRACE_LLM=none hoptrace bench
# --kb demo --ks 5 --pause-ms 500 --methods …`, all 100 questions, 2026-11-24 evening. Back to
# back, without the pause, they run 1.5-3x faster (bm25 0.6, dense 3.2, griever 16.8 ms).
EXPECTED_S = {
    "bm25": 0.0011, "dense": 0.0060, "rrf_hybrid": 0.0069, "composed": 0.0068, "griever": 0.0270,
    "griever_path_ranking": 0.0248,  # the same work as griever; only the final sort differs
    "griever_full_triples": 0.0230, "griever_no_shortlist": 0.0224, "griever_rrf_first": 0.0269, "naivege": 0.0185,
    "grasp_single_pass": 0.0158, "grasp_single_pass_uniform": 0.0169,  # demo with verbalised OpenIE propositions
    # 2026-12-07 on an AVX-512 EPYC (2 cores), same command; griever read 0.019 there in the same sitting
    "hipporag2_nofilter": 0.036,
}
# LLM methods: retrieval p50 on the first 50 demo questions with the embedded Qwen2.5-Coder-1.5B,
# local profile, LLM cache off (`hoptrace bench --limit 50`; docs/profiles.md), as (fast, slow):
# the same code measured up to ~1.8x apart in different sittings of the same 2-core machine
# (2026-11-24 and 2026-11-23), so one figure would promise more than it can. SyncGE at k = 5;
# GRASP's includes its own answer synthesis. A single figure is one (fast) sitting's, 2026-11-24:
# `hoptrace bench --kb demo --methods sag_no_rerank,sag_h0,syncge_no_diversity --ks 5 --limit 50`.
# GRASP's fast figure is 2026-11-25's, with the DONE early stop (docs/profiles.md); its slow one
# is still 2026-11-23's, taken before it (~7 % fewer tokens written since).
EXPECTED_EMBEDDED_S: dict[str, float | tuple[float, float]] = {
    "gear": (17.0, 24.0), "sag": (10.0, 20.0), "syncge": (8.0, 13.0), "grasp": (38.0, 57.0),
    "sag_no_rerank": 2.3, "sag_h0": 5.7, "syncge_no_diversity": 6.8,
    # its one recognition-memory call; `hoptrace bench --kb demo` p50 over 100 questions, 2026-12-07, AVX-512 EPYC
    "hipporag2": 1.1}


def expected(name: str, llm: str) -> str:
    """'~100 ms', '~10–20 s' (embedded LLM: a fast and a slow sitting), or what happens with no
    LLM; llm is the backend (none | local | openai), since an endpoint's speed is its own."""
    if not uses_llm(name):
        s = EXPECTED_S.get(name)
    elif llm == "none":
        return {"gear": "runs as NaiveGE without an LLM",
                "hipporag2": "runs without recognition memory without an LLM"}.get(root_method(name), "needs an LLM")
    elif llm == "local":
        s = EXPECTED_EMBEDDED_S.get(name)
        if isinstance(s, tuple):
            return f"~{s[0]:.0f}–{s[1]:.0f} s"
    else:
        return "time set by the endpoint"
    if s is None:
        return "time not measured"
    return f"~{s * 1000:.0f} ms" if s < 1 else f"~{s:.0f} s"


def group_info(names: tuple[str, ...], llm: str) -> str:
    return " · ".join(f"{n} {expected(n, llm)}" for n in names)


def all_grouped() -> list[str]:
    return [m for g in GROUPS for m in (*g.methods, *g.ablations)]


def paper_order(runs: dict) -> dict:
    """A request's runs with the papers' methods first, in the picker's order (GRIEVER, GEAR, SAG,
    GRASP, their variants), then the baselines and anything else as they came: the hop maps and
    columns open on the methods whose hops there are to watch. A key may carry a run id
    ("griever [1a2b3c]", the Traces tab's)."""
    order = [m for g in GROUPS[1:] for m in (*g.methods, *g.ablations)]
    rank = {m: i for i, m in enumerate(order)}
    return dict(sorted(runs.items(), key=lambda kv: rank.get(kv[0].split(" [")[0], len(order))))
