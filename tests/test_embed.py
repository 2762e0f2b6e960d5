import numpy as np

from retrieval.encoders.embedder import get_embedder

Q = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


def test_query_encoding_is_deterministic_and_matches_batch_encoding(embedder):
    assert not embedder.model.training
    embedder.encode(["exercise the ONNX path (exports the model on first use)"])
    a, b = embedder.encode_query(Q), embedder.encode_query(Q)
    assert np.array_equal(a.token_vectors, b.token_vectors) and np.array_equal(a.vector, b.vector)
    # the one-pass query vector equals the batch (ONNX or torch) sentence vector
    assert float(a.vector @ embedder.encode([Q])[0]) > 0.9999
    assert a.token_vectors.shape[1] == embedder.dim == 384
    assert Q[a.token_spans[0][0]:a.token_spans[0][1]] == "Who"


def test_embedders_are_shared_per_model():
    assert get_embedder() is get_embedder("all-MiniLM-L6-v2")


def test_query_encoding_through_onnx_equals_torch(embedder, monkeypatch):
    """Queries go through ONNX Runtime when it loads (one GIL hand-off, not one per op); the
    vectors GRIEVER and dense read must not move."""
    from retrieval.encoders.embedder import Embedder

    embedder.encode(["load the ONNX encoder"])
    assert embedder._onnx_encoder() is not None, "onnxruntime is a dependency: the ONNX path must load here"
    fast = embedder.encode_query(Q)
    # A fresh embedder over the made export never loads sentence-transformers (~8 s a process):
    # the model's tokenizer.json and ONNX Runtime give the same tokens and vectors.
    light = Embedder(embedder.name)
    again = light.encode_query(Q)
    assert light._model is None and light.dim == embedder.dim == 384
    assert again.token_spans == fast.token_spans and np.array_equal(again.vector, fast.vector)
    assert np.array_equal(light.encode([Q, "a b"]), embedder.encode([Q, "a b"]))
    monkeypatch.setenv("HOPTRACE_ONNX", "0")
    torch_only = Embedder(embedder.name)
    slow = torch_only.encode_query(Q)
    assert torch_only._onnx is None
    assert fast.token_spans == slow.token_spans
    assert np.abs(fast.vector - slow.vector).max() < 1e-5
    assert np.abs(fast.token_vectors - slow.token_vectors).max() < 1e-4


def test_shared_queries_encode_a_text_once_per_request(embedder, monkeypatch):
    from retrieval.encoders.embedder import SharedQueries

    calls = []
    real = embedder.encode_query
    monkeypatch.setattr(embedder, "encode_query", lambda text: calls.append(text) or real(text))
    request = SharedQueries(embedder)
    first, second = request.encode_query(Q), request.encode_query(Q)
    assert calls == [Q]
    assert not first.shared and second.shared
    assert np.array_equal(first.vector, second.vector)
    assert request.dim == embedder.dim  # everything else is the wrapped embedder's
    SharedQueries(embedder).encode_query(Q)  # the next request encodes afresh
    assert calls == [Q, Q]


def test_a_serving_apps_encoder_lets_its_threads_sleep_and_a_builds_spins(embedder, monkeypatch):
    """ui.app.main calls serving_mode: its ONNX sessions turn pool-thread spinning off
    (issue 17 item 9); an encoder made outside the app keeps ONNX Runtime's default."""
    from retrieval.encoders import onnx as onnx_encoder
    from retrieval.encoders.embedder import Embedder

    key = "session.intra_op.allow_spinning"
    embedder.encode(["load the ONNX encoder"])
    building = embedder._onnx_encoder().session.get_session_options()
    assert not _has_entry(building, key) or building.get_session_config_entry(key) != "0"
    monkeypatch.setattr(onnx_encoder, "_allow_spinning", True)
    onnx_encoder.serving_mode()
    serving = Embedder(embedder.name)._onnx_encoder()
    assert serving is not None
    assert serving.session.get_session_options().get_session_config_entry(key) == "0"


def _has_entry(options, key: str) -> bool:
    try:
        options.get_session_config_entry(key)
        return True
    except Exception:  # ONNX Runtime raises for a key that was never set
        return False


def test_a_method_reusing_a_shared_encoding_is_charged_its_cost(ctx):
    """Issue 17 item 9: side by side, Composed reused Dense's encoding and showed ~1.5 ms against
    its `bench` p50 of ~4 ms. The reusing run now counts the encoding at what it cost, in its
    encode stage and (through count_reused, which the app applies) in its latency, so the
    columns compare as each method alone."""
    from dataclasses import replace

    from retrieval.encoders.embedder import SharedQueries
    from retrieval.methods import make_method
    from retrieval.trace.model import count_reused

    request = replace(ctx, embedder=SharedQueries(ctx.embedder))
    first = count_reused(make_method("dense", request).run(Q, k=5))
    raw = make_method("composed", request).run(Q, k=5)
    wall = raw.latency_ms
    second = count_reused(raw)
    enc1 = next(s for s in first.stages if s.name == "encode")
    enc2 = next(s for s in second.stages if s.name == "encode")
    assert "reused" not in enc1.payload and "shared" not in enc1.payload
    cost = request.embedder._memo[Q].cost_ms
    assert cost > 0 and "shared" in enc2.payload
    assert enc2.payload["reused"]["ms"] == round(cost, 3)
    assert enc2.latency_ms == round(enc2.payload["reused"]["wall_ms"] + cost, 3)
    assert enc2.payload["reused"]["wall_ms"] < cost  # reading the memo is cheaper than encoding
    assert second.latency_ms == round(wall + round(cost, 3), 3)
    # outside a request nothing is shared and nothing is charged
    alone = count_reused(make_method("composed", ctx).run(Q, k=5))
    assert not any("reused" in s.payload for s in alone.stages)


def test_one_process_at_a_time_makes_an_export_and_the_others_find_it_made(tmp_path):
    """The suite's three workers share one models folder and start together: each exported the
    same model beside the others (~10 CPU s each). Here three makers of one file, on threads with
    a lock file each opened apart, as processes do: one makes it, two wait and find it."""
    import threading
    import time

    from retrieval.encoders.onnx import _made_once

    path, log = tmp_path / "m.onnx", []

    def make(i: int) -> None:
        time.sleep(0.2)   # long enough for the others to be waiting on the lock
        path.write_text(str(i))
        log.append(("made", i))

    def maker(i: int) -> None:
        _made_once(path, lambda: make(i))
        log.append(("found", i))

    threads = [threading.Thread(target=maker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [kind for kind, _ in log] == ["made", "found", "found", "found"], log
    assert path.read_text() == str(log[0][1]) and (tmp_path / "m.onnx.lock").exists()
