"""Everything done with stored runs, one package a concern: storage/ (the trace database), stats/
(experiments compared), judging/ (evidence without gold) and otel/ (span export)."""
