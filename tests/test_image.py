"""The Space's image: two stages, and each embedded model stored once.

The Dockerfile's stages are read from the file itself. Dropping a model's parts runs the real
`pip uninstall` on two small part packages made here, installed into a folder of their own, so
the checkout's environment is never touched.
"""
from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def stages() -> list[tuple[str, str]]:
    """(FROM line, the instructions after it) for each stage, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    text = "\n".join(x for x in text.splitlines() if not x.lstrip().startswith("#"))
    parts = re.split(r"^(FROM .*)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def test_the_image_compiles_in_a_builder_and_ships_without_a_compiler():
    (builder_from, builder), (final_from, final) = stages()
    assert builder_from.endswith("AS builder") and final_from.split()[1] == builder_from.split()[1]
    assert "build-essential" in builder and "cmake" in builder
    for tool in ("build-essential", "cmake", "gcc", "g++", "pip install", "setup.sh"):
        assert tool not in final, f"the final stage has {tool}"
    # No RUN in the final stage: a build-time volume (the CA bundle, the wheel folder) leaves its
    # mount point in each RUN's layer; only copies from the builder.
    assert not re.search(r"^RUN ", final, flags=re.M), "the final stage runs a command"
    assert "/usr/lib/x86_64-linux-gnu/libgomp.so.1" in final, "llama.cpp's CPU backend links libgomp.so.1"
    assert "COPY --from=builder /etc/passwd /etc/group /etc/shadow /etc/gshadow /etc/" in final   # `user`
    copies = re.findall(r"^COPY --from=builder --chown=user (\S+) (\S+)$", final, flags=re.M)
    assert copies == [("/home", "/home")]   # the user's home, the folder itself the user's
    # No pip cache in the builder's .cache (copied whole); the model's parts go once it is checked;
    # the font cache is made where MPLCONFIGDIR points, inside that .cache.
    assert "PIP_NO_CACHE_DIR=1" in builder
    assert "python -m retrieval.llm.prepare_models --drop-parts" in builder
    mpl = "MPLCONFIGDIR=/home/user/.cache/matplotlib"
    assert mpl in builder and mpl in final
    assert 'import matplotlib.font_manager' in builder
    # The 0.5B model only with --build-arg SMALL_MODEL=1.
    assert re.search(r'setup\.sh \$\(\[ "\$SMALL_MODEL" = 1 \] && echo --small-model\)', builder)


def test_setup_installs_the_small_model_only_when_asked():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "$([ $SMALL = 1 ] && echo -r scripts/model-packages-small.txt)" in setup
    # every model part pinned by version and wheel hash, installed with --require-hashes
    assert "--require-hashes -r scripts/model-packages.txt" in setup
    for name, parts in (("model-packages.txt", 22), ("model-packages-small.txt", 6)):
        pins = [x for x in (ROOT / "scripts" / name).read_text().splitlines() if x and not x.startswith("#")]
        assert sum("-part" in x for x in pins) == parts
        assert all(re.fullmatch(r"[a-z0-9-]+==[0-9.]+ --hash=sha256:[0-9a-f]{64}", x) for x in pins), name
    assert "--test) TEST=1 SMALL=1" in setup  # the suite drives the 0.5B model (tests/embedded.py)
    bad = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh"), "--smal-model"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "unknown option --smal-model" in bad.stderr


def _wheel(dest: Path, name: str, payload: bytes) -> Path:
    """A minimal wheel shaped like a model part package: `<name>/data/partNN.bin`."""
    number = int(re.search(r"(\d+)$", name).group(1))
    files = {f"{name}/__init__.py": b"", f"{name}/data/part{number:02d}.bin": payload,
             f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
             f"{name}-1.0.dist-info/WHEEL":
                 b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{name}-1.0.dist-info/RECORD,,")
    files[f"{name}-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = dest / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel


@pytest.mark.parametrize("corrupt", [False, True])
def test_prepare_models_drops_the_parts_only_after_the_assembled_file_checks(tmp_path, corrupt):
    payloads = [b"first half of a model " * 100, b"second half " * 150]
    wheels = [_wheel(tmp_path, f"hoptrace_test_part{i}", p) for i, p in enumerate(payloads, 1)]
    # An environment of its own: pip uninstalls only from the environment it runs in.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True)
    python = tmp_path / "env" / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "--target", str(site), *map(str, wheels)], check=True)
    whole = b"".join(payloads)
    script = f"""
import sys
from pathlib import Path
from retrieval.llm import prepare_models
from retrieval.llm import models
from retrieval.llm.models import EmbeddedModel, assemble
m = EmbeddedModel("tiny", "a test model", "hoptrace_test_part", 2, {len(whole)}, "{hashlib.sha256(whole).hexdigest()}")
models.MODELS.clear()  # the one registry both modules read: only the test model
models.MODELS["tiny"] = m
target = Path(sys.argv[1]) / "models" / "tiny.gguf"
if {corrupt}:  # assembled earlier, damaged since: the same size, another hash
    assemble(m, target)
    data = bytearray(target.read_bytes()); data[5] ^= 1; target.write_bytes(bytes(data))
sys.exit(prepare_models.main(["--drop-parts"]))
"""
    # The checkout and this environment's packages (pip among them) come after its own.
    here = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{here}", "HOPTRACE_HOME": str(tmp_path)}
    out = subprocess.run([python, "-c", script, str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=120)
    left = sorted(p.name for p in site.iterdir() if p.name.startswith("hoptrace_test_part"))
    if corrupt:
        assert out.returncode == 1, out.stdout + out.stderr
        assert "error: embedded model tiny: tiny.gguf does not match its expected size and sha256" in out.stderr
        assert len(left) == 4, "a file that fails its check keeps its parts"  # two packages, two dist-infos
    else:
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.strip() == f"tiny: {tmp_path}/models/tiny.gguf (0.00 GB, sha256 checked; parts uninstalled)"
        assert left == [], f"parts still installed: {left}"
        assert (tmp_path / "models" / "tiny.gguf").read_bytes() == whole


def test_the_rehearsal_sends_the_context_docker_would(tmp_path):
    """scripts/rehearse_image.py filters the build context with .dockerignore as Docker does."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from rehearse_image import context_files
    finally:
        sys.path.pop(0)
    for rel in ("app.py", "retrieval/api.py", ".venv/bin/python", ".venv-phoenix/x", "data/kbs/a.sqlite",
                "deep/er/b.sqlite-wal", "m/x.gguf", "retrieval/__pycache__/a.pyc", ".git/HEAD", "out/x",
                "docs/out/keep.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / ".dockerignore").write_text((ROOT / ".dockerignore").read_text())
    assert sorted(context_files(tmp_path)) == [".dockerignore", "app.py", "docs/out/keep.md", "retrieval/api.py"]


def test_the_recorded_container_check_is_of_these_image_inputs():
    """The image's build and its container check take tens of minutes, so they run by hand, not in
    CI; this fails when an input of the image (scripts/image.py INPUTS: the Dockerfile,
    .dockerignore, setup.sh, pyproject.toml, app.py, the start-up code) changed since the check
    last passed and was recorded, so the record cannot silently describe another image."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from image import RECORD, inputs_hash, recorded_hash
    finally:
        sys.path.pop(0)
    assert RECORD.exists(), f"{RECORD} is missing: run .venv/bin/python scripts/check_image.py --build --record"
    assert recorded_hash(RECORD) == inputs_hash(), (
        "an input of the Space's image changed since its container check last passed: run "
        ".venv/bin/python scripts/check_image.py --build --record (about 25 minutes on 2 cores) and commit "
        f"{RECORD.relative_to(ROOT)}")
