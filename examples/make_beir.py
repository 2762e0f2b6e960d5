"""Write a BEIR folder from the bundled HotpotQA data, in ids of its own ("hp-0000", …), as a
collection made elsewhere would arrive: corpus.jsonl, queries.jsonl, qrels/test.tsv.

    python examples/make_beir.py out/hotpotqa-beir [--questions N]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from retrieval.corpus import load_corpus, load_questions
from retrieval.corpus.datasets import get_dataset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--questions", type=int, default=None, help="the first N questions (default all)")
    args = ap.parse_args()
    ds = get_dataset("hotpotqa")
    passages = load_corpus(ds.corpus)
    questions = load_questions(ds.questions, passages)[: args.questions]
    own = {p.id: f"hp-{i:04d}" for i, p in enumerate(passages)}
    (args.out / "qrels").mkdir(parents=True, exist_ok=True)
    with (args.out / "corpus.jsonl").open("w") as f:
        for p in passages:
            f.write(json.dumps({"_id": own[p.id], "title": p.title, "text": p.text}) + "\n")
    with (args.out / "queries.jsonl").open("w") as f:
        for i, q in enumerate(questions):
            f.write(json.dumps({"_id": f"hq-{i:03d}", "text": q.text, "metadata": {"answers": q.answers}}) + "\n")
    with (args.out / "qrels" / "test.tsv").open("w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for i, q in enumerate(questions):
            for g in q.gold_passage_ids:
                f.write(f"hq-{i:03d}\t{own[g]}\t1\n")
    print(f"wrote {args.out}: {len(passages)} passages, {len(questions)} queries, their qrels")


if __name__ == "__main__":
    main()
