"""The embedded server's cached prompt states hold no per-token logits (they made a 1 GB cache
grow to ~23 GB), and a state restored from the slim form continues exactly like a fresh run."""
from __future__ import annotations

import pytest
from embedded import TEST_MODEL

from retrieval.llm.backends import server_threads

pytestmark = pytest.mark.slow


def test_a_slim_state_is_small_and_resumes_like_a_fresh_model():
    from llama_cpp import Llama

    from retrieval.llm import patches
    from retrieval.llm.models import model_file

    path = str(model_file(TEST_MODEL))
    fresh = Llama(path, n_ctx=2048, n_threads=server_threads(), verbose=False)
    shared = "Facts: the Marlowe Press was founded in Leeds in 1911 by Ada Quent. " * 6
    p2 = shared + "Question: who founded the Marlowe Press? Answer:"
    want = fresh.create_completion(p2, max_tokens=8, temperature=0)["choices"][0]["text"]
    del fresh

    originals = Llama.save_state, Llama.load_state
    patches.install("slim_states")
    try:
        _resume(Llama, path, shared, p2, want)
    finally:
        Llama.save_state, Llama.load_state = originals


def _resume(Llama, path: str, shared: str, p2: str, want: str) -> None:
    llm = Llama(path, n_ctx=2048, n_threads=server_threads(), verbose=False)
    llm.create_completion(shared + "Question: where was it founded? Answer:", max_tokens=4, temperature=0)
    state = llm.save_state()
    assert state.scores.nbytes == 0 and state.n_tokens > 100
    assert state.llama_state_size < 20 * 2**20  # the KV cells only
    llm.reset()
    llm.create_completion("Something else entirely.", max_tokens=2, temperature=0)
    llm.load_state(state)
    got = llm.create_completion(p2, max_tokens=8, temperature=0)["choices"][0]["text"]
    assert got == want


def test_the_server_keeps_no_logits_per_prompt_token():
    """With llama-cpp-python's default logits_all=True, the server copied 151,936 floats a prompt
    token into an n_ctx-long array: one 5,339-token prompt grew it from 2.2 to 6.1 GB (2.6 GB
    without). 1,200 prompt tokens would add ~730 MB; the KV cells they fill are ~35 MB."""
    from retrieval.llm import LLMSettings, get_llm

    backend = get_llm(LLMSettings.parse("local", cache=False)).start().backend

    def rss_mb() -> int:
        with open(f"/proc/{backend.proc.pid}/status") as f:
            return int(f.read().split("VmRSS:")[1].split()[0]) // 1024

    before = rss_mb()
    # ~750 prompt tokens: with logits kept they alone would add ~450 MB, past the bound below.
    text = " ".join(f"Town {i} lies on river {i % 7} and has {i * 13} inhabitants." for i in range(50))
    reply = backend.complete([{"role": "user", "content": text + "\nWhich river?"}], max_tokens=2,
                             temperature=0.0, seed=0)
    assert reply.tokens_in > 700
    assert rss_mb() - before < 300, f"server grew {rss_mb() - before} MB for one {reply.tokens_in}-token prompt"
