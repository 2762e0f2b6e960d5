"""Every change HopTrace makes to llama-cpp-python's internals, in one place, each checked.

The embedded server's speed rests on five patches of private names (docs/profiles.md, "The
embedded server's patches"), applied only in its child process (child.py):

    slim_states    Llama.save_state / load_state       prompt-cache states without logits
    fast_sampler   Llama._init_sampler                  greedy grammar sampling (sampling.py)
    compact_json   llama_chat_format._grammar_for_json_schema   no-space grammars (compact.py)
    early_stop     the same builder, wrapped after      DONE replies end early (early_stop.py)
    drafts         llama_speculative.LlamaPromptLookupDecoding, Llama.eval   (lookup.py)

A library change could turn any of them off without an error: a renamed keyword sends the
sampler wrapper back to the stock sampler, a grammar that no longer passes through the
builder ignores the marks. So before anything is patched `problems()` checks the version and
every private name, signature and call each patch relies on, and the child refuses to start,
naming what changed. After patching, `active()` checks each is in place, and `USED` counts
each one's use, which the child serves at STATUS_PATH for the app's start-up self-check
(backends.py) and the tests.
"""
from __future__ import annotations

import functools
import inspect
import json
from collections import Counter
from typing import Callable, Optional

# The version every patch was written against; scripts/setup.sh and pyproject.toml pin it.
PINNED = "0.3.36"
STATUS_PATH = "/hoptrace/status"
# Exit code of a child that refused to start: backends.py reads the log's `hoptrace:` line.
REFUSED = 3

PATCHES = ("slim_states", "fast_sampler", "compact_json", "early_stop", "drafts", "status_route")

# What each patch did, counted in the child since it started (served at STATUS_PATH).
USED: Counter = Counter()


# ---------------------------------------------------------------------------------------------
# What the patches rely on. Each check returns None when it holds, else what changed.

def _params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def _has_params(owner: str, fn, names: tuple[str, ...]) -> Optional[str]:
    missing = [n for n in names if n not in _params(fn)]
    return f"{owner} lacks parameter(s) {', '.join(missing)}" if missing else None


def _calls(owner: str, fn, snippets: tuple[str, ...]) -> Optional[str]:
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return f"{owner}: its source cannot be read to check what it calls"
    missing = [s for s in snippets if s not in src]
    return f"{owner} no longer contains {', '.join(repr(s) for s in missing)}" if missing else None


def _attrs(owner: str, obj, names: tuple[str, ...]) -> Optional[str]:
    missing = [n for n in names if not hasattr(obj, n)]
    return f"{owner} lacks {', '.join(missing)}" if missing else None


