"""The Space's image with podman: its base, its build from the repository's own Dockerfile, and the
hash of the files it is built from. `scripts/build_image.sh` runs `build`; `scripts/check_image.py`
(the container driven as a visitor) imports this module for the same podman settings.

Usage: python3 scripts/image.py build [--tag T] [--no-compressed] [--build-arg K=V ...]
       python3 scripts/image.py inputs-hash

Everything this machine needs to build is given at build time only (docs/deployment.md, "Building
the image here"): its CA bundle and its local wheel folders as read-only mounts, pip told of them
through build arguments; none of it is copied into a layer.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TAG = "localhost/hoptrace-space:latest"
# The Dockerfile's FROM, fully qualified: podman resolves the short name to it, and a stand-in made
# here under this name is what a FROM with no registry reachable finds.
BASE = "docker.io/library/python:3.11-slim"
# What the image is built from and starts with: a change to any of them makes the recorded check
# stale (tests/test_image.py fails until `scripts/check_image.py` passes again and is recorded).
INPUTS = ("Dockerfile", ".dockerignore", "pyproject.toml", "app.py", "scripts/setup.sh",
          "scripts/build_llama_server.sh", "scripts/model-packages.txt", "scripts/model-packages-small.txt",
          "scripts/slim_image.py", "scripts/image.py", "scripts/build_image.sh", "scripts/check_image.py",
          "retrieval/llm/prepare_models.py", "retrieval/llm/models.py",
          "ui/app.py", "ui/lifecycle.py", "ui/storage.py", "ui/public.py", "ui/state.py")
RECORD = ROOT / "docs" / "measurements" / "image.md"
# Mount points inside the build's RUN steps for what this machine lends it.
CERT_IN_BUILD = "/run/host-certs/ca-certificates.crt"
WHEELS_IN_BUILD = "/run/host-wheels"


def inputs_hash(root: Path = ROOT) -> str:
    """sha256 over each input's path and bytes, in INPUTS order."""
    h = hashlib.sha256()
    for rel in INPUTS:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return h.hexdigest()


def recorded_hash(record: Path = RECORD) -> str:
    """The inputs hash of the last passing check, from its record's `inputs sha256:` line."""
    for line in record.read_text().splitlines():
        if "inputs sha256:" in line:
            return line.split("inputs sha256:")[1].strip(" `")
    return ""


# --- podman on this kind of machine ------------------------------------------------------------
def _hard_limit(flag: str) -> int:
    out = subprocess.run(["bash", "-c", f"ulimit -H{flag}"], capture_output=True, text=True).stdout.strip()
    return 1 << 20 if out in ("", "unlimited") else int(out)


def containers_conf(work: Path) -> Path:
    """A containers.conf for this run of podman. crun (podman's default runtime) refuses hybrid
    cgroups (`cgroups in hybrid mode not supported`): runc where the cgroups are not unified v2.
    podman's default rlimits are above some sandboxes' hard limits (`setrlimit RLIMIT_NOFILE:
    Operation not permitted`): each default goes under the hard limit. Above 32768 processes runc
    was refused here (`error setting rlimit type 6`) though `ulimit -Hu` read 96363."""
    unified = subprocess.run(["stat", "-fc", "%T", "/sys/fs/cgroup"], capture_output=True, text=True
                             ).stdout.strip() == "cgroup2fs"
    nofile, nproc = min(_hard_limit("n"), 1 << 20), min(_hard_limit("u"), 32768)
    lines = ["[containers]", f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]', "",
             "[engine]"]
    if not unified and shutil.which("runc"):
        lines.append('runtime = "runc"')
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "containers.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def podman_env(work: Path) -> dict:
    return {**os.environ, "CONTAINERS_CONF": str(containers_conf(work))}


def ensure_podman() -> None:
    if shutil.which("podman"):
        return
    if os.geteuid() != 0:
        raise SystemExit("error: podman is not installed; install it (Debian: sudo apt-get install podman runc)")
    print("installing podman and runc from Debian's packages", flush=True)
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "podman", "runc", "mmdebstrap"], check=True,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def _have_image(name: str, env: dict) -> bool:
    return subprocess.run(["podman", "image", "exists", name], env=env).returncode == 0


