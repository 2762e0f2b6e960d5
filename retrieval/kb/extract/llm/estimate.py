"""`hoptrace build --extractor llm --estimate`: requests and tokens before any LLM call.

Input tokens are counted on the exact requests the build would send (with the embedded
model's own tokenizer; for HTTP endpoints, ~4 characters a token). Output tokens follow
each task's size model, fitted on a real build (tasks.py). Only passages the KB does not
hold yet are counted, so the estimate of an append is the cost of the append.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ....llm import LLMSettings
from ....records import Passage
from .tasks import TASKS

# Chat-template tokens around each message (<|im_start|>role … <|im_end|>) and the reply's opener.
PER_MESSAGE = 5
PER_REQUEST = 3
# Measured on this project's 2-core machines with Qwen2.5-Coder-1.5B Q4_K_M (README, "LLM").
LOCAL_PROMPT_TOK_S = 60.0
LOCAL_GEN_TOK_S = 22.0


@dataclass
class LayerEstimate:
    layer: str
    paper: str
    passages: int
    requests: int
    batch_size: int
    tokens_in: int
    tokens_out: int


@dataclass
class Estimate:
    model: str
    counter: str
    rows: list[LayerEstimate] = field(default_factory=list)
    already_done: dict[str, int] = field(default_factory=dict)
    price_in: Optional[float] = None   # per million tokens
    price_out: Optional[float] = None
    local: bool = False

    @property
    def tokens_in(self) -> int:
        return sum(r.tokens_in for r in self.rows)

    @property
    def tokens_out(self) -> int:
        return sum(r.tokens_out for r in self.rows)

    @property
    def requests(self) -> int:
        return sum(r.requests for r in self.rows)

    def cost(self) -> Optional[float]:
        if self.price_in is None and self.price_out is None:
            return None
        return (self.tokens_in * (self.price_in or 0) + self.tokens_out * (self.price_out or 0)) / 1e6

    def local_hours(self) -> float:
        return (self.tokens_in / LOCAL_PROMPT_TOK_S + self.tokens_out / LOCAL_GEN_TOK_S) / 3600

    def as_dict(self) -> dict:
        return {"model": self.model, "token_counter": self.counter, "requests": self.requests,
                "tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "cost": self.cost(),
                "layers": [r.__dict__ for r in self.rows], "already_extracted": self.already_done}

    def render(self) -> str:
        lines = [f"LLM extraction estimate · model {self.model} · tokens counted with {self.counter}",
                 f"{'layer':<13} {'source':<18} {'passages':>8} {'requests':>8} {'batch':>5} "
                 f"{'input tok':>11} {'output tok':>11}"]
        for r in self.rows:
            lines.append(f"{r.layer:<13} {r.paper:<18} {r.passages:>8,} {r.requests:>8,} {r.batch_size:>5} "
                         f"{r.tokens_in:>11,} {r.tokens_out:>11,}")
        lines.append(f"{'total':<13} {'':<18} {'':>8} {self.requests:>8,} {'':>5} {self.tokens_in:>11,} "
                     f"{self.tokens_out:>11,}")
        skipped = {k: v for k, v in self.already_done.items() if v}
        if skipped:
            lines.append("already extracted in the KB (not counted): "
                         + ", ".join(f"{k} {v:,}" for k, v in skipped.items()))
        cost = self.cost()
        if cost is not None:
            lines.append(f"cost at ${self.price_in or 0:g} / ${self.price_out or 0:g} per million input / output "
                         f"tokens: ${cost:,.2f}")
        else:
            lines.append("cost: pass --price-in and --price-out (dollars per million tokens) to price it")
        if self.local:
            lines.append(f"embedded model on 2 cores (~{LOCAL_PROMPT_TOK_S:g} tok/s prompt, ~{LOCAL_GEN_TOK_S:g} tok/s "
                         f"generation): ~{self.local_hours():,.1f} hours")
        lines.append("output tokens are a forecast from each task's size model; repairs and retries add to all figures")
        return "\n".join(lines)


def token_counter(settings: LLMSettings) -> tuple[Callable[[str], int], str]:
    """The embedded model's tokenizer (vocabulary only, no weights loaded), else ~4 chars a token."""
    if settings.backend == "local":
        from ....llm.models import gguf_token_counter, model_file

        return gguf_token_counter(model_file(settings.model)), f"the {settings.model} tokenizer"
    return (lambda text: max(1, len(text) // 4)), "~4 characters per token (no tokenizer for a remote model)"


def estimate(passages: list[Passage], layers: list[str], settings: LLMSettings,
             batch_size: Optional[int] = None, already_done: Optional[dict[str, set[str]]] = None,
             price_in: Optional[float] = None, price_out: Optional[float] = None,
             counter: Optional[tuple[Callable[[str], int], str]] = None) -> Estimate:
    count, label = counter or token_counter(settings)
    memo: dict[str, int] = {}

    def tokens(text: str) -> int:  # the system prompt and examples repeat in every request
        if text not in memo:
            memo[text] = count(text)
        return memo[text]

    est = Estimate(settings.model, label, price_in=price_in, price_out=price_out, local=settings.backend == "local")
    for layer in layers:
        task = TASKS[layer]
        done = (already_done or {}).get(layer, set())
        todo = [p for p in passages if p.id not in done]
        est.already_done[layer] = len(passages) - len(todo)
        size = max(1, batch_size or task.batch_size) if layer == "propositions" else task.batch_size
        t_in = t_out = requests = 0
        for i in range(0, len(todo), size):
            batch = todo[i:i + size]
            msgs = task.messages(batch)
            t_in += PER_REQUEST + sum(PER_MESSAGE + tokens(m["content"]) for m in msgs)
            t_out += round(sum(task.out_tokens(tokens(p.text)) for p in batch))
            requests += 1
        est.rows.append(LayerEstimate(layer, task.paper, len(todo), requests, size, t_in, t_out))
    return est
