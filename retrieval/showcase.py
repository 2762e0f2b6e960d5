"""The recorded showcase: full traces of the LLM methods on a few demo questions, shipped in the
repository so a first-time visitor sees every method at once instead of waiting minutes.

`hoptrace record-showcase` runs the methods with the configured LLM and writes
data/showcase/<kb>.json.gz. Each method's recording carries a fingerprint of what produced
it: the source of its package, its prompts, its config defaults and its profile values. The
loader recomputes the fingerprints and marks a method's runs stale when they differ, so a
recording made with other prompts or code is never shown as current.
"""
from __future__ import annotations

import ast
import datetime as dt
import gzip
import hashlib
import importlib
import inspect
import json
import lzma
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional, Sequence

from .core import gcpause, idle, pyast
from .core.errors import HopTraceError
from .core.records import Question
from .methods import METHODS, Context, make_method, profiles, root_method
from .trace.model import RunResult

FORMAT = 1
SHOWCASE_DIR = Path(__file__).resolve().parent.parent / "data" / "showcase"
DEFAULT_METHODS = ("griever", "gear", "sag", "grasp")


def path_for(kb: str) -> Path:
    return SHOWCASE_DIR / f"{kb}.json.gz"


# The method-core modules every method's run goes through, beside its own package.
SHARED_METHOD_MODULES = ("base", "answer", "context")


# The fingerprint's scheme: since "2." the settings are hashed as the recording's profile resolves
# them, so moving a value between a config default and a profile that keeps it (GEAR's sequence
# scoring: the paper's by default, ours in `local`) leaves that profile's recordings current.
# A fingerprint without the prefix was taken before, and is compared the way it was taken.
SCHEME = "2."


def fingerprint(method: str, profile: str = "local") -> str:
    """What a recording of `method` under `profile` depends on: the definitions in its package and
    in the shared method core, the prompt texts as the module holds them now, and the settings the
    profile gives it (the config defaults with the profile's values over them)."""
    cls = METHODS[root_method(method)]
    h = _code_hash(cls)
    settings = {**asdict(cls.Config()), **profiles.settings_for(root_method(method), profile)}
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return SCHEME + h.hexdigest()[:16]


def fingerprint_like(recorded: str, method: str, profile: str = "local") -> str:
    """This code's fingerprint of `method` taken as `recorded` was (its scheme, its profile): the
    two are equal when the recording is current."""
    if recorded.startswith(SCHEME) or not recorded:
        return fingerprint(method, profile)
    cls = METHODS[root_method(method)]   # the first scheme: the defaults and the local values apart
    h = _code_hash(cls, "1")
    h.update(json.dumps(asdict(cls.Config()), sort_keys=True, default=str).encode())
    h.update(json.dumps(profiles.LOCAL.get(root_method(method), {}), sort_keys=True).encode())
    return h.hexdigest()[:16]


def experiment_fingerprints(spec: dict, take: Callable[[str, str, str], str] = fingerprint_like) -> dict[str, str]:
    """{method: this code's fingerprint} for an experiment's recorded methods, each taken as its own
    was; `take(recorded, method, profile)` takes it (the app passes a cached fingerprint_like)."""
    return {m: take(s.get("fingerprint") or "", m, s.get("profile") or "local")
            for m, s in spec.get("methods", {}).items() if root_method(m) in METHODS}


def _code_hash(cls, scheme: str = SCHEME):
    """The code and prompts a method's runs depend on. Since scheme 2 its config class's field
    defaults are left to the settings hash, which takes them as the profile resolves them."""
    h = hashlib.sha256()
    for code in _definitions(_method_files(cls), cls.Config.__name__ if scheme == SCHEME else ""):
        h.update(code.encode())
    prompts = _prompt_module(cls)
    if prompts is not None:  # the live values, which is what a request is built from
        for name in sorted(vars(prompts)):
            value = getattr(prompts, name)
            if name.isupper() and isinstance(value, (str, dict)):
                h.update(name.encode() + json.dumps(value, sort_keys=True).encode())
    return h


