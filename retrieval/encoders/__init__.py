"""Text encoders: the sentence-transformers embedder (the one interface methods and builds use) and
its ONNX Runtime twin for CPU serving."""
