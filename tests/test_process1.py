"""The Space's image, followed as Spaces runs it, as far as this machine allows: the Dockerfile's
ENV, USER and CMD read from the Dockerfile itself, the app started as process 1 of a new PID
namespace (`unshare --pid`), and stopped with SIGTERM, which process 1 ignores unless it handles
it. Checked: it stops within seconds, and wrote nothing outside its home. Its /tmp is a folder of
the test's, bind-mounted in its own mount namespace, so what it writes there is seen whole and
other tests' files are not blamed on it: the test runs beside the rest of the suite.

Where PID namespaces or mounts are not allowed (no `unshare`, not root) the test is skipped, saying so.
Where the Dockerfile's user (uid 1000) cannot run this checkout's interpreter (a venv under a
private home, as on the development machines), it runs as the current user, and says so.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from retrieval.core.ports import free_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def dockerfile() -> tuple[dict[str, str], str, list[str]]:
    """The final stage's ENV (in order, later wins), USER and CMD."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stage = re.split(r"^FROM .*$", text, flags=re.M)[-1]
    env: dict[str, str] = {}
    user, cmd = "", []
    for line in stage.splitlines():
        line = line.strip()
        if line.startswith("ENV "):
            for tok in shlex.split(line[4:]):
                if "=" in tok:
                    k, v = tok.split("=", 1)
                    env[k] = re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), os.environ.get(m.group(1), "")), v)
        elif line.startswith("USER "):
            user = line.split()[1]
        elif line.startswith("CMD "):
            import json

            cmd = json.loads(line[4:])
    return env, user, cmd


