# Hugging Face Spaces (sdk: docker) image; mirrors the README's setup command. It runs in public
# mode (HOPTRACE_PUBLIC=1, ui/public.py): visitors see only their own runs, work is capped; the
# Space's proxy sets X-Forwarded-For, so its first hop is the client (HOPTRACE_TRUST_PROXY=1).
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends build-essential cmake && rm -rf /var/lib/apt/lists/*
RUN useradd -m -u 1000 user
USER user
ENV HOME=/home/user PATH=/home/user/app/.venv/bin:$PATH \
    HOPTRACE_HOME=/home/user/.cache/hoptrace HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    GRADIO_SERVER_NAME=0.0.0.0 GRADIO_SERVER_PORT=7860 \
    GRADIO_ANALYTICS_ENABLED=False HOPTRACE_PUBLIC=1 HOPTRACE_TRUST_PROXY=1 \
    HOPTRACE_PERSIST_DIR=/data
WORKDIR /home/user/app
COPY --chown=user . .
# Outside this repo's dev machines torch 2.13.0 comes from the CPU index.
ENV PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
# The image runs on whatever CPU the host has, not the builder's: llama.cpp is built for
# AVX2 (any x86-64 from the last decade), without -march=native and without AMX, whose
# kernels crash on some hosts (scripts/setup.sh).
ENV CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
# The build also assembles the embedded LLM's GGUF file, so the first question does not wait.
RUN bash scripts/setup.sh && .venv/bin/hoptrace build --demo --quiet \
    && .venv/bin/python -c "from retrieval.llm.models import model_file; print(model_file())"
EXPOSE 7860
# The app is process 1 of the container: it handles SIGTERM itself (ui/lifecycle.py), and keeps
# its traces in /data when the Space has persistent storage (ui/storage.py).
CMD ["python", "app.py"]
