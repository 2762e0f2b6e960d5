"""Greedy grammar sampling that asks the grammar about the model's first choice before
filtering the whole vocabulary writes exactly what the library's own chain writes."""
from __future__ import annotations

import json

import pytest
from embedded import TEST_MODEL

pytestmark = pytest.mark.slow

# Two triples, though the prompt asks four: the grammar closes the array after two, so every rule
# (object, array, string, the close) still runs on both samplers, in ~40 tokens a call where four
# triples took ~90 (issue 72: the suite's time).
SCHEMA = {"type": "object", "required": ["triples"], "properties": {"triples": {
    "type": "array", "maxItems": 2,
    "items": {"type": "array", "minItems": 3, "maxItems": 3, "items": {"type": "string", "maxLength": 40}}}}}


def test_fast_grammar_sampling_writes_what_the_full_check_writes():
    from llama_cpp import Llama, LlamaGrammar

    from retrieval.llm import patches
    from retrieval.llm.backends import chatml, server_threads
    from retrieval.llm.models import model_file

    original = Llama._init_sampler
    llm = Llama(str(model_file(TEST_MODEL)), n_ctx=1024, n_threads=server_threads(), verbose=False)
    grammar = LlamaGrammar.from_json_schema(json.dumps(SCHEMA), verbose=False)
    prompt = chatml([{"role": "user", "content":
                      'Give 4 facts about Lyon as JSON {"triples": [[subject, predicate, object], ...]}.'}])

    def write(max_tokens: int = 64, **kw) -> str:
        llm.reset()  # same prompt evaluation every time: cached prefixes change the last logits' rounding
        return llm.create_completion(prompt, max_tokens=max_tokens, temperature=0.0, **kw)["choices"][0]["text"]

    # Unconstrained, the model opens with a code fence, which the grammar forbids: the
    # fallback that filters the whole vocabulary runs too, not only the fast path.
    assert write(max_tokens=6).lstrip().startswith("```")   # its opening is all this needs
    full = {rp: write(grammar=grammar, repeat_penalty=rp) for rp in (1.0, 1.1)}
    try:
        patches.install("fast_sampler")
        assert Llama._init_sampler is not original
        fast = {rp: write(grammar=grammar, repeat_penalty=rp) for rp in (1.0, 1.1)}
        # Temperature > 0 keeps the library's chain.
        assert type(llm._init_sampler(temp=0.7, grammar=grammar)).__name__ == "LlamaSampler"
    finally:
        Llama._init_sampler = original
    for rp in (1.0, 1.1):
        assert json.loads(full[rp])["triples"], full[rp]
        assert fast[rp] == full[rp]
