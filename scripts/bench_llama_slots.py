"""Three agents at once against a llama-server, or one after another: does a server with parallel
slots finish several LLM methods sooner than the sum of their work? (docs/hop-maps.md, "Several
LLM methods at once".)

Each agent makes `--calls` schema-bound calls in turn, each prompt carrying its earlier replies,
as GEAR's, SAG's and GRASP's loops do. Agents' prompts differ from their first token on, so no
agent reads another's prompt from the server's cache. Start the server yourself, e.g.

    llama-server -m ~/.cache/hoptrace/models/qwen2.5-coder-1.5b.gguf -t 2 -c 8192 -np 3 --port 8088

then `python scripts/bench_llama_slots.py --url http://127.0.0.1:8088 --together` (all agents at
once) and without `--together` (one after another); run both against the same server, or against
`-np 1` for the one-slot figure. Prints the wall time and the tokens read and written.
"""
from __future__ import annotations

import argparse
import json
import threading
import time
import urllib.request

TOPICS = ["a river that changed its course", "a composer's first opera", "a city's oldest bridge",
          "a film director's home town", "a chemist's rival", "a ship's last voyage"]
SCHEMA = {"type": "object", "properties": {"sub_question": {"type": "string"},
                                           "entities": {"type": "array", "items": {"type": "string"}, "maxItems": 4}},
          "required": ["sub_question", "entities"]}
BACKGROUND = ("You break a multi-hop question into the next sub-question to ask a search engine and the "
              "entities it names. Reply in JSON only. ") * 6


def _call(url: str, messages: list[dict], max_tokens: int) -> dict:
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "seed": 1,
            "response_format": {"type": "json_schema", "json_schema": {"schema": SCHEMA}}}
    req = urllib.request.Request(f"{url}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def agent(url: str, i: int, calls: int, max_tokens: int, usage: list) -> None:
    history = ""
    for step in range(calls):
        q = f"Agent {i}. Question about {TOPICS[i % len(TOPICS)]}: who was involved, and where, and when?"
        msgs = [{"role": "system", "content": f"[{i}] " + BACKGROUND},
                {"role": "user", "content": f"{q}\nEarlier steps:\n{history or '(none)'}\nStep {step + 1}:"}]
        out = _call(url, msgs, max_tokens)
        history += out["choices"][0]["message"]["content"] + "\n"
        usage.append((out["usage"]["prompt_tokens"], out["usage"]["completion_tokens"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8088")
    ap.add_argument("--agents", type=int, default=3)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--together", action="store_true", help="all agents at once (else one after another)")
    a = ap.parse_args()
    usage: list = []
    t0 = time.perf_counter()
    if a.together:
        ts = [threading.Thread(target=agent, args=(a.url, i, a.calls, a.max_tokens, usage)) for i in range(a.agents)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    else:
        for i in range(a.agents):
            agent(a.url, i, a.calls, a.max_tokens, usage)
    wall = time.perf_counter() - t0
    print(f"{'together' if a.together else 'one after another'}: {a.agents} agents x {a.calls} calls in "
          f"{wall:.1f} s; tokens read {sum(u[0] for u in usage)}, written {sum(u[1] for u in usage)}")


if __name__ == "__main__":
    main()
