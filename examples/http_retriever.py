"""A retriever behind HTTP, as a team's search service would be: bm25s over a corpus file.

    python examples/http_retriever.py CORPUS.json[.gz] [PORT]
    hoptrace bench --kb demo --method-url svc=http://127.0.0.1:8099/search --methods svc,griever

It answers POST {"question", "k"} with {"hits": [{"title", "text", "score"}], "stages": [...]}.
HopTrace maps each hit to its KB by title, else by text; a hit the KB lacks is counted and named.
"""
import gzip
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import bm25s

path = sys.argv[1]
corpus = json.loads((gzip.open if path.endswith(".gz") else open)(path, "rb").read())
index = bm25s.BM25()
index.index(bm25s.tokenize([f"{d['title']}. {d['text']}" for d in corpus], show_progress=False), show_progress=False)


class Search(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        t0 = time.perf_counter()
        tokens = bm25s.tokenize([body["question"]], show_progress=False)
        t1 = time.perf_counter()
        docs, scores = index.retrieve(tokens, k=min(int(body["k"]), len(corpus)), show_progress=False)
        t2 = time.perf_counter()
        hits = [{"title": corpus[d]["title"], "text": corpus[d]["text"], "score": float(s)}
                for d, s in zip(docs[0], scores[0])]
        stages = [{"name": "tokenize", "ms": (t1 - t0) * 1000, "payload": {"tokens": len(tokens.ids[0])}},
                  {"name": "bm25s", "ms": (t2 - t1) * 1000, "payload": {"hits": len(hits)}}]
        out = json.dumps({"hits": hits, "stages": stages}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 8099), Search).serve_forever()