def _method_files(cls) -> list[Path]:
    """The method's own package under methods/ (or its module), and the shared method core."""
    methods_dir = Path(inspect.getfile(importlib.import_module("retrieval.methods"))).parent
    fn = getattr(cls, "fn", None)
    if fn is not None or not cls.__module__.startswith("retrieval.methods."):
        # A user's method (methods/plugins/): its own file; an endpoint's code is not ours to read.
        try:
            return [Path(inspect.getfile(fn if fn is not None else cls))]
        except (TypeError, OSError):
            return []
    if cls.__module__.startswith("retrieval.methods.plugins"):
        return []
    top = cls.__module__.split(".")[2]  # retrieval.methods.<top>[.…]
    own = methods_dir / top
    files = sorted(own.glob("*.py")) if own.is_dir() else [methods_dir / f"{top}.py"]
    return files + [f for m in SHARED_METHOD_MODULES if (f := methods_dir / f"{m}.py").exists()]


def _definitions(files: Sequence[Path], settings_class: str = "") -> list[str]:
    """Each top-level statement of the files as code, sorted: imports, docstrings and comments
    left out. So a definition moved between these files, an import path or a docstring changed
    leaves the fingerprint alone; a changed line of code does not. `settings_class`: a class whose
    fields' default values are left out (they are hashed as a profile resolves them)."""
    return sorted(code for f in files for code in _file_definitions(f, settings_class))


_parsed: dict[tuple[str, int, int], list[str]] = {}


def _file_definitions(f: Path, settings_class: str = "") -> list[str]:
    """One file's statements, parsed once per version of the file (its mtime and size): the lab
    takes every method's fingerprint at each render. `settings_class`: that class's statement
    without its fields' default values."""
    st = f.stat()
    key = (str(f), st.st_mtime_ns, st.st_size)
    if key not in _parsed:
        _parsed[key] = [ast.unparse(node) for node in _strip(pyast.parse(f.read_text(), str(f))).body]
    if not settings_class:
        return _parsed[key]
    return [_without_defaults(code, settings_class) for code in _parsed[key]]


@lru_cache(maxsize=None)
def _without_defaults(code: str, class_name: str) -> str:
    """One statement as code; the class `class_name` with its annotated fields' values left out."""
    if f"class {class_name}" not in code:   # only a statement that may define it is parsed again
        return code
    node = pyast.parse(code).body[0]
    if not (isinstance(node, ast.ClassDef) and node.name == class_name):
        return code
    for field_ in node.body:
        if isinstance(field_, ast.AnnAssign):
            field_.value = None
    return ast.unparse(node)


def _strip(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                    and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]
            kept = [b for b in body if not isinstance(b, (ast.Import, ast.ImportFrom))]
            node.body = kept if kept or isinstance(node, ast.Module) else [ast.Pass()]
    return tree


def _prompt_module(cls):
    try:
        return importlib.import_module(cls.__module__ + ".prompts")
    except ImportError:
        return None


def choose_questions(questions: Sequence[Question], n: int) -> list[Question]:
    """n questions spread over 2-, 3- and 4-hop ones (MuSiQue's hop counts), in KB order."""
    by_hops: dict[int, list[Question]] = {}
    for q in questions:
        if q.gold_passage_ids:
            by_hops.setdefault(q.hops or 2, []).append(q)
    out: list[Question] = []
    while len(out) < n and any(by_hops.values()):
        for hops in sorted(by_hops):
            if by_hops[hops] and len(out) < n:
                out.append(by_hops[hops].pop(0))
    return out


