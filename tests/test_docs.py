"""The README cannot promise a command or a flag `hoptrace` does not have, `hoptrace --help` lists
every command once in its sections, and every command's example parses (retrieval/cli/__init__.py)."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from retrieval.cli import EXAMPLES, HELP_SECTIONS, _parser, commands

ROOT = Path(__file__).resolve().parents[1]


def command_lines(text: str) -> list[str]:
    """Every `hoptrace …` command in the text's code blocks and inline code, comments dropped."""
    blocks = [b.replace("\\\n", " ") for b in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, flags=re.S)]
    inline = re.findall(r"`([^`\n]*hoptrace [^`\n]*)`", re.sub(r"```.*?```", "", text, flags=re.S))
    out = []
    for line in [x for b in blocks for x in b.splitlines()] + inline:
        line = line.split(" # ")[0].split("  #")[0].strip()
        if re.search(r"(^|/|\s)hoptrace\s", line) and "hoptrace COMMAND" not in line:
            out.append(line)
    return out


def resolve(tokens: list[str]):
    """The (sub)command's parser and name for the tokens after `hoptrace`."""
    parsers = dict(commands(_parser()))
    name = tokens[0]
    if len(tokens) > 1 and f"{name} {tokens[1]}" in parsers:
        name = f"{name} {tokens[1]}"
    if name not in parsers:
        raise AssertionError(f"`hoptrace {name}` is not a command")
    return name, parsers[name]


# The documents a user copies commands from: they spell every flag as the CLI does now.
USER_DOCS = ("README.md", "docs/usage.md", "docs/tutorial.md")


@pytest.mark.parametrize("doc", USER_DOCS)
def test_every_command_and_flag_a_users_doc_shows_exists_in_its_current_spelling(doc):
    from retrieval.cli.flags import check_old_spellings

    lines = command_lines((ROOT / doc).read_text())
    assert len(lines) >= 10, f"{doc}: its commands"
    for line in lines:
        tokens = shlex.split(line.replace("...", "X"))
        tokens = tokens[next(i for i, t in enumerate(tokens) if t.endswith("hoptrace")) + 1:]
        if not tokens or tokens[0] == "--help":
            continue
        name, parser = resolve(tokens)
        known = {s for a in parser._actions for s in a.option_strings}
        for flag in (t.split("=")[0] for t in tokens if t.startswith("--")):
            assert flag in known, f"{doc}: `hoptrace {name}` has no {flag} (in: {line})"
        check_old_spellings(tokens)   # raises, naming the new spelling, on an old one


def test_the_readme_stays_short_and_keeps_the_space_front_matter():
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) <= 12_500
    assert text.startswith("---\ntitle: HopTrace\n") and "sdk: docker" in text and "app_port: 7860" in text
    assert text.count("```bash\nbash scripts/") == 2, "exactly the two set-up commands"
    for link in re.findall(r"\]\(((?:docs|examples|data)/[^)#]+)", text):
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_docs_index_names_every_document():
    index = (ROOT / "docs" / "README.md").read_text()
    for doc in sorted((ROOT / "docs").glob("*.md")):
        if doc.name != "README.md":
            assert f"({doc.name})" in index, f"docs/README.md does not say what {doc.name} holds"


def test_help_lists_every_command_once_by_section():
    top = [name for name, _ in commands(_parser()) if " " not in name]
    listed = [n for _, names in HELP_SECTIONS for n in names]
    assert sorted(listed) == sorted(top) and len(set(listed)) == len(listed)
    text = _parser().format_help()
    for title, names in HELP_SECTIONS:
        assert f"{title}:" in text and all(f"  {n} " in text for n in names)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_commands_example_parses(name):
    tokens = shlex.split(EXAMPLES[name])
    assert tokens[0] == "hoptrace"
    args = _parser().parse_args(tokens[1:])
    assert args.command == name.split()[0]


def test_every_command_has_an_example():
    missing = [name for name, _ in commands(_parser()) if name not in EXAMPLES]
    assert not missing, f"commands without an example in their --help: {missing}"


def test_every_relative_link_in_the_docs_resolves():
    broken = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for link in re.findall(r"\]\(([^)#\s]+)", doc.read_text()):
            if not link.startswith(("http://", "https://")) and not (doc.parent / link).exists():
                broken.append(f"{doc.relative_to(ROOT)} → {link}")
    assert not broken, broken
