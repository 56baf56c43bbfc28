"""The docs check: every saltbench command and flag the docs name exists, and every link and
image in them resolves (files and #anchors)."""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

import pytest

from bench.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Flags of other tools the docs name: pytest-benchmark's, vllm-router's, and the vLLM flag
#: the replicas pass for KV events (the help texts in the fixtures are of other sections).
OTHER_TOOLS = {"--benchmark-autosave", "--benchmark-compare", "--benchmark-compare-fail",
               "--kv-event-source", "--kv-events-config",
               "--head", "--address", "--num-cpus", "--port"}  # the last: `ray start`
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
SPAN = re.compile(r"`([^`]+)`")  # inline code may wrap across lines
FLAG = re.compile(r"(?<![\w=-])(--[a-z][a-z0-9-]*)")
#: A vLLM flag given as an option's value: ``--serve-arg=--mm-processor-cache-gb=0``.
VALUE_FLAG = re.compile(r"(?<==)(--[a-z][a-z0-9-]*)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {_slug(m) for m in re.findall(r"^#+\s+(.*)$", text, re.M)}


@cache
def _flags(command: str) -> frozenset[str]:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if a.dest == "command")
    return frozenset(o for a in sub.choices[command]._actions for o in a.option_strings)


@cache
def _known_flags() -> frozenset[str]:
    """vLLM's flags (its help text in the fixtures) and those of saltbench's other entry
    points (the pytest plugin, the zero-work server, the benchmark scripts)."""
    texts = [p.read_text() for p in (ROOT / "tests/fixtures/serve-help").glob("*.txt")]
    for src in (ROOT / "bench/pytest_plugin.py", *(ROOT / "bench/zerowork").glob("*.py"),
                *(ROOT / "tests/benchmarks").glob("*.py")):
        texts += re.findall(r"[\"'](--[a-z][a-z0-9-]*)[\"']", src.read_text())
    return frozenset(FLAG.findall(" ".join(texts)))


def _invocations(text: str) -> list[list[str]]:
    """Every saltbench command line: fenced lines (continuations joined) and inline spans,
    as the words after ``run_bench.py``/``saltbench``, or spans that start with a command."""
    out = []
    for block in FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            words = line.split("#", 1)[0].split()
            for i, w in enumerate(words[:-1]):
                if w.endswith("run_bench.py") or w == "saltbench":
                    out.append(words[i + 1:])
    for span in SPAN.findall(FENCE.sub("", text)):
        words = span.split()
        if words and words[0] in COMMANDS and len(words) > 1:
            out.append(words)
        for i, w in enumerate(words[:-1]):
            if w.endswith("run_bench.py") or w == "saltbench":
                out.append(words[i + 1:])
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_and_images_resolve(doc: Path):
    missing = []
    for target in LINK.findall(FENCE.sub("", doc.read_text())):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked here
            continue
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            missing.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            missing.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not missing, f"{doc.name}: " + "; ".join(missing)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_commands_and_flags_exist(doc: Path):
    text = doc.read_text()
    wrong = []
    named: set[str] = set()
    for words in _invocations(text):
        command = words[0]
        if command not in COMMANDS:
            if not (command.startswith("-") or command.isupper()):  # flags, placeholders
                wrong.append(f"no command {command!r} ({shlex.join(words)})")
            continue
        for flag in FLAG.findall(" ".join(words[1:])):
            named.add(flag)
            if flag not in _flags(command):
                wrong.append(f"`{command}` has no {flag}")
        wrong += [f"{flag} (a value in `{shlex.join(words)}`) is no vLLM flag"
                  for flag in VALUE_FLAG.findall(" ".join(words[1:]))
                  if flag not in _known_flags()]
    every = set().union(*(_flags(c) for c in COMMANDS))
    for span in SPAN.findall(text):
        for flag in FLAG.findall(span) + VALUE_FLAG.findall(span):
            if flag not in every | named | _known_flags() | OTHER_TOOLS:
                wrong.append(f"{flag} (in `{span}`) is no flag of saltbench, its plugin or vLLM")
    assert not wrong, f"{doc.name}: " + "; ".join(sorted(set(wrong)))


def test_the_check_sees_a_wrong_flag_and_a_broken_link(tmp_path: Path):
    """The checks above can fail: a made-up flag and a dangling link are found."""
    assert "--no-such-flag" not in _flags("run") | _known_flags()
    assert {"--saltbench-gate", "--itl-ms", "--enable-scale-out"} <= _known_flags()
    assert _invocations("`run --no-such-flag`") == [["run", "--no-such-flag"]]
    words = " ".join(_invocations("`ab --new-serve-arg=--no-such-vllm-flag=1`")[0][1:])
    assert FLAG.findall(words) == ["--new-serve-arg"]
    assert VALUE_FLAG.findall(words) == ["--no-such-vllm-flag"]
    assert "--mm-processor-cache-gb" in _known_flags()
    assert _slug("Exit codes") == "exit-codes"
    assert _slug("Same-build noise and the gate's thresholds") == (
        "same-build-noise-and-the-gates-thresholds")


def test_readme_is_a_front_page():
    """Under 10 KB, with the Quick start and its two commands on the first screen."""
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) < 10 * 1024
    first_screen = "\n".join(text.splitlines()[:50])
    assert "## Quick start" in first_screen
    assert "make demo" in first_screen and "make test" in first_screen


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_shows_each_command_as_written(command: str | None) -> None:
    """argparse formats help with %: a bare '%' in a help text garbles the listing."""
    text = " ".join(build_parser(command).format_help().split())
    for name, help_text in COMMANDS.items():
        assert " ".join(help_text.replace("%%", "%").split()) in text, name
