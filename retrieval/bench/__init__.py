"""Benchmarks: metrics, the runner, significance, reports, and the papers' tables reproduced."""
