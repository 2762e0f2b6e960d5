"""ScriptedLLM: a scripted test double of the chat-backend interface (not a model).

It answers each request from a per-purpose queue of canned completions, so an agent's
control flow can be unit-tested step by step. It records every request it was sent.
"""
from __future__ import annotations

from collections import defaultdict, deque

from retrieval.llm import LLM, LLMSettings
from retrieval.llm.backends import RawReply


class ScriptedBackend:
    model = "scripted-test-double"

    def __init__(self, script: dict[str, list[str]]):
        self.script = defaultdict(deque, {k: deque(v) for k, v in script.items()})
        self.requests: list[tuple[str, list[dict]]] = []
        self.sampling: list[tuple[float, int]] = []  # (temperature, seed) of each request

    def describe(self) -> str:
        return "scripted test double"

    def complete(self, messages, *, max_tokens, temperature, seed, schema=None, name=""):
        self.requests.append((name, messages))
        self.sampling.append((temperature, seed))
        purpose = name.replace(" (repair)", "")
        if not self.script[purpose]:
            raise AssertionError(f"the script has no more answers for {purpose!r}")
        text = self.script[purpose].popleft()
        return RawReply(text, len(str(messages)) // 4, len(text) // 4)

    def count_tokens(self, text: str) -> int:
        return len(text) // 4

    def purposes(self) -> list[str]:
        return [n for n, _ in self.requests]


def scripted_llm(script: dict[str, list[str]]) -> tuple[LLM, ScriptedBackend]:
    backend = ScriptedBackend(script)
    return LLM(LLMSettings(backend="openai", model=backend.model, cache=False), backend=backend), backend