@dataclass
class Recorded:
    """One question of a recording, with each method's run and whether it is still current. A run
    recorded by other code is still shown, labelled (`note`): a true, dated picture of what that
    code did is worth more to a visitor than a blank column."""
    question: str
    hops: Optional[int]
    gold: list[str]
    runs: dict[str, RunResult]
    stale: dict[str, str] = field(default_factory=dict)   # method → why it is not current
    notes: dict[str, str] = field(default_factory=dict)   # method → the label its column carries

    @property
    def current_runs(self) -> dict[str, RunResult]:
        return {m: r for m, r in self.runs.items() if m not in self.stale}

    @property
    def label(self) -> str:
        return f"[{self.hops}-hop] {self.question}" if self.hops else self.question


@dataclass
class Showcase:
    kb: str
    recorded_at: str
    model: str
    profile: str
    methods: list[str]
    items: list[Recorded]

    versions: dict[str, str] = field(default_factory=dict)    # method → code version it was recorded with
    dates: dict[str, str] = field(default_factory=dict)       # method → the day it was recorded
    conditions: dict[str, dict] = field(default_factory=dict)  # method → idle.Conditions as recorded

    @property
    def banner(self) -> str:
        # The model without its file's source ("(Qwen/…-GGUF (Q4_K_M))", the banner's hover text):
        # the banner stays one line over the first view's columns.
        short = self.model.split(" (")[0]
        return f"recorded on {self.recorded_at} with {short} (profile {self.profile}){self.where}"

    @property
    def where(self) -> str:
        """", on AMD EPYC · 2 cores · avx2, idle" when every method was recorded on one machine; a
        recording that kept no conditions says so, so its latencies are not read as this machine's."""
        seen = {(c.get("machine"), c.get("verdict")) for c in self.conditions.values()}
        if not self.conditions:
            return "; machine and load not recorded"
        if len(seen) == 1:
            machine, verdict = next(iter(seen))
            return f", on {machine}, {verdict}"
        counts = Counter((c.get("machine"), c.get("verdict")) for c in self.conditions.values()).most_common(2)
        if counts[0][1] > counts[1][1]:
            # Most methods on one machine: said once here, and only the others' columns name theirs
            # (ui/tabs/shared.py), so one method recorded again elsewhere adds no line to every column.
            (machine, verdict), _ = counts[0]
            others = sorted(m for m, c in self.conditions.items() if (c.get("machine"), c.get("verdict"))
                            != (machine, verdict))
            column = "its column says" if len(others) == 1 else "their columns say"
            return f", on {machine}, {verdict}; {', '.join(others)} elsewhere, as {column}"
        return "; methods recorded on different machines or loads: each column names its own"

    def recorded_by(self, method: str) -> str:
        """"version 5d7bca6 on 2026-11-23", or the date alone for a recording that kept no version."""
        when = self.dates.get(method) or self.recorded_at
        version = self.versions.get(method)
        return f"version {version} on {when}" if version else f"an earlier version on {when}"

    def find(self, label_or_question: str) -> Optional[Recorded]:
        return next((r for r in self.items if label_or_question in (r.label, r.question)), None)


# How a recording is compressed, told by its first bytes on read and by its name on write.
_GZIP_MAGIC, _XZ_MAGIC = b"\x1f\x8b", b"\xfd7zXZ\x00"


def _loads(raw: bytes):
    """orjson where it can (the shipped experiment is ~160 MB of JSON: 5.9 s with the stdlib, 4.4 s
    with orjson, 1.1 s with the cyclic collector paused: retrieval/core/gcpause.py); the stdlib for
    what orjson refuses and `json.dumps` writes, such as NaN."""
    import orjson

    with gcpause.paused():
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return json.loads(raw)


def read_recording(path: Path, what: str, fmt: int) -> dict:
    """A JSON recording, gzip- or xz-compressed (this showcase, or the shipped experiment:
    traces/storage/shipped.py); an unreadable file or another format is a HopTraceError naming `what`."""
    try:
        raw = path.read_bytes()
        if raw.startswith(_XZ_MAGIC):
            raw = lzma.decompress(raw)
        elif raw.startswith(_GZIP_MAGIC):
            raw = gzip.decompress(raw)
        else:
            raise ValueError("neither gzip nor xz")
        doc = _loads(raw)
    except (OSError, ValueError, lzma.LZMAError) as e:
        raise HopTraceError(f"{what} {path}: not a readable recording ({e})") from e
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise HopTraceError(f"{what} {path}: format {got!r}, this version reads {fmt}")
    return doc


