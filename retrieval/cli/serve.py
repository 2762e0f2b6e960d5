"""`hoptrace serve`: start the web app."""
from __future__ import annotations

from .common import _llm_args


def add_parsers(sub) -> None:
    s = sub.add_parser("serve", help="start the web app")
    s.add_argument("--port", type=int, default=None)
    s.add_argument("--host", default=None)
    s.add_argument("--public", action="store_true", default=None,
                   help="public mode: each visitor sees only their own runs, caps on uploads, benchmarks and "
                        "LLM work, no server paths on the page (env HOPTRACE_PUBLIC=1; on in the Dockerfile)")
    s.add_argument("--otlp", default=None, metavar="URL",
                   help="send each new run's spans (OpenInference) to this OTLP/HTTP collector, e.g. Phoenix at "
                        "http://127.0.0.1:6006, in the background (env HOPTRACE_OTLP_ENDPOINT)")
    _llm_args(s)


def cmd_serve(args) -> int:
    from ui.app import main as serve

    from ..llm import LLMSettings

    # The flags win over the environment (docs/usage.md's --llm table); parsed here so a bad spec
    # fails before the app starts.
    serve(host=args.host, port=args.port, llm_settings=LLMSettings.parse(args.llm, args.llm_model),
          profile=args.profile, public=args.public, otlp=args.otlp)
    return 0


COMMANDS = {"serve": cmd_serve}
