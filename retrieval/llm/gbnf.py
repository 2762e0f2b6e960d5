"""A JSON schema as a GBNF grammar, with the whitespace between JSON tokens fixed by us.

llama-server turns a request's JSON schema into a grammar itself, and its grammar lets the model
write a space, or newlines and up to 20 spaces of indentation, between any two tokens. The 1.5B
model takes that room: on 50 demo questions GEAR wrote 247 tokens a question against 166 under
the one optional space llama-cpp-python's grammar allowed, at ~30 ms a written token, and its
greedy choices changed with them (docs/measurements/llama-server.md). So the embedded server is
sent our grammar, as the request's `grammar` field: one optional space where JSON allows it
(`schema_grammar`, the spacing the methods were measured with), or none at all for a task that
marks its schema compact (`compact_grammar`, compact.py). Ours, for the schema keywords
HopTrace's tasks use; any other keyword is refused (ValueError), never ignored, so a grammar can
never be looser than its schema (the server then gets the schema and uses its own grammar).

Objects allow exactly their listed properties, in the listed order: the required ones always,
the others each optionally (what llama.cpp's converter allows too, when additionalProperties is
not given).
"""
from __future__ import annotations

import json
import re

# The keywords each schema type may carry (plus "type"); "description" and "title" say nothing
# about the shape.
_KNOWN = {
    "object": {"properties", "required", "additionalProperties"},
    "array": {"items", "minItems", "maxItems"},
    "string": {"maxLength", "minLength"},
    "integer": set(), "number": set(), "boolean": set(), "null": set(),
}
_NOTES = {"description", "title"}

_BASE = {
    "char": r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "string": '"\\"" char* "\\""',
    "integer": '"-"? ([0-9] | [1-9] [0-9]{0,15})',
    "number": '"-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?',
    "boolean": '"true" | "false"',
    "null": '"null"',
    "space": '" "?',
}


def literal(text: str) -> str:
    """A GBNF string literal that matches `text` exactly."""
    return '"' + "".join(_escape(c) for c in text) + '"'


def _escape(c: str) -> str:
    if c in '"\\':
        return "\\" + c
    if c == "\n":
        return "\\n"
    if c == "\r":
        return "\\r"
    if c == "\t":
        return "\\t"
    if ord(c) < 0x20 or ord(c) == 0x7F:
        return f"\\x{ord(c):02X}"
    return c


def _repeat(item: str, low: int, high: int | None, ws: str = "") -> str:
    """`item` written low..high times, comma-separated (high None: no upper bound)."""
    if high is not None and high < low:
        raise ValueError(f"maxItems {high} is below minItems {low}")
    if high == 0:
        return ""
    more_low, more_high = max(low - 1, 0), None if high is None else high - 1
    if more_high == 0:
        more = ""
    elif more_high is None:
        more = f'(","{ws} {item})' + ("*" if more_low == 0 else f"{{{more_low},}}")
    else:
        more = f'(","{ws} {item}){{{more_low},{more_high}}}'
    seq = f"{item} {more}".strip()
    return seq if low >= 1 else f"({seq})?"


