"""A retriever of your own: HopTrace traces, benches, judges and compares it beside the paper
methods (`hoptrace bench --plugin examples/my_retriever.py --methods my_retriever,griever`).

This one fuses BM25's and dense retrieval's 50 best by reciprocal rank (RRF, k = 60), a hybrid in
a few lines. `kb` is HopTrace's read-only view of the KB (retrieval/methods/plugins/kbview.py);
you may ignore it and call your own index or service instead.
"""


def retrieve(question, k, kb):
    fused = {}
    for ranking in (kb.bm25(question, 50), kb.dense(question, 50)):    # [(passage id, score)], best first
        for rank, (pid, _) in enumerate(ranking, 1):
            fused[pid] = fused.get(pid, 0.0) + 1 / (60 + rank)
    best = sorted(fused, key=fused.get, reverse=True)[:k]
    return [{"id": pid, "score": fused[pid]} for pid in best]
