"""`hoptrace build --extractor llm --estimate`: requests and tokens before any LLM call.

Input tokens are counted on the exact requests the build would send (with the embedded
model's own tokenizer; for HTTP endpoints, ~4 characters a token). Output tokens follow
each task's size model, fitted on a real build (tasks.py). Only passages the KB does not
hold yet are counted, so the estimate of an append is the cost of the append.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ....core.records import Passage
from ....llm import LLMSettings
from .tasks import JOINT, TASKS

# Chat-template tokens around each message (<|im_start|>role … <|im_end|>) and the reply's opener.
PER_MESSAGE = 5
PER_REQUEST = 3
# Measured on this project's 2-core machines with Qwen2.5-Coder-1.5B Q4_K_M (docs/usage.md, "The LLM").
# Machines differ (one 2-core machine ran the same model at ~35 / ~13 tok/s), so after each
# embedded build the measured speed is kept (calibrate) and later estimates use it.
LOCAL_PROMPT_TOK_S = 60.0
LOCAL_GEN_TOK_S = 22.0
SPEED_FILE = "llm_speed.json"


def _speed_path():
    from ....core.paths import home

    return home() / SPEED_FILE


def local_speed(model: str) -> tuple[float, float, Optional[dict]]:
    """(prompt tok/s, generation tok/s, the calibration they come from or None for the defaults)."""
    import json

    try:
        cal = json.loads(_speed_path().read_text()).get(model)
    except (OSError, ValueError):
        cal = None
    if not cal or not cal.get("factor"):
        return LOCAL_PROMPT_TOK_S, LOCAL_GEN_TOK_S, None
    return LOCAL_PROMPT_TOK_S / cal["factor"], LOCAL_GEN_TOK_S / cal["factor"], cal


def calibrate(model: str, forecast: "Estimate", runs: list[dict]) -> dict:
    """Keep how much slower (or faster) than the default rates this machine ran a real build,
    and how far each task's size model missed the output this model wrote.

    `forecast` is the estimate of the passages the runs extracted; the runs' own token counts
    replace its forecasts (repairs add prompt tokens, the size model guesses the output), so
    `factor` measures speed only (the two rates keep the defaults' ratio). `out_factor` is,
    per task, measured output tokens over the size model's unscaled forecast: the 20-passage
    one-read build of 2026-11-24 wrote 32 % more than the size model said, which alone put the
    time estimate 25 % low."""
    import json
    import time

    run = {k: sum(r[k] for r in runs) for k in ("passages", "tokens_in", "tokens_out", "seconds")}
    processed = forecast.tokens_processed + max(0, run["tokens_in"] - forecast.tokens_in)
    modelled = processed / LOCAL_PROMPT_TOK_S + run["tokens_out"] / LOCAL_GEN_TOK_S
    path = _speed_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    out_factor = dict((data.get(model) or {}).get("out_factor") or {})
    for row in forecast.rows:
        measured = sum(r["tokens_out"] for r in runs if r.get("layer") == row.layer)
        if measured and row.tokens_out:
            out_factor[row.layer] = round(measured / (row.tokens_out / row.out_factor), 3)
    cal = {"factor": round(run["seconds"] / modelled, 3) if modelled else 1.0, "measured": time.strftime("%Y-%m-%d"),
           "passages": run["passages"], "seconds": run["seconds"], "tokens_processed": processed,
           "tokens_out": run["tokens_out"], "out_factor": out_factor}
    data[model] = cal
    path.write_text(json.dumps(data, indent=1))
    return cal


@dataclass
class LayerEstimate:
    layer: str
    paper: str
    passages: int
    requests: int
    batch_size: int
    tokens_in: int
    tokens_out: int
    # Prompt tokens the embedded model actually processes: llama.cpp keeps the previous
    # request's KV cache, so the unchanging prefix (instructions, demonstration) of a run of
    # one task's requests is processed once and each request adds only its passages.
    tokens_processed: int = 0
    # What the size model's forecast was multiplied by: this model's measured output over the
    # forecast in the last embedded build (calibrate), 1.0 until one has run.
    out_factor: float = 1.0


@dataclass
class Estimate:
    model: str
    counter: str
    rows: list[LayerEstimate] = field(default_factory=list)
    already_done: dict[str, int] = field(default_factory=dict)
    price_in: Optional[float] = None   # per million tokens
    price_out: Optional[float] = None
    price_source: str = "--price-in / --price-out"   # or genai-prices, a price file, embedded
    local: bool = False
    prompt_tok_s: float = LOCAL_PROMPT_TOK_S
    gen_tok_s: float = LOCAL_GEN_TOK_S
    calibration: Optional[dict] = None

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

    @property
    def tokens_processed(self) -> int:
        return sum(r.tokens_processed for r in self.rows)

    def local_hours(self) -> float:
        return (self.tokens_processed / self.prompt_tok_s + self.tokens_out / self.gen_tok_s) / 3600

    def as_dict(self) -> dict:
        return {"model": self.model, "token_counter": self.counter, "requests": self.requests,
                "tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "cost": self.cost(),
                "price_source": self.price_source if self.cost() is not None else None,
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
        if cost is not None and self.price_source == "embedded":
            lines.append("cost: $0 (the embedded model runs on this machine: its time is below)")
        elif cost is not None:
            lines.append(f"cost at ${self.price_in or 0:g} / ${self.price_out or 0:g} per million input / output "
                         f"tokens ({self.price_source}): ${cost:,.2f}")
        else:
            lines.append(f"cost: price unknown for {self.model} (not in genai-prices): pass --price-in and --price-out "
                         "(dollars per million tokens) or a price file (HOPTRACE_PRICES) to price it")
        if self.local:
            n = max([1] + [r.passages for r in self.rows])  # each row covers the same passages
            cal = self.calibration
            where = (f"as measured on this machine by the build of {cal['measured']} ({cal['passages']} passages)"
                     if cal else "the default rates; a build on this machine calibrates them")
            lines.append(f"embedded model: ~{self.prompt_tok_s:.0f} tok/s prompt on the {self.tokens_processed:,} "
                         f"tokens not in llama.cpp's cached prefix, ~{self.gen_tok_s:.0f} tok/s generation ({where}): "
                         f"~{self.local_hours():,.2f} hours, ~{self.local_hours() * 3600 / n:,.1f} s a passage")
        scaled = [f"{r.layer} x{r.out_factor:g}" for r in self.rows if r.out_factor != 1.0]
        lines.append("output tokens are a forecast from each task's size model"
                     + (f" scaled as this model's last build here measured ({', '.join(scaled)})" if scaled else "")
                     + "; repairs and retries add to all figures")
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
             counter: Optional[tuple[Callable[[str], int], str]] = None, reads: str = "per-layer") -> Estimate:
    count, label = counter or token_counter(settings)
    memo: dict[str, int] = {}

    def tokens(text: str) -> int:  # the system prompt and examples repeat in every request
        if text not in memo:
            memo[text] = count(text)
        return memo[text]

    est = Estimate(settings.model, label, price_in=price_in, price_out=price_out, local=settings.backend == "local")
    if price_in is None and price_out is None:
        # No price given: the one the bench uses (a price file, genai-prices; the embedded model $0).
        from ....llm.prices import price_for

        known = price_for(settings.model, settings.backend)
        if known is not None:
            est.price_in, est.price_out, est.price_source = known.input_per_mtok, known.output_per_mtok, known.source
    if est.local:
        est.prompt_tok_s, est.gen_tok_s, est.calibration = local_speed(settings.speed_key)
    # The same grouping as llm_extractors: one joint task for several layers read at once.
    groups = ([(JOINT, sorted(layers))] if reads == "one" and len(layers) > 1
              else [(TASKS[layer], [layer]) for layer in layers])
    for task, its_layers in groups:
        done = (already_done or {}).get(its_layers[0], set())  # the build's own test (build._extract)
        todo = [p for p in passages if p.id not in done]
        for layer in its_layers:
            est.already_done[layer] = len(passages) - len(todo)
        size = max(1, batch_size or task.batch_size) if task.layer == "propositions" else task.batch_size
        out_factor = ((est.calibration or {}).get("out_factor") or {}).get(task.layer, 1.0)
        t_in = t_out = requests = processed = 0
        for i in range(0, len(todo), size):
            batch = todo[i:i + size]
            msgs = task.messages(batch)
            per_msg = [PER_MESSAGE + tokens(m["content"]) for m in msgs]
            t_in += PER_REQUEST + sum(per_msg)
            processed += PER_REQUEST + (sum(per_msg) if requests == 0 else per_msg[-1])
            t_out += round(out_factor * sum(task.out_tokens(tokens(p.text)) for p in batch))
            requests += 1
        est.rows.append(LayerEstimate(task.layer, task.paper, len(todo), requests, size, t_in, t_out, processed,
                                      out_factor))
    return est
