"""A minimal page until the full UI lands: ask the demo KB with one method, see the stages.

Every string from a passage, a title or the question is escaped before it reaches HTML.
"""
from __future__ import annotations

import html
import os
from typing import Iterator

import gradio as gr

from retrieval.embed import get_embedder
from retrieval.errors import HopTraceError
from retrieval.kb.presets import ensure_demo
from retrieval.methods import METHODS, Context, make_method
from retrieval.store import open_store
from retrieval.trace import Stage


def _stage_html(st: Stage) -> str:
    e = html.escape
    rows = "".join(f"<li><b>{e(str(k))}</b>: {e(str(v))[:400]}</li>" for k, v in st.payload.items() if k != "traceback")
    msg = f"<p><i>{e(st.status)}: {e(st.message)}</i></p>" if st.message else ""
    return (f"<details open><summary><b>{e(st.title)}</b> · {st.latency_ms:.1f} ms · "
            f"tokens {st.tokens_in}/{st.tokens_out}</summary>{msg}<ul>{rows}</ul></details>")


def build(ctx: Context) -> gr.Blocks:
    examples = [q.text for q in ctx.store.questions()[:5]]

    def ask(question: str, method: str, k: int) -> Iterator[str]:
        try:
            stages: list[Stage] = []
            run = make_method(method, ctx).run(question, k=int(k), on_stage=stages.append)
        except HopTraceError as err:
            yield f"<p><b>Error:</b> {html.escape(str(err))}</p>"
            return
        body = "".join(_stage_html(s) for s in run.stages)
        ranked = "".join(f"<li>{html.escape(r.title)} <small>({r.score:.4f})</small></li>" for r in run.ranked)
        yield f"{body}<h4>Ranking · {run.latency_ms:.1f} ms</h4><ol>{ranked}</ol>"

    with gr.Blocks(title="HopTrace") as demo:
        gr.Markdown("# HopTrace\nType a multi-hop question, pick a method, watch its stages.")
        q = gr.Textbox(label="Question", value=examples[0] if examples else "")
        with gr.Row():
            m = gr.Dropdown(list(METHODS), value="composed", label="Method")
            k = gr.Slider(1, 20, value=5, step=1, label="k")
        run_btn = gr.Button("Run", variant="primary")
        out = gr.HTML()
        if examples:
            gr.Examples(examples, inputs=q)
        run_btn.click(ask, [q, m, k], out, concurrency_limit=2)
    return demo


def main(host: str | None = None, port: int | None = None) -> None:
    store = open_store(str(ensure_demo()))
    ctx = Context(store, get_embedder(store.info().embed_model))
    demo = build(ctx)
    demo.queue(max_size=32).launch(server_name=host or os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                                   server_port=port or int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
