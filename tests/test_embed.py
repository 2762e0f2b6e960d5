import numpy as np

from retrieval.embed import get_embedder

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
