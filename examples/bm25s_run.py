"""A run made outside HopTrace: bm25s over a BEIR folder, written as TREC in the collection's
own ids, and its recall@k computed here from the folder's qrels, for checking against
`hoptrace compare` once the run is imported.

    python examples/bm25s_run.py out/hotpotqa-beir out/bm25s.trec [--k 15] [--split test]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import bm25s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--k", type=int, default=15)
    ap.add_argument("--split", default="test")
    args = ap.parse_args()
    docs = [json.loads(line) for line in (args.folder / "corpus.jsonl").open()]
    queries = {(q := json.loads(line))["_id"]: q["text"] for line in (args.folder / "queries.jsonl").open()}
    gold: dict[str, set[str]] = {}
    for line in list((args.folder / "qrels" / f"{args.split}.tsv").open())[1:]:
        qid, pid, grade = line.split()
        if int(grade) >= 1:
            gold.setdefault(qid, set()).add(pid)
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([f"{d.get('title', '')} {d['text']}" for d in docs], stopwords="en",
                                   show_progress=False), show_progress=False)
    qids = [q for q in queries if q in gold]
    hits, scores = retriever.retrieve(bm25s.tokenize([queries[q] for q in qids], stopwords="en",
                                                     show_progress=False), k=args.k, show_progress=False)
    recall = {5: 0.0, args.k: 0.0}
    with args.out.open("w") as f:
        for qid, row, srow in zip(qids, hits, scores):
            ids = [docs[int(i)]["_id"] for i in row]
            for rank, (pid, s) in enumerate(zip(ids, srow), 1):
                f.write(f"{qid} Q0 {pid} {rank} {float(s):.4f} bm25s\n")
            for k in recall:
                recall[k] += len(gold[qid] & set(ids[:k])) / len(gold[qid]) / len(qids)
    print(f"wrote {args.out}: {len(qids)} queries · computed here: "
          + " · ".join(f"recall@{k} {v:.4f}" for k, v in sorted(recall.items())))


if __name__ == "__main__":
    main()