def write_recording(doc: dict, out: Path) -> None:
    """Written whole or not at all: a partial file first, then renamed over `out`. A name ending in
    .xz is xz-compressed: the shipped experiment's runs repeat the same passages, entities and
    prompts across methods and questions, which gzip's 32 KB window cannot see and xz's can
    (9.3 MB as gzip, 3.8 MB as xz, for 900 runs). Preset 9: its 64 MB dictionary reaches runs of the
    same question recorded hours apart, which preset 6's 8 MB missed (1,860 runs: 8.08 -> 6.39 MB;
    ~0.7 GB of memory to write, 65 MB to read)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".partial")
    if out.suffix == ".xz":
        f = lzma.open(tmp, "wt", encoding="utf-8", preset=9)
    else:
        f = gzip.open(tmp, "wt", encoding="utf-8")
    with f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"), default=str)
    tmp.replace(out)


def _read(path: Path) -> dict:
    return read_recording(path, "showcase", FORMAT)


def record(ctx: Context, kb: str, questions: Sequence[Question], methods: Sequence[str] = DEFAULT_METHODS,
           k: int = 10, out: Optional[Path] = None,
           on_run: Optional[Callable[[int, int, str, RunResult], None]] = None, update: bool = False,
           version: str = "") -> Path:
    """Run each method on each question and write the recording (atomically).

    update=True re-records only `methods` into the existing recording, on its own questions,
    and keeps every other method's runs: after a change to one method, only that method's
    LLM time is spent again. `version`: the code's version (a commit), kept per method so a
    stale run can say what recorded it."""
    if ctx.llm is None:
        raise HopTraceError("recording the showcase needs an LLM (the LLM methods are what it shows)")
    out = out or path_for(kb)
    old = None
    if update:
        if not out.exists():
            raise HopTraceError(f"--update: there is no recording at {out} to update; record without --update")
        old = _read(out)
        # Started first: a model not yet started describes itself by its settings alone
        # ("… qwen2.5-coder-1.5b"), a started one with its file, which is what was recorded.
        ctx.llm.start()
        if old["model"] != ctx.llm.describe():
            raise HopTraceError(f"--update: {out} was recorded with {old['model']}, not {ctx.llm.describe()}; "
                                "one recording holds one model, so record every method again")
        by_text = {q.text: q for q in ctx.store.questions()}
        missing = [it["question"] for it in old["items"] if it["question"] not in by_text]
        if missing:
            raise HopTraceError(f"--update: KB {kb} lacks {len(missing)} of the recording's questions, "
                                f"e.g. {missing[0][:80]!r}")
        questions = [by_text[it["question"]] for it in old["items"]]
    instances = {m: make_method(m, ctx) for m in methods}
    items = []
    total = len(questions) * len(methods)
    with idle.Watch() as watch:
        for qi, q in enumerate(questions):
            runs = {}
            for m, method in instances.items():
                run = method.run(q.text, k=k)
                runs[m] = run.to_dict()
                if on_run:
                    on_run(qi * len(methods) + len(runs), total, m, run)
            items.append({"question": q.text, "hops": q.hops, "gold": list(q.gold_passage_ids), "runs": runs})
    conditions = watch.conditions
    for it in items:   # the verdict covers the whole recording, so it is known only now
        for r in it["runs"].values():
            r["load"] = conditions.verdict
    llm_methods = [m for m in methods if METHODS[root_method(m)].uses_llm]
    today = dt.date.today().isoformat()
    doc = {"format": FORMAT, "kb": kb, "recorded_at": today, "model": ctx.llm.describe(),
           "profile": instances[llm_methods[0]].profile if llm_methods else "paper",
           "methods": list(methods), "profiles": {m: instances[m].profile for m in methods},
           "fingerprints": {m: fingerprint(m, instances[m].profile) for m in methods},
           "recorded_on": {m: today for m in methods}, "recorded_with": {m: version for m in methods if version},
           "conditions": {m: conditions.as_dict() for m in methods}, "items": items}
    if old is not None:
        kept = [m for m in old["methods"] if m not in methods]
        for new_item, old_item in zip(items, old["items"]):
            new_item["runs"] = {**{m: old_item["runs"][m] for m in kept}, **new_item["runs"]}
        doc["methods"] = kept + list(methods)
        doc["fingerprints"] = {**{m: old["fingerprints"][m] for m in kept}, **doc["fingerprints"]}
        doc["profiles"] = {**{m: recorded_profile(old, m) for m in kept}, **doc["profiles"]}
        dates = old.get("recorded_on") or {m: old["recorded_at"] for m in old["methods"]}
        doc["recorded_on"] = {**{m: dates[m] for m in kept}, **doc["recorded_on"]}
        versions = old.get("recorded_with") or {}
        doc["recorded_with"] = {**{m: versions[m] for m in kept if m in versions}, **doc["recorded_with"]}
        kept_conditions = old.get("conditions") or {}
        doc["conditions"] = {**{m: kept_conditions[m] for m in kept if m in kept_conditions}, **doc["conditions"]}
        if not llm_methods:  # an LLM-free method re-recorded says nothing about the LLM methods' profile
            doc["profile"] = old["profile"]
    write_recording(doc, out)
    return out


def recorded_profile(doc: dict, method: str) -> str:
    """The profile a recording ran `method` on (one recorded before each method's was kept: the
    LLM methods' one, and `local` for an LLM-free method, as profiles.resolve gives it)."""
    named = (doc.get("profiles") or {}).get(method)
    if named:
        return named
    uses_llm = root_method(method) in METHODS and METHODS[root_method(method)].uses_llm
    return (doc.get("profile") or "local") if uses_llm else "local"


def current_fingerprints(doc: dict) -> dict[str, str]:
    """{method: this code's fingerprint} for a recording's methods, each taken as its own was."""
    return {m: fingerprint_like(fp, m, recorded_profile(doc, m)) for m, fp in doc["fingerprints"].items()
            if root_method(m) in METHODS}


def load(path: Path) -> Showcase:
    """Read a recording; runs whose method's fingerprint changed since are marked stale."""
    doc = _read(path)
    now = current_fingerprints(doc)
    stale = {m: ("recorded with other prompts or code than this version's" if now.get(m) != fp
                 else "") for m, fp in doc["fingerprints"].items()}
    stale = {m: why for m, why in stale.items() if why}
    by_day = doc.get("recorded_on") or {}
    dates = sorted(set(by_day.values())) or [doc["recorded_at"]]
    when = dates[0] if len(dates) == 1 else f"{dates[0]} – {dates[-1]}"  # an --update kept older runs
    sc = Showcase(doc["kb"], when, doc["model"], doc["profile"], doc["methods"], [],
                  versions=dict(doc.get("recorded_with") or {}), dates=dict(by_day),
                  conditions=dict(doc.get("conditions") or {}))
    notes = {m: f"recorded with {sc.recorded_by(m)}; its code or prompts changed since" for m in stale}
    sc.items = [Recorded(it["question"], it.get("hops"), it["gold"],
                         {m: RunResult.from_dict(r) for m, r in it["runs"].items()}, dict(stale), dict(notes))
                for it in doc["items"]]
    return sc


def load_for(kb: str) -> Optional[Showcase]:
    """The shipped recording for a KB, or None when there is none."""
    p = path_for(kb)
    return load(p) if p.exists() else None