def _can(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _child(pid: int) -> int | None:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(kids[0]) if kids else None


def _tmp_tops(*paths: Path) -> list[Path]:
    """The folders directly under /tmp that hold any of `paths` (none when they live elsewhere)."""
    found = {f for p in paths for f in (p.absolute(), p.resolve())}   # a venv's python links out
    return sorted({Path("/tmp") / f.relative_to("/tmp").parts[0] for f in found
                   if f.is_relative_to("/tmp") and f != Path("/tmp")})


def _private_tmp_script(private_tmp: Path, keeps: list[tuple[Path, Path]]) -> str:
    """A shell line for the new mount namespace: `private_tmp` over /tmp, each kept folder bound to
    its holder before and back to its own path after, then the command ("$@")."""
    q = shlex.quote
    steps = [f"mount --bind {q(str(top))} {q(str(holder))}" for top, holder in keeps]
    steps.append(f"mount --bind {q(str(private_tmp))} /tmp")
    for top, holder in keeps:
        steps += [f"mkdir -p {q(str(top))}", f"mount --bind {q(str(holder))} {q(str(top))}"]
    return " && ".join(steps) + ' && exec "$@"'


def test_the_dockerfile_declares_what_the_space_runs():
    env, user, cmd = dockerfile()
    assert user == "user" and cmd == ["python", "app.py"]
    assert env["HOPTRACE_PUBLIC"] == "1" and env["GRADIO_SERVER_PORT"] == "7860"
    assert env.get("HOPTRACE_PERSIST_DIR") == "/data", "traces go to the Space's persistent storage when it has one"


def test_sigterm_stops_the_app_as_process_1_and_it_writes_only_its_home(tmp_path, small_kb):
    if not shutil.which("unshare") or not _can(["unshare", "--pid", "--fork", "--mount-proc", "true"]):
        pytest.skip("PID namespaces are not allowed here (unshare --pid failed): cannot run the app as process 1")
    env_file, _, cmd = dockerfile()
    # Not under pytest's own folder, which only its owner may enter, nor under /tmp, which the app
    # gets a private one of (below).
    home = Path(tempfile.mkdtemp(prefix="hoptrace-process1-", dir="/var/tmp"))
    request_cleanup = home
    # The app's /tmp is this folder, bind-mounted over /tmp in its own mount namespace: whatever it
    # writes to /tmp lands here, and only its own writes do. Counting new entries in the machine's
    # /tmp blamed it for other tests' files, so this test had to run alone (issue 72: the suite's time).
    private_tmp = home / "slash-tmp"
    private_tmp.mkdir()
    private_tmp.chmod(0o1777)
    # A checkout (or interpreter) under /tmp, as a clean-clone check in `mktemp -d` makes, would be
    # hidden by that mount and the app's `python` not found: its top folder under /tmp is bound
    # aside first and back into the private /tmp.
    keeps = [(top, home / f"keep-{i}") for i, top in enumerate(_tmp_tops(ROOT, Path(sys.executable)))]
    bind = ["sh", "-c", _private_tmp_script(private_tmp, keeps), "sh"]
    for _, holder in keeps:
        holder.mkdir()
    if not _can(["unshare", "--pid", "--fork", "--mount-proc", *bind, "true"]):
        shutil.rmtree(home, ignore_errors=True)
        pytest.skip("mounts are not allowed here (mount --bind in a new namespace failed): the app's /tmp "
                    "cannot be its own")
    (home / "app").mkdir(parents=True)
    # What the image's home holds from its build (the Dockerfile's `hoptrace build --demo`): the demo
    # KB, here the session's small KB, and the query encoder's ONNX export. Started without them the
    # app began building the demo at its first start, which a Space never does. (It costs the test
    # no less CPU: SIGTERM came a second or two into that build; measured 41.2/37.7 s before, 42.8/40.4 after.)
    from retrieval.core.paths import cache_dir

    image_home = home / ".cache" / "hoptrace"
    (image_home / "kbs").mkdir(parents=True)
    shutil.copyfile(small_kb, image_home / "kbs" / "demo.sqlite")
    (image_home / "models").mkdir()
    for onnx in (cache_dir() / "models").glob("*.onnx"):
        shutil.copyfile(onnx, image_home / "models" / onnx.name)
    python = Path(sys.executable)
    as_uid = [] if os.geteuid() != 0 else ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "--"]
    if as_uid and not _can(as_uid + [str(python), "-c", "import gradio, retrieval.api"]):
        as_uid = []  # the Dockerfile's uid 1000 cannot run this venv here (see the module docstring)
    if as_uid:
        shutil.chown(home, 1000, 1000)
        for p in home.rglob("*"):
            shutil.chown(p, 1000, 1000)
    port = free_port()
    # The image's home is /home/user: every setting under it (HOME, HOPTRACE_HOME, MPLCONFIGDIR)
    # moves to this test's home, so nothing lands in a real /home/user.
    moved = {k: v.replace(env_file.get("HOME", "/home/user"), str(home)) for k, v in env_file.items()}
    env = {**moved, "PATH": f"{python.parent}:/usr/bin:/bin", "HOME": str(home),
           "HOPTRACE_HOME": str(home / ".cache" / "hoptrace"), "GRADIO_SERVER_PORT": str(port),
           "GRADIO_SERVER_NAME": "127.0.0.1", "HOPTRACE_LLM": "none", "TMPDIR": str(home / "tmp"),
           "HOPTRACE_PERSIST_DIR": str(home / "data"), "PYTHONPATH": str(ROOT)}
    (home / "tmp").mkdir()
    if as_uid:
        shutil.chown(home / "tmp", 1000, 1000)
    marker = tmp_path / "marker"
    marker.write_text("")
    time.sleep(1.1)
    # CMD's `python` is the venv's, first on the image's PATH: here, this checkout's interpreter.
    argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", *bind, *as_uid,
            *(str(python) if c == "python" else c for c in cmd)]
    outer = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 240
        while True:
            assert outer.poll() is None, outer.stdout.read()[-3000:]
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).status == 200:
                    break
            except OSError:
                pass
            assert time.time() < deadline, "the app did not answer within 240 s"
            time.sleep(0.3)
        app_pid = _child(outer.pid)
        assert app_pid is not None
        inside = Path(f"/proc/{app_pid}/status").read_text()
        assert re.search(r"^NSpid:\s+\d+\s+1$", inside, flags=re.M), "the app is process 1 of its namespace"
        t0 = time.time()
        os.kill(app_pid, signal.SIGTERM)
        outer.wait(timeout=20)
        stopped = time.time() - t0
        in_tmp = sorted(p.name for p in private_tmp.iterdir() if p.name not in {top.name for top, _ in keeps})
    finally:
        if outer.poll() is None:
            outer.kill()
            outer.wait()
        shutil.rmtree(request_cleanup, ignore_errors=True)
    log = outer.stdout.read()
    assert stopped < 5.0, f"SIGTERM took {stopped:.1f} s; log: {log[-2000:]}"
    assert "SIGTERM: stopping" in log, log[-2000:]
    # Nothing written outside its home: nothing in its /tmp (Gradio's uploads and caches follow TMPDIR
    # and HOME into `home`) and no new file in the checkout (its WORKDIR). As uid 1000, only files of
    # that user count there: the suite's other tests run beside this one, as root.
    new = [f"/tmp/{name}" for name in in_tmp]
    mine = ["-uid", "1000"] if as_uid else []
    new += subprocess.run(["find", str(ROOT), "-newer", str(marker), "-type", "f", *mine,
                           "-not", "-path", "*/.git/*", "-not", "-path", "*/__pycache__/*",
                           "-not", "-path", "*/.pytest_cache/*"], capture_output=True, text=True).stdout.split()
    assert not new, f"written outside its home: {new[:10]}"
    print(f"stopped {stopped:.2f} s after SIGTERM as process 1 ({'uid 1000' if as_uid else 'the current user'})")