def _checks() -> list[tuple[str, Callable[[], Optional[str]]]]:
    """(patch, check) pairs; importing llama_cpp happens here, in the child only."""
    import llama_cpp
    from llama_cpp import _internals, llama_chat_format, llama_grammar, llama_speculative
    from llama_cpp.llama import Llama, LlamaState
    from llama_cpp.server import app as server_app
    from llama_cpp.server import model as server_model

    def version():
        got = getattr(llama_cpp, "__version__", "?")
        return None if got == PINNED else f"llama-cpp-python is {got}, the patches were written for {PINNED}"

    def grammar_fields():
        g = llama_grammar.LlamaGrammar.from_string('root ::= "a"', verbose=False)
        return _attrs("LlamaGrammar", g, ("_grammar", "_root"))

    def one_space_rule():
        from .compact import compact_gbnf
        try:
            compact_gbnf(llama_grammar.json_schema_to_gbnf(json.dumps({"type": "object"})))
        except ValueError as e:
            return f"llama_grammar.json_schema_to_gbnf: {e}"
        return None

    return [
        ("all", version),
        # slim_states: slim_state.py's slim_save and slim_load replace both and builds LlamaState itself.
        ("slim_states", lambda: _attrs("Llama", Llama, ("save_state", "load_state"))),
        ("slim_states", lambda: _has_params("LlamaState.__init__", LlamaState.__init__, (
            "input_ids", "scores", "n_tokens", "llama_state", "llama_state_size", "seed"))),
        ("slim_states", lambda: _attrs("llama_cpp", llama_cpp, (
            "llama_state_get_size", "llama_state_get_data", "llama_state_set_data"))),
        # generate() must replay a token after load_state, or the logits we drop would be read.
        ("slim_states", lambda: _calls("Llama.generate", Llama.generate, ("_requires_eval",))),
        # fast_sampler: the wrapper reads these keywords; a rename would fall back silently.
        ("fast_sampler", lambda: _has_params("Llama._init_sampler", getattr(Llama, "_init_sampler", None) or
                                             (lambda: None), ("temp", "grammar", "logits_processor"))),
        ("fast_sampler", lambda: _calls("Llama.generate", Llama.generate, (
            "self._init_sampler(", "grammar=grammar", "temp=temp"))),
        ("fast_sampler", lambda: _calls("Llama.sample", Llama.sample, ("self._sampler.sample(self._ctx",))),
        ("fast_sampler", lambda: _attrs("llama_cpp", llama_cpp, (
            "llama_sampler_init_grammar", "llama_sampler_apply", "llama_sampler_accept", "llama_sampler_free",
            "llama_get_logits_ith", "llama_token_data", "llama_token_data_array"))),
        ("fast_sampler", grammar_fields),
        ("fast_sampler", lambda: _calls("Llama.__init__", Llama.__init__, ("self._n_vocab", "self._model"))),
        # compact_json and early_stop: every schema grammar must be built through this one name.
        ("compact_json", lambda: _has_params("llama_chat_format._grammar_for_json_schema",
                                             getattr(llama_chat_format, "_grammar_for_json_schema", None) or
                                             (lambda: None), ("schema", "verbose", "fallback_to_json"))),
        ("compact_json", lambda: _calls("llama_chat_format._grammar_for_response_format",
                                        llama_chat_format._grammar_for_response_format,
                                        ("_grammar_for_json_schema(",))),
        ("compact_json", one_space_rule),
        # drafts: the server builds its draft model by attribute at load time, so the swap holds.
        ("drafts", lambda: _attrs("llama_speculative", llama_speculative, ("LlamaPromptLookupDecoding",))),
        ("drafts", lambda: _calls("llama_cpp.server.model.LlamaProxy.load_llama_from_model_settings",
                                  server_model.LlamaProxy.load_llama_from_model_settings,
                                  ("llama_speculative.LlamaPromptLookupDecoding(", "num_pred_tokens="))),
        ("drafts", lambda: _has_params("Llama.eval", Llama.eval, ("tokens",))),
        ("drafts", lambda: _calls("Llama.__init__", Llama.__init__, ("self._logits_all", "self._batch"))),
        ("drafts", lambda: _has_params("LlamaBatch.set_batch", _internals.LlamaBatch.set_batch,
                                       ("batch", "n_past", "logits_all"))),
        ("drafts", lambda: _attrs("LlamaContext", _internals.LlamaContext, ("kv_cache_seq_rm", "decode"))),
        # status_route: create_app is the server's documented entry (uvicorn ...app:create_app).
        ("status_route", lambda: _attrs("llama_cpp.server.app", server_app, ("create_app",))),
    ]


def problems() -> list[str]:
    """What changed in llama-cpp-python that a patch relies on, one line each; [] when all hold."""
    out = []
    for patch, check in _checks():
        try:
            why = check()
        except Exception as e:  # a check that cannot even run is itself a change
            why = f"{type(e).__name__}: {e}"
        if why:
            out.append(f"{patch}: {why}")
    return out


# ---------------------------------------------------------------------------------------------
# The patches. Each wrapper is tagged so `active()` can tell it is the one in place.

