#!/usr/bin/env bash
# llama.cpp's own `llama-server`, built from the llama.cpp tree vendored in llama-cpp-python's
# source distribution (pinned by version and SHA-256, served by PyPI), native for this CPU:
# only that target, Release, no curl, no OpenSSL. ~5 minutes on 2 cores.
#
#   bash scripts/build_llama_server.sh            # → .venv/bin/llama-server
#   LLAMA_SERVER_CMAKE_ARGS="-DGGML_CUDA=ON" bash scripts/build_llama_server.sh   # a CUDA build
#
# HopTrace's embedded backend runs it as `HOPTRACE_LLM_SERVER=llama-server` (retrieval/llm/server.py).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
OUT=${LLAMA_SERVER_OUT:-.venv/bin/llama-server}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "llama-cpp-python==$VERSION --hash=sha256:$SHA256" > "$WORK/req.txt"
.venv/bin/pip --disable-pip-version-check -q download --no-deps --no-binary :all: --require-hashes \
  -r "$WORK/req.txt" -d "$WORK" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
tar -xzf "$WORK/llama_cpp_python-$VERSION.tar.gz" -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
# Native, except AMX: ggml's AMX kernels crash at the first decode on these 2-core Xeons
# (scripts/setup.sh says the same of llama-cpp-python), so on an AMX CPU the ISA is spelled out.
ISA="-DGGML_NATIVE=ON"
if grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
  ISA="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON"
fi
# shellcheck disable=SC2086
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DBUILD_SHARED_LIBS=OFF $ISA ${LLAMA_SERVER_CMAKE_ARGS:-} > "$WORK/cmake.log" 2>&1 \
  || { tail -30 "$WORK/cmake.log" >&2; exit 1; }
# The compiler's warnings stay in the log; its last lines are shown if the build fails.
cmake --build "$WORK/build" --config Release --target llama-server -j "$(nproc)" > "$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log" >&2; exit 1; }
install -m 0755 "$WORK/build/bin/llama-server" "$OUT"
"$OUT" --version 2>&1 | head -2
