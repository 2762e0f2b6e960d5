"""Follow a Dockerfile's instructions in chroots, where no Docker engine can run, and report the
size of each stage's result; optionally start the final stage's CMD as process 1.

Usage (as root):
  python scripts/rehearse_image.py --base ROOTFS --work DIR [--dockerfile F] [--build-arg K=V]
                                   [--unset NAME] [--reuse] [--exec COMMAND] [--run PORT]

ROOTFS stands for the Dockerfile's base image (python:3.11-slim): a Debian root with python3.11,
its venv module and `python` (docs/deployment.md says how to make one with debootstrap). Each
stage starts from a copy of it. Supported: FROM [AS], ARG, ENV, USER, WORKDIR, RUN, COPY (the
context filtered by .dockerignore, or --from a stage), EXPOSE, CMD. What differs from an engine:
RUN reaches the network with this machine's DNS and pip settings (copied in), there are no
layers (a stage's size is its root's size), and the base is a stand-in of about its size.
With --run, stop the app by its own pid (SIGTERM): it runs under the Dockerfile's uid, and that
change clears the parent-death signal, so killing this process leaves the app running.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

# The network as this machine reaches it: its DNS, its pip settings, and its CA bundle (a proxy
# that re-signs TLS is trusted through it).
HOST_FILES = ("etc/resolv.conf", "etc/pip.conf", "etc/ssl/certs/ca-certificates.crt")
# Local wheel folders that its pip settings name, seen read-only: where download.pytorch.org is out of
# reach, the CPU torch wheel is in one of them (without it pip takes PyPI's CUDA build).
HOST_DIRS = ("opt/wheels", "opt/pypi", "opt/pypi-more")


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def ignored(patterns: list[str]):
    """Docker's .dockerignore matching: a pattern matches a path or any of its parents."""
    regexes = []
    for p in patterns:
        p = p.strip().strip("/")
        rx = re.escape(p).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        regexes.append(re.compile(rx.replace(r"\?", "[^/]") + "$"))

    def test(rel: str) -> bool:
        parts = rel.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        return any(r.match(x) for r in regexes for x in prefixes)
    return test


def context_files(context: Path) -> list[str]:
    ignore_file = context / ".dockerignore"
    patterns = [x for x in ignore_file.read_text().splitlines() if x.strip() and not x.startswith("#")] \
        if ignore_file.exists() else []
    skip = ignored(patterns)
    out = []
    for dirpath, dirnames, filenames in os.walk(context):
        rel_dir = os.path.relpath(dirpath, context)
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = [d for d in dirnames if not skip(rel_dir + d)]
        out += [rel_dir + f for f in filenames if not skip(rel_dir + f)]
    return out


class Stage:
    def __init__(self, name: str, root: Path, args: dict[str, str], unset: tuple[str, ...] = ()):
        self.name, self.root, self.unset = name, root, unset
        self.env: dict[str, str] = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        self.args, self.user, self.workdir, self.cmd = dict(args), "root", "/", []

    def expand(self, value: str) -> str:
        scope = {**self.args, **self.env}
        return re.sub(r"\$\{?(\w+)\}?", lambda m: scope.get(m.group(1), ""), value)

    def ids(self, user: str) -> tuple[int, int]:
        for line in (self.root / "etc/passwd").read_text().splitlines():
            f = line.split(":")
            if user in (f[0], f[2]):
                return int(f[2]), int(f[3])
        raise SystemExit(f"{self.name}: no user {user!r} in its /etc/passwd")

    def chroot_argv(self, command: str, pid1: bool = False, build: bool = False) -> list[str]:
        """argv that runs `command` with sh in the root, as USER, in WORKDIR, with ENV only (and,
        for a build step, this machine's PIP_* settings under it: its find-links, its CA bundle)."""
        uid, gid = self.ids(self.user)
        host = {k: v for k, v in os.environ.items() if k.startswith("PIP_")} if build else {}
        env = [f"{k}={v}" for k, v in {**host, **self.args, **self.env}.items() if k not in self.unset]
        binds = "".join(f"mkdir -p {self.root}/{d} && mount --bind -o ro /{d} {self.root}/{d} && "
                        for d in HOST_DIRS if Path("/", d).is_dir())
        inner = (f"{binds}mount --rbind /dev {self.root}/dev && mount -t proc proc {self.root}/proc && "
                 f"exec chroot --userspec={uid}:{gid} {self.root} /usr/bin/env -i "
                 f"{shlex.join(env)} /bin/sh -c {shlex.quote(f'cd {self.workdir} && {command}')}")
        pid = ["--pid", "--fork", "--kill-child"] if pid1 else []
        return ["unshare", "--mount", *pid, "/bin/sh", "-c", inner]

    def network(self) -> None:
        """What an engine gives a container: DNS, /etc/hosts with localhost (Gradio checks it)."""
        for f in HOST_FILES:
            if Path("/", f).exists():
                shutil.copy2(Path("/", f), self.root / f)
        (self.root / "etc/hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")

    def run(self, command: str) -> None:
        self.network()
        t0 = time.time()
        print(f"[{self.name}] RUN {command[:150]}", flush=True)
        done = subprocess.run(self.chroot_argv(command, build=True))
        if done.returncode:
            raise SystemExit(f"[{self.name}] RUN failed with exit {done.returncode}: {command[:200]}")
        print(f"[{self.name}]   {time.time() - t0:.0f} s", flush=True)