def _slim_states() -> None:
    from llama_cpp.llama import Llama

    from .slim_state import slim_load, slim_save

    original_load = Llama.load_state

    def save_state(self):
        USED["slim_states_saved"] += 1
        return slim_save(self)

    def load_state(self, state):
        if state.scores.shape[0]:  # a full state (not ours): the library's own path
            return original_load(self, state)
        USED["slim_states_loaded"] += 1
        return slim_load(self, state)

    save_state._hoptrace = load_state._hoptrace = "slim_states"
    Llama.save_state, Llama.load_state = save_state, load_state


def _fast_sampler() -> None:
    from llama_cpp.llama import Llama

    from .sampling import GreedyGrammarSampler

    original = Llama._init_sampler

    @functools.wraps(original)  # the checks read the library's signature through __wrapped__
    def init_sampler(self, *args, **kwargs):
        grammar = kwargs.get("grammar")
        if grammar is None or args or kwargs.get("temp", 0.8) != 0.0 or kwargs.get("logits_processor") is not None:
            if grammar is not None:
                USED["stock_sampler_grammar_replies"] += 1
            return original(self, *args, **kwargs)
        USED["fast_sampler_replies"] += 1
        chain = original(self, *args, **{**kwargs, "grammar": None})
        return GreedyGrammarSampler(self, chain, grammar)

    init_sampler._hoptrace = "fast_sampler"
    Llama._init_sampler = init_sampler


def _route_marked(key: str, build, tag: str) -> None:
    """A schema that carries the mark `key` gets its grammar from `build(parsed, inner, verbose,
    fallback_to_json)`; any other goes to the builder installed before (the library's own, or
    another mark's), so the order of installs decides who sees a schema first."""
    from llama_cpp import llama_chat_format

    inner = llama_chat_format._grammar_for_json_schema

    def grammar_for_json_schema(schema: str, verbose: bool = False, fallback_to_json: bool = True):
        try:
            parsed = json.loads(schema)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict) or not parsed.get(key):
            return inner(schema, verbose=verbose, fallback_to_json=fallback_to_json)
        USED[f"{tag}_grammars"] += 1
        return build(parsed, inner, verbose, fallback_to_json)

    grammar_for_json_schema._hoptrace = tag
    grammar_for_json_schema._hoptrace_inner = inner
    llama_chat_format._grammar_for_json_schema = grammar_for_json_schema


def _compact_json() -> None:
    from llama_cpp import llama_grammar

    from .compact import MARK, compact_gbnf, unmark

    def build(parsed: dict, inner, verbose: bool, fallback_to_json: bool):
        text = llama_grammar.json_schema_to_gbnf(json.dumps(unmark(parsed)))
        return llama_grammar.LlamaGrammar.from_string(compact_gbnf(text), verbose=verbose)

    _route_marked(MARK, build, "compact_json")


def _early_stop() -> None:
    from .early_stop import MARK

    def build(parsed: dict, inner, verbose: bool, fallback_to_json: bool):
        rest = {k: v for k, v in parsed.items() if k != MARK}
        grammar = inner(json.dumps(rest), verbose=verbose, fallback_to_json=fallback_to_json)
        grammar._hoptrace_stop_after = parsed[MARK]
        return grammar

    # After compact: a schema with both marks is seen here first, and the rest goes on to compact.
    _route_marked(MARK, build, "early_stop")


def _drafts() -> None:
    import llama_cpp.llama_speculative as spec
    from llama_cpp.llama import Llama

    from .lookup import PromptLookupDraft, eval_keeping_draft_logits

    class CountedDraft(PromptLookupDraft):
        def __call__(self, input_ids, /, **kwargs):
            out = super().__call__(input_ids, **kwargs)
            USED["draft_tokens_proposed"] += int(out.shape[0])
            return out

    def eval(self, tokens) -> None:
        if eval_keeping_draft_logits(self, tokens):
            USED["draft_check_batches"] += 1

    CountedDraft._hoptrace = eval._hoptrace = "drafts"
    spec.LlamaPromptLookupDecoding = CountedDraft
    Llama.eval = eval


