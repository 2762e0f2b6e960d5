"""HopTrace retrieval toolkit: KB, stores, embedder, methods, bench."""
import os

# Set before numpy loads. OpenBLAS worker threads spin after each small matmul (kNN over
# a few thousand vectors) and steal both cores from torch's query encoder: measured on
# the demo KB, dense p95 went from 25 ms to 110 ms with them. One thread is plenty here.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