def copy_into(src: Path, dst: Path, uid: int, gid: int) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
        subprocess.run(["chown", "-R", "-h", f"{uid}:{gid}", str(dst)], check=True)
    else:
        shutil.copy2(src, dst, follow_symlinks=False)
        os.lchown(dst, uid, gid)


def rehearse(dockerfile: Path, context: Path, base: Path, work: Path, build_args: dict[str, str],
             unset: tuple[str, ...] = (), build: bool = True) -> list[Stage]:
    """The stages, built in `work` (or, with build=False, their settings over roots already there)."""
    stages: list[Stage] = []
    args: dict[str, str] = {}
    for word, rest in instructions(dockerfile):
        if word == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?$", rest, flags=re.I)
            if m.group(1) != "python:3.11-slim":
                raise SystemExit(f"only python:3.11-slim has a stand-in here, not {m.group(1)}")
            name = m.group(2) or f"stage{len(stages)}"
            root = work / name
            if build:
                if root.exists():
                    subprocess.run(["rm", "-rf", str(root)], check=True)
                subprocess.run(["cp", "-a", str(base), str(root)], check=True)
            stages.append(Stage(name, root, args, unset))
            continue
        s = stages[-1]
        if not build and word in ("RUN", "COPY"):
            continue
        if word == "ARG":
            k, _, default = rest.partition("=")
            s.args[k] = build_args.get(k, default)
        elif word == "ENV":
            for tok in shlex.split(rest):
                k, _, v = tok.partition("=")
                s.env[k] = s.expand(v)
        elif word == "USER":
            s.user = rest
        elif word == "WORKDIR":
            s.workdir = s.expand(rest)
            uid, gid = s.ids(s.user)
            path = s.root / s.workdir.lstrip("/")
            if build and not path.exists():  # BuildKit creates it owned by the USER of the moment
                path.mkdir(parents=True)
                os.chown(path, uid, gid)
        elif word == "RUN":
            s.run(rest)
        elif word == "COPY":
            opts = dict(re.findall(r"--(\w+)=(\S+)", rest))
            src, dst = re.sub(r"--\w+=\S+\s*", "", rest).split()
            uid, gid = s.ids(opts["chown"]) if "chown" in opts else (0, 0)
            dst_path = s.root / (dst if dst.startswith("/") else f"{s.workdir}/{dst}").lstrip("/")
            if "from" in opts:
                origin = next(x for x in stages if x.name == opts["from"])
                copy_into(origin.root / src.lstrip("/"), dst_path, uid, gid)
            else:
                for rel in context_files(context / src):
                    copy_into(context / src / rel, dst_path / rel, uid, gid)
        elif word == "CMD":
            s.cmd = json.loads(rest)
        elif word != "EXPOSE":
            raise SystemExit(f"unsupported instruction {word}")
    return stages


def du(path: Path) -> int:
    if not path.exists():
        return 0
    return int(subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True).stdout.split()[0])


def report(stages: list[Stage], base: Path) -> None:
    gb = 1e9
    print(f"\nbase stand-in for python:3.11-slim: {du(base) / gb:.2f} GB")
    for s in stages:
        home = s.root / "home/user"
        parts = {"venv": home / "app/.venv", "HOPTRACE_HOME": home / ".cache/hoptrace",
                 "pip cache": home / ".cache/pip", "rest of ~/.cache": None}
        sizes = {k: du(p) for k, p in parts.items() if p is not None}
        sizes["rest of ~/.cache"] = du(home / ".cache") - sizes["HOPTRACE_HOME"] - sizes["pip cache"]
        total = du(s.root)
        listed = " · ".join(f"{k} {v / gb:.2f}" for k, v in sizes.items())
        print(f"stage {s.name}: {total / gb:.2f} GB in all; added to the base {(total - du(base)) / gb:.2f} GB "
              f"({listed}; the rest is apt's packages and the repository)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--dockerfile", type=Path, default=Path(__file__).resolve().parents[1] / "Dockerfile")
    ap.add_argument("--context", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--build-arg", action="append", default=[])
    ap.add_argument("--unset", action="append", default=[],
                    help="an ENV the Dockerfile sets that this machine cannot honour (an index it cannot reach)")
    ap.add_argument("--run", type=int, metavar="PORT", help="then start CMD as process 1, serving on PORT")
    ap.add_argument("--reuse", action="store_true", help="the stages in --work are already built: report/run")
    ap.add_argument("--exec", metavar="COMMAND", help="run COMMAND in the final stage (its USER, ENV, WORKDIR)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("chroot needs root")
    build_args = dict(x.split("=", 1) for x in a.build_arg)
    a.work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    stages = rehearse(a.dockerfile, a.context, a.base, a.work, build_args, tuple(a.unset), build=not a.reuse)
    if not a.reuse:
        print(f"built in {time.time() - t0:.0f} s")
    report(stages, a.base)
    stages[-1].network()
    if a.exec:
        final = stages[-1]
        rc = subprocess.run(final.chroot_argv(a.exec)).returncode
        if rc or not a.run:
            return rc
    if a.run:
        final = stages[-1]
        final.env["GRADIO_SERVER_PORT"] = str(a.run)
        argv = final.chroot_argv("exec " + shlex.join(final.cmd), pid1=True)
        print(f"starting {final.cmd} as process 1 of the final stage on port {a.run}", flush=True)
        os.execvp(argv[0], argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
