"""The embedded server's cached prompt states hold no per-token logits (they made a 1 GB cache
grow to ~23 GB), and a state restored from the slim form continues exactly like a fresh run."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_a_slim_state_is_small_and_resumes_like_a_fresh_model():
    from llama_cpp import Llama

    from retrieval.llm.child import slim_prompt_states
    from retrieval.llm.models import model_file

    path = str(model_file())
    fresh = Llama(path, n_ctx=2048, n_threads=2, verbose=False)
    shared = "Facts: the Marlowe Press was founded in Leeds in 1911 by Ada Quent. " * 6
    p2 = shared + "Question: who founded the Marlowe Press? Answer:"
    want = fresh.create_completion(p2, max_tokens=8, temperature=0)["choices"][0]["text"]
    del fresh

    originals = Llama.save_state, Llama.load_state
    slim_prompt_states()
    try:
        _resume(Llama, path, shared, p2, want)
    finally:
        Llama.save_state, Llama.load_state = originals


def _resume(Llama, path: str, shared: str, p2: str, want: str) -> None:
    llm = Llama(path, n_ctx=2048, n_threads=2, verbose=False)
    llm.create_completion(shared + "Question: where was it founded? Answer:", max_tokens=4, temperature=0)
    state = llm.save_state()
    assert state.scores.nbytes == 0 and state.n_tokens > 100
    assert state.llama_state_size < 20 * 2**20  # the KV cells only
    llm.reset()
    llm.create_completion("Something else entirely.", max_tokens=2, temperature=0)
    llm.load_state(state)
    got = llm.create_completion(p2, max_tokens=8, temperature=0)["choices"][0]["text"]
    assert got == want