def _status_route() -> None:
    """GET STATUS_PATH on the child's server: version, build, which patches are in place, USED."""
    import os

    import llama_cpp
    from llama_cpp.server import app as server_app

    original = server_app.create_app

    def create_app(*args, **kwargs):
        app = original(*args, **kwargs)

        def status() -> dict:
            return {"hoptrace_child": True, "pid": os.getpid(), "llama_cpp": llama_cpp.__version__,
                    "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace"),
                    "patches": active(), "used": dict(USED)}

        app.add_api_route(STATUS_PATH, status, methods=["GET"])
        return app

    create_app._hoptrace = "status_route"
    server_app.create_app = create_app


_APPLY = {"slim_states": _slim_states, "fast_sampler": _fast_sampler, "compact_json": _compact_json,
          "early_stop": _early_stop, "drafts": _drafts, "status_route": _status_route}


def install(*names: str) -> None:
    """Check, then put the named patches in place (in PATCHES order, whatever the call's order);
    raises PatchRefused naming every change found. A patch already in place is left alone."""
    found = problems()
    if found:
        raise PatchRefused(found)
    for name in PATCHES:  # this order: early_stop must wrap compact_json's builder
        if name in names and not _in_place()[name]:
            _APPLY[name]()


def apply() -> None:
    """Every patch: what the child does before it serves."""
    install(*PATCHES)


def _builders() -> list[str]:
    """The tags of the schema-grammar builders in place, outermost first."""
    from llama_cpp import llama_chat_format

    out, b = [], llama_chat_format._grammar_for_json_schema
    while getattr(b, "_hoptrace", None):
        out.append(b._hoptrace)
        b = getattr(b, "_hoptrace_inner", None)
    return out


def _in_place() -> dict[str, bool]:
    import llama_cpp.llama_speculative as spec
    from llama_cpp.llama import Llama
    from llama_cpp.server import app as server_app

    def tag(obj):
        return getattr(obj, "_hoptrace", None)

    builders = _builders()
    return {
        "slim_states": tag(Llama.save_state) == tag(Llama.load_state) == "slim_states",
        "fast_sampler": tag(Llama._init_sampler) == "fast_sampler",
        "compact_json": "compact_json" in builders,
        "early_stop": "early_stop" in builders,
        "drafts": tag(spec.LlamaPromptLookupDecoding) == tag(Llama.eval) == "drafts",
        "status_route": tag(server_app.create_app) == "status_route",
    }


def active() -> dict[str, bool]:
    """Which patches are in place and working as a set, looked up where the library calls them."""
    now = _in_place()
    # early_stop must see a schema before compact_json does: it hands the rest of it on.
    now["early_stop"] = now["early_stop"] and now["compact_json"] and _builders()[:1] == ["early_stop"]
    return now


class PatchRefused(RuntimeError):
    def __init__(self, found: list[str]):
        self.found = found
        super().__init__("the embedded LLM server refuses to start: llama-cpp-python changed where HopTrace "
                         "patches it (see retrieval/llm/patches.py):\n  " + "\n  ".join(found))


# ---------------------------------------------------------------------------------------------
# The app's side: what a started child must report (backends.EmbeddedLlamaCpp.self_check).

def status_problems(status: dict, cpu_flags: frozenset = frozenset()) -> list[str]:
    """What is wrong with a child's STATUS_PATH answer: not ours, another version, a build that
    crashes on this CPU, or a patch not in place."""
    if not status.get("hoptrace_child"):
        return ["the server on the child's port is not HopTrace's child (no patch status)"]
    out = []
    if status.get("llama_cpp") != PINNED:
        out.append(f"it runs llama-cpp-python {status.get('llama_cpp')}, expected {PINNED}")
    # ggml's AMX kernels die with SIGSEGV on the first decode on these CPUs (scripts/setup.sh).
    if "amx_tile" in cpu_flags and "AMX_INT8 = 1" in status.get("system_info", ""):
        out.append("its llama.cpp was built with AMX, which crashes on this CPU: run `bash scripts/setup.sh`")
    off = [name for name in PATCHES if not status.get("patches", {}).get(name)]
    if off:
        out.append(f"patch(es) not in place: {', '.join(off)}")
    return out
