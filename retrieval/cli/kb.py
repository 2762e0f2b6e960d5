"""`hoptrace kb info`: a KB's counts, extraction per layer and LLM cost."""
from __future__ import annotations

import json


def add_parsers(sub) -> None:
    kb = sub.add_parser("kb", help="inspect a KB")
    kb_sub = kb.add_subparsers(dest="kb_command", required=True)
    info = kb_sub.add_parser("info", help="counts, extraction per layer (with failure reasons), LLM extraction cost")
    info.add_argument("kb")
    info.add_argument("--json", action="store_true", help="everything, including all metadata, as JSON")


def cmd_kb(args) -> int:
    from ..corpus.collection import ids_kind
    from ..store import open_store

    store = open_store(args.kb)
    info = store.info()
    ids = ids_kind(store.all_passage_ids())
    if args.json:
        print(json.dumps({"backend": info.backend, "location": info.location, "embed_model": info.embed_model,
                          "embed_dim": info.embed_dim, "counts": info.counts, "extraction": info.extraction,
                          "passage_ids": ids, "meta": info.meta}, indent=1))
        return 0
    print(render_kb_info(info))
    print(f"passage ids: {ids}")
    print(render_served(store))
    return 0


def render_served(store) -> str:
    """Which units this KB holds whole, the methods they serve, and what each of the others lacks
    (methods/layers.py), or, while a build makes it, when each will be ready."""
    from ..kb.readiness import EMBEDDED_LAYERS, vectors
    from ..methods import targets
    from ..methods.layers import LAYERS, building, held, missing

    info = store.info()
    whole = getattr(store, "whole_units", lambda: None)()
    have = held(info) if whole is None else whole
    status = building(store)
    ready, not_ready = [], []
    for name, units in targets().items():
        lacks = missing(store, units)
        if not lacks:
            ready.append(name)
        else:
            not_ready.append(f"{name} ({status.state(name)})" if status is not None
                             else f"{name} (needs {', '.join(lacks)})")
    lines = ["layers: " + ", ".join(f"{layer} {'✓' if layer in have else '—'}" for layer in LAYERS)
             + " (— : empty or not built)"]
    if whole is not None:
        lines.append("vectors: " + ", ".join(f"{layer} {'✓' if vectors(layer) in whole else '—'}"
                                             for layer in EMBEDDED_LAYERS))
    lines.append("serves: " + (", ".join(ready) or "no method"))
    if not_ready:
        lines.append(("building: " if status is not None else "not served: ") + "; ".join(not_ready))
    return "\n".join(lines)


def render_kb_info(info) -> str:
    """`hoptrace kb info`: what the KB holds, who extracted it, what failed and what the LLM cost."""
    lines = [f"{info.meta.get('name', '?')} · {info.backend} · {info.location}",
             f"embedder: {info.embed_model} ({info.embed_dim}-d), vectors from the "
             f"{info.meta.get('embed_precision', 'fp32')} encoder on "
             f"{info.meta.get('embed_device') or 'cpu (built before devices were recorded)'}",
             "counts: " + ", ".join(f"{k} {v:,}" for k, v in info.counts.items())]
    if info.extraction:
        lines.append("extraction (passages per layer):")
        for row in info.extraction:
            lines.append(f"  {row['layer']:<13} {row['extractor']:<32} {row['status']:<6} {row['passages']:>7,}")
            lines.extend(f"      reason: {r[:200]}" for r in row["reasons"])
    runs = info.meta.get("llm_extraction") or []
    if runs:
        lines.append("LLM extraction runs:")
        for r in runs:
            lines.append(f"  {r['finished']}  {r['layer']:<13} {r['model']} · {r['passages']} passages, {r['calls']} "
                         f"calls ({r['cached_calls']} cached, {r['repairs']} repairs) · {r['tokens_in']:,} tok in / "
                         f"{r['tokens_out']:,} out · {r['seconds']} s · {r['failed']} failed")
        t_in, t_out = sum(r["tokens_in"] for r in runs), sum(r["tokens_out"] for r in runs)
        secs = sum(r["seconds"] for r in runs)
        lines.append(f"  total: {t_in:,} tokens in / {t_out:,} out · {secs / 60:.1f} min")
    last = info.meta.get("last_build")
    if last:
        lines.append(f"last build: {last.get('passages_added', 0)} passages added, {last.get('seconds')} s"
                     + (f", encoder {last['encoder']}" if last.get("encoder") else ""))
    return "\n".join(lines)


COMMANDS = {"kb": cmd_kb}