class _Grammar:
    def __init__(self, spaced: bool):
        self.rules: dict[str, str] = {}
        self.base: set[str] = set()
        # After every value and after `{`, `[`, `,` and `:`: where llama-cpp-python's JSON grammar
        # allowed its one optional space.
        self.ws = " space" if spaced else ""
        if spaced:
            self.base.add("space")

    def rule(self, hint: str, body: str) -> str:
        """A named rule for `body` (one per distinct body: the same shape is written once)."""
        for name, existing in self.rules.items():
            if existing == body:
                return name
        stem = re.sub(r"[^a-zA-Z0-9-]+", "-", hint).strip("-").lower() or "r"
        name, n = stem, 1
        while name in self.rules or name in _BASE or name == "root":
            n += 1
            name = f"{stem}-{n}"
        self.rules[name] = body
        return name

    def use(self, base: str) -> str:
        self.base.add(base)
        if base == "string":
            self.base.add("char")
        if self.ws:
            return self.rule(f"{base}-value", f"{base}{self.ws}")
        return base

    def visit(self, schema: dict, hint: str) -> str:
        """The rule name (or an inline expression) for one schema."""
        if not isinstance(schema, dict):
            raise ValueError(f"{hint}: a schema must be an object, got {schema!r}")
        if "const" in schema:
            return literal(json.dumps(schema["const"], separators=(",", ":"), ensure_ascii=False)) + self.ws
        if "enum" in schema:
            alts = [literal(json.dumps(v, separators=(",", ":"), ensure_ascii=False)) for v in schema["enum"]]
            if not alts:
                raise ValueError(f"{hint}: an empty enum matches nothing")
            return self.rule(hint, f"({' | '.join(alts)}){self.ws}" if self.ws else " | ".join(alts))
        kind = schema.get("type")
        if kind not in _KNOWN:
            raise ValueError(f"{hint}: type {kind!r} is not one the compact grammar writes "
                             f"({', '.join(sorted(_KNOWN))})")
        unknown = set(schema) - _KNOWN[kind] - _NOTES - {"type"} - {k for k in schema if k.startswith("x-")}
        if unknown:
            raise ValueError(f"{hint}: {kind} keyword(s) {', '.join(sorted(unknown))} not supported")
        if kind == "object":
            return self._object(schema, hint)
        if kind == "array":
            item = self.visit(schema.get("items", {"type": "string"}), f"{hint}-item")
            items = _repeat(item, int(schema.get("minItems", 0)), _int_or_none(schema.get("maxItems")), self.ws)
            return self.rule(hint, f'"["{self.ws} {items} "]"{self.ws}' if items else f'"["{self.ws} "]"{self.ws}')
        if kind == "string" and ("maxLength" in schema or "minLength" in schema):
            low, high = int(schema.get("minLength", 0)), _int_or_none(schema.get("maxLength"))
            count = f"{{{low},}}" if high is None else f"{{{low},{high}}}"
            self.base.add("char")
            return self.rule(hint, f'"\\"" char{count} "\\""{self.ws}')
        return self.use(kind)

    def _object(self, schema: dict, hint: str) -> str:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") not in (None, False):
            raise ValueError(f"{hint}: additionalProperties other than false is not supported")
        required = list(schema.get("required", []))
        missing = [r for r in required if r not in props]
        if missing:
            raise ValueError(f"{hint}: required {', '.join(missing)} not among its properties")
        pair = {k: f'{literal(json.dumps(k, ensure_ascii=False))}{self.ws} ":"{self.ws} {self.visit(v, f"{hint}-{k}")}'
                for k, v in props.items()}
        must = [pair[k] for k in props if k in required]
        optional = [pair[k] for k in props if k not in required]
        tail = self._optional_chain(optional, hint)
        comma = f'","{self.ws}'
        if must:
            body = f" {comma} ".join(must) + (f" ({comma} {tail})?" if tail else "")
        else:
            body = f"({tail})?" if tail else ""
        return self.rule(hint, f'"{{"{self.ws} {body} "}}"{self.ws}' if body else f'"{{"{self.ws} "}}"{self.ws}')

    def _optional_chain(self, pairs: list[str], hint: str) -> str:
        """Any in-order subset (at least one) of `pairs`, comma-separated."""
        if not pairs:
            return ""
        chain = pairs[-1]
        for p in reversed(pairs[:-1]):
            chain = self.rule(f"{hint}-opt", f'{p} (","{self.ws} {chain})? | {chain}')
        return chain


def _int_or_none(v) -> int | None:
    return None if v is None else int(v)


def compact_grammar(schema: dict) -> str:
    """The GBNF grammar (root rule first) of JSON values matching `schema`, written without any
    whitespace between tokens. ValueError names a keyword the grammar cannot honour."""
    return _grammar(schema, spaced=False)


def schema_grammar(schema: dict) -> str:
    """The same, with one optional space after every value and after `{`, `[`, `,` and `:`."""
    return _grammar(schema, spaced=True)


def _grammar(schema: dict, spaced: bool) -> str:
    g = _Grammar(spaced)
    root = g.visit(schema, "root")
    if root in g.rules and not any(re.search(rf"(?<![\w-]){re.escape(root)}(?![\w-])", body)
                                   for name, body in g.rules.items() if name != root):
        root = g.rules.pop(root)   # the top rule is written as root itself
    lines = [f"root ::= {root}"]
    lines += [f"{name} ::= {body}" for name, body in g.rules.items()]
    lines += [f"{name} ::= {_BASE[name]}" for name in _BASE if name in g.base]
    return "\n".join(lines) + "\n"
