#!/usr/bin/env bash
# llama.cpp's own `llama-server`, built from the llama.cpp tree vendored in llama-cpp-python's
# source distribution (pinned by version and SHA-256, served by PyPI; only its C++ tree is used),
# native for this CPU: only that target, Release, no curl, no OpenSSL. ~4-5 minutes on 2 cores.
#
#   bash scripts/build_llama_server.sh              # → .venv/bin/llama-server (scripts/setup.sh runs it)
#   bash scripts/build_llama_server.sh --if-needed  # only when missing or built from other inputs
#   LLAMA_SERVER_CMAKE_ARGS="-DGGML_CUDA=ON" bash scripts/build_llama_server.sh   # a CUDA build
#
# LLAMA_SERVER_CMAKE_ARGS, when set, replaces the ISA choice below (the Dockerfile's portable AVX2
# build; a CUDA build, which needs the CUDA toolkit's nvcc). HopTrace's embedded backend runs the
# binary as a child process (retrieval/llm/server.py).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
OUT=${LLAMA_SERVER_OUT:-.venv/bin/llama-server}
# Native, except AMX: ggml's AMX kernels crash at the first decode on these 2-core Xeons, so on
# an AMX CPU the ISA is spelled out (AVX-512 and VNNI stay on).
ISA="-DGGML_NATIVE=ON"
if grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
  ISA="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON"
fi
ARGS=${LLAMA_SERVER_CMAKE_ARGS:-$ISA}
# What the binary was built from, kept beside it: a native build is for this CPU's flags, so a
# venv carried to another machine builds again.
STAMP="llama-cpp-python $VERSION sha256:$SHA256 | $ARGS | $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | md5sum | cut -c1-12)"
if [ "${1:-}" = --if-needed ] && [ -x "$OUT" ] && [ "$(cat "$OUT.built-from" 2>/dev/null)" = "$STAMP" ]; then
  echo "llama-server is built ($("$OUT" --version 2>&1 | head -1))"
  exit 0
fi
echo "building llama-server from llama.cpp's source (~5 minutes on 2 cores)"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "llama-cpp-python==$VERSION --hash=sha256:$SHA256" > "$WORK/req.txt"
.venv/bin/pip --disable-pip-version-check -q download --no-deps --no-binary :all: --require-hashes \
  -r "$WORK/req.txt" -d "$WORK" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
tar -xzf "$WORK/llama_cpp_python-$VERSION.tar.gz" -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
# shellcheck disable=SC2086
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DBUILD_SHARED_LIBS=OFF $ARGS > "$WORK/cmake.log" 2>&1 \
  || { tail -30 "$WORK/cmake.log" >&2; exit 1; }
# The compiler's warnings stay in the log; its last lines are shown if the build fails.
cmake --build "$WORK/build" --config Release --target llama-server -j "$(nproc)" > "$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log" >&2; exit 1; }
install -m 0755 "$WORK/build/bin/llama-server" "$OUT"
echo "$STAMP" > "$OUT.built-from"
"$OUT" --version 2>&1 | head -1
