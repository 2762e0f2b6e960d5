#!/usr/bin/env bash
# Set up (as scripts/setup.sh) and run the whole test suite. .ci/run calls this.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test || exit 1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Tests build their KBs under a fresh home, never the user's.
export HOPTRACE_HOME="${HOPTRACE_TEST_HOME:-$(mktemp -d)}"
.venv/bin/python -m pytest -q -rs "$@"
rc=$?
if [ $rc -eq 5 ]; then
  echo "error: pytest collected no tests (exit 5); the suite must not be empty" >&2
  exit 1
fi
exit $rc