def ensure_base(env: dict, work: Path) -> str:
    """The Dockerfile's base: already here, pulled where a registry answers, else a stand-in made
    from Debian's packages under the same name. Returns what it is."""
    if _have_image(BASE, env):
        return f"{BASE}: already here"
    pulled = subprocess.run(["timeout", "120", "podman", "pull", "-q", BASE], env=env, capture_output=True,
                            text=True)
    if pulled.returncode == 0:
        return f"{BASE}: pulled"
    print(f"no registry answered for {BASE} ({(pulled.stderr.strip().splitlines() or ['timed out'])[-1][:160]});"
          " making a stand-in from Debian's packages", flush=True)
    if not shutil.which("mmdebstrap"):
        if os.geteuid() != 0:
            raise SystemExit("error: mmdebstrap is needed to make the base image here "
                             "(sudo apt-get install mmdebstrap)")
        subprocess.run(["apt-get", "install", "-y", "-qq", "mmdebstrap"], check=True)
    tar = work / "base.tar"
    # python:3.11-slim is Debian bookworm with Python 3.11 as /usr/local/bin/python and no
    # EXTERNALLY-MANAGED marker; bookworm's own python3.11 stands in for it, docs and man pages
    # left out as the real image leaves them out.
    hook = ("chroot \"$1\" sh -c 'ln -sf /usr/bin/python3.11 /usr/local/bin/python3 && "
            "ln -sf /usr/bin/python3.11 /usr/local/bin/python && rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED && "
            "apt-get clean && rm -rf /var/lib/apt/lists/*'")
    subprocess.run(["mmdebstrap", "--variant=minbase", "--include=python3.11,python3.11-venv,ca-certificates",
                    "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/doc/*",
                    "--dpkgopt=path-exclude=/usr/share/locale/*", "--dpkgopt=path-include=/usr/share/doc/*/copyright",
                    f"--customize-hook={hook}", "bookworm", str(tar), "http://deb.debian.org/debian"],
                   check=True, stdout=subprocess.DEVNULL)
    path = "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"
    subprocess.run(["podman", "import", "-q", "--change", f"ENV PATH={path}", "--change", "ENV LANG=C.UTF-8",
                    "--change", 'CMD ["python3"]', str(tar), BASE],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    tar.unlink()
    return f"{BASE}: a stand-in made here (Debian bookworm minbase with python3.11; no registry answered)"


# --- what this machine lends the build ---------------------------------------------------------
def _pip_config() -> dict[str, str]:
    """pip's settings here, as `pip config list` shows them (key → value, the last one wins)."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    conf = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        conf[key.split(".")[-1]] = value.strip().strip("'")
    return conf


def _answers(url: str) -> bool:
    import urllib.request

    try:
        urllib.request.urlopen(url, timeout=5)
        return True
    except Exception:
        return False


def machine_args() -> tuple[list[str], list[str], list[str]]:
    """(podman volume flags, build arguments, what each is for): the CA bundle that pip trusts
    here (a proxy that re-signs TLS), and the local wheel folder that holds the CPU torch wheel
    when PyTorch's CPU index does not answer. Nothing where the machine needs none of it."""
    conf = _pip_config()
    volumes, args, said = [], [], []
    cert = os.environ.get("PIP_CERT") or conf.get("cert")
    if cert and Path(cert).is_file():
        volumes += ["-v", f"{cert}:{CERT_IN_BUILD}:ro"]
        args += ["--build-arg", f"PIP_CERT={CERT_IN_BUILD}"]
        said.append(f"CA bundle {cert} (pip's cert here) mounted at {CERT_IN_BUILD}")
    links = [x for x in (os.environ.get("PIP_FIND_LINKS") or conf.get("find-links") or "").split() if Path(x).is_dir()]
    if links:
        volumes += ["-v", f"{links[0]}:{WHEELS_IN_BUILD}:ro"]
        args += ["--build-arg", f"PIP_FIND_LINKS={WHEELS_IN_BUILD}"]
        said.append(f"wheel folder {links[0]} (pip's find-links here) mounted at {WHEELS_IN_BUILD}")
    if not _answers("https://download.pytorch.org/whl/cpu/torch/"):
        # setup.sh would otherwise wait on the CPU index before taking the plain pin, which the
        # wheel folder's torch-2.13.0+cpu satisfies.
        args += ["--build-arg", "HOPTRACE_TORCH_INDEX=pypi"]
        said.append("HOPTRACE_TORCH_INDEX=pypi: PyTorch's CPU index does not answer here")
    return volumes, args, said


def image_size(tag: str, env: dict) -> int:
    out = subprocess.run(["podman", "image", "inspect", tag, "--format", "{{.Size}}"], env=env,
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def compressed_size(tag: str, env: dict) -> int:
    """Bytes of `podman save | gzip`: about what a registry stores and a Space pulls."""
    save = subprocess.Popen(["podman", "save", "--format", "docker-archive", tag], env=env, stdout=subprocess.PIPE)
    gz = subprocess.Popen(["gzip", "-6"], stdin=save.stdout, stdout=subprocess.PIPE)
    save.stdout.close()
    n = 0
    while chunk := gz.stdout.read(1 << 20):
        n += len(chunk)
    gz.wait()
    save.wait()
    return n


def layers(tag: str, env: dict) -> list[dict]:
    """The final image's layers, as `podman history` reports them: size and instruction."""
    out = subprocess.run(["podman", "history", "--no-trunc", "--format", "json", tag], env=env,
                         capture_output=True, text=True, check=True).stdout
    return [{"size": x.get("size", 0), "created_by": x.get("CreatedBy") or x.get("createdBy") or ""}
            for x in json.loads(out)]


def build(tag: str = TAG, extra: list[str] | None = None, compressed: bool = True) -> dict:
    ensure_podman()
    work = Path(tempfile.mkdtemp(prefix="hoptrace-image-"))
    env = podman_env(work)
    base = ensure_base(env, work)
    volumes, args, said = machine_args()
    print(f"base: {base}", flush=True)
    for s in said:
        print(f"build-time only: {s}", flush=True)
    t0 = time.time()
    cmd = ["podman", "build", "--network", "host", "-f", "Dockerfile", "-t", tag, *volumes, *args,
           *(extra or []), "."]
    done = subprocess.run(cmd, cwd=ROOT, env=env)
    wall = time.time() - t0
    if done.returncode:
        raise SystemExit(f"error: podman build failed (exit {done.returncode}) after {wall:.0f} s")
    size = image_size(tag, env)
    out = {"tag": tag, "build_s": round(wall, 1), "size_bytes": size, "base": base, "inputs_sha256": inputs_hash()}
    print(f"built {tag} in {wall:.0f} s ({wall / 60:.1f} min); image size {size / 1e9:.2f} GB "
          f"(podman image inspect)", flush=True)
    if compressed:
        c = compressed_size(tag, env)
        out["compressed_bytes"] = c
        print(f"compressed (podman save | gzip -6): {c / 1e9:.2f} GB", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the image from the Dockerfile; prints its wall time and size")
    b.add_argument("--tag", default=TAG)
    b.add_argument("--no-compressed", action="store_true", help="skip the compressed size (a gzip of the image)")
    b.add_argument("--build-arg", action="append", default=[], metavar="K=V")
    b.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    sub.add_parser("inputs-hash", help="the hash of the image's inputs, as the record keeps it")
    a = ap.parse_args(argv)
    if a.cmd == "inputs-hash":
        print(inputs_hash())
        return 0
    extra = [x for kv in a.build_arg for x in ("--build-arg", kv)]
    figures = build(a.tag, extra, compressed=not a.no_compressed)
    if a.json:
        Path(a.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
