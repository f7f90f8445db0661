"""Docs that run: every Python or shell sample in README.md and docs/*.md is checked.

Python samples must compile; test files among them (a ``def test_``) are collected by a real pytest
run against the simulator, which imports them and validates their markers' keywords. Shell samples
are parsed: each option of a ``pytest`` command must be one ``pytest --help`` lists, each option of a
``python -m pytest_sglang SUB`` (or ``pytest-sglang SUB``) command one that ``SUB --help`` lists.
"""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
SHELL = {"bash", "sh", "shell", "console"}
#: Placeholders a sample may use for a value the reader supplies.
PLACEHOLDER = re.compile(r"<[^>]+>|\.\.\.")


def _samples(kinds: set[str]) -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            if match.group(1) in kinds:
                line = text[: match.start()].count("\n") + 1
                found.append((f"{page.relative_to(ROOT)}:{line}", match.group(2)))
    return found


PYTHON = _samples({"python", "py"})
SHELL_SAMPLES = _samples(SHELL)


def _commands(block: str) -> list[list[str]]:
    """Each command of a shell block, split like the shell would (continuations joined, comments dropped)."""
    joined = re.sub(r"\\\n\s*", " ", block)
    commands = []
    for line in joined.splitlines():
        line = line.strip().removeprefix("$ ")
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue  # e.g. a heredoc body: not a command line
        current: list[str] = []
        for word in words:
            if word in ("&&", "||", ";", "|"):
                commands.append(current)
                current = []
            else:
                current.append(word)
        commands.append(current)
    return [c for c in commands if c]


def _strip_env(words: list[str]) -> list[str]:
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        words = words[1:]
    return words


@functools.cache
def _help(*command: str) -> str:
    done = subprocess.run([sys.executable, *command, "--help"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    return done.stdout + done.stderr


def _options(words: list[str]) -> list[str]:
    # A quoted word with spaces is a value (``--sglang-launch "--model-path M --tp 8"``), not an option.
    return [w.split("=", 1)[0] for w in words if w.startswith("--") and len(w) > 2 and " " not in w]


def _unknown(words: list[str], helptext: str) -> list[str]:
    known = set(re.findall(r"(--[\w-]+)", helptext))
    return [o for o in _options(words) if o not in known and not PLACEHOLDER.search(o)]


def _check_command(words: list[str]) -> list[str]:
    """The options of one command that its program does not know (empty: fine, or not ours)."""
    words = _strip_env(words)
    if not words:
        return []
    program = Path(words[0]).name
    rest = words[1:]
    if program in ("python", "python3") and rest[:2] == ["-m", "pytest"]:
        program, rest = "pytest", rest[2:]
    if program in ("python", "python3") and rest[:2] == ["-m", "pytest_sglang"]:
        program, rest = "pytest-sglang", rest[2:]
    if program == "pytest":
        return _unknown(rest, _help("-m", "pytest", "-p", "pytest_sglang.plugin"))
    if program == "pytest-sglang":
        # The sub-command path: the leading words before the first option (``golden record``).
        path = []
        for word in rest[:2]:
            if word.startswith("-") or not re.fullmatch(r"[a-z][a-z-]*", word):
                break
            path.append(word)
        return _unknown(rest[len(path):], _help("-m", "pytest_sglang", *path))
    return []


def test_there_are_samples_to_check() -> None:
    assert len(PYTHON) >= 10 and len(SHELL_SAMPLES) >= 10


@pytest.mark.parametrize(("where", "code"), PYTHON, ids=[w for w, _ in PYTHON])
def test_python_sample_compiles(where: str, code: str) -> None:
    try:
        compile(code, where, "exec")
    except SyntaxError as exc:
        pytest.fail(f"{where}: the Python sample does not compile: {exc}", pytrace=False)


@pytest.mark.parametrize(("where", "block"), SHELL_SAMPLES, ids=[w for w, _ in SHELL_SAMPLES])
def test_shell_sample_options_exist(where: str, block: str) -> None:
    unknown = [(" ".join(c)[:120], bad) for c in _commands(block) if (bad := _check_command(c))]
    assert not unknown, f"{where}: options that --help does not list: {unknown}"


TEST_FILES = [(w, c) for w, c in PYTHON if re.search(r"^def test_", c, re.M)]
#: A sketch leaves parts to the reader (``[...]``, ``...``): it is compiled and collected, not run. So is a
#: soak: it holds its load for its real ``duration_s`` (15 minutes in the docs), whatever the simulated time.
RUNNABLE = [(w, c) for w, c in TEST_FILES if "..." not in c and "sglang_soak(" not in c]
#: The seed deployment of examples/pytest.ini, which the docs' samples are written against, but faster.
SEED_LAUNCH = ("--model-path moonshotai/Kimi-K2.5 --tp-size 8 --mem-fraction-static 0.93 --enable-hierarchical-cache "
               "--hicache-size 48 --enable-metrics --sim-profile kimi-k2.5-rtx6000x8 --sim-time-scale 0.005")
#: What a broken sample raises (a gate's verdict, a skip or a missing data file is not a broken sample).
BROKEN = re.compile(r"^(FAILED|ERROR) (test_sample_\d+)\.py::\S+ - (AttributeError|NameError|TypeError|KeyError|"
                    r"ImportError|ModuleNotFoundError|SyntaxError|ValueError|IndexError|UsageError|"
                    r"Failed: invalid pytest-sglang marker)", re.M)


def _write(pytester: pytest.Pytester, samples: list[tuple[str, str]]) -> dict[str, str]:
    """The samples as test files (``import pytest`` added: samples leave it out); file stem -> where."""
    for n, (_, code) in enumerate(samples):
        prelude = "" if re.search(r"^import pytest$", code, re.M) else "import pytest\n"
        pytester.makepyfile(**{f"test_sample_{n}": prelude + code})
    return {f"test_sample_{n}": w for n, (w, _) in enumerate(samples)}


#: A marker that needs a launch flag the seed does not have (``--speculative-algorithm``): another deployment.
NEEDS_LAUNCH = re.compile(r"^(test_sample_\d+)\.py::\S+: @pytest\.mark\.\w+ needs .* in the server launch args", re.M)


def _collect(pytester: pytest.Pytester, where: dict[str, str]) -> set[str]:
    """Collect the samples under the seed launch; the samples written for another deployment are returned."""
    result = pytester.runpytest_subprocess("--sglang-simulate", f"--sglang-launch={SEED_LAUNCH}", "--collect-only",
                                           "-q", "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    errors = [where.get(name, name) for name in re.findall(r"ERROR collecting (test_sample_\d+)\.py", text)]
    assert not errors, f"doc samples that do not collect: {errors}\n{text[-3000:]}"
    other = set(NEEDS_LAUNCH.findall(text))
    problems = [line for line in text.split("invalid pytest-sglang marker:", 1)[-1].splitlines()
                if line.startswith("test_sample_") and not NEEDS_LAUNCH.match(line)] if result.ret else []
    assert result.ret in (0, pytest.ExitCode.USAGE_ERROR) and not problems, text[-3000:]
    assert result.ret == 0 or other, text[-3000:]
    return other


def test_sample_test_files_collect_against_the_simulator(pytester: pytest.Pytester) -> None:
    """Every test file of the docs imports and its markers' keywords validate (what collection checks)."""
    _collect(pytester, _write(pytester, TEST_FILES))


@pytest.mark.slow
def test_runnable_sample_test_files_run_against_the_simulator(pytester: pytest.Pytester) -> None:
    """Each complete test file of the docs runs against the seed on the simulator.

    A gate may fail (the samples' floors are the seed's on a GPU), a test may be skipped or miss a
    data file; a sample must not be broken (``sglang_gate.context`` raised AttributeError).
    """
    where = _write(pytester, RUNNABLE)
    # Written for another deployment: collected, not run here. A collection names only some of them (the
    # first invalid marker stops it), so collect again until none is left.
    while other := _collect(pytester, where):
        for stem in other:
            (pytester.path / f"{stem}.py").unlink()
    result = pytester.runpytest_subprocess("--sglang-simulate", f"--sglang-launch={SEED_LAUNCH}", "-q", "-rfE",
                                           "-p", "no:cacheprovider", "--tb=no", timeout=900)
    text = result.stdout.str()
    broken = [f"{where[m.group(2)]}: {m.group(0)}" for m in BROKEN.finditer(text)]
    assert not broken, "doc samples that are broken:\n" + "\n".join(broken)
    assert re.search(r"\d+ passed", text), text[-2000:]


def test_the_marker_help_link_lists_every_marker() -> None:
    """``pytest --markers`` and marker errors link to a section that names every marker (the README shows 6)."""
    from pytest_sglang.gates.registry import DOCS_URL, GATES

    page, _, anchor = DOCS_URL.rsplit("/", 1)[1].partition("#")
    text = (ROOT / "docs" / page).read_text()
    section = text.split(f"## {anchor.capitalize()}", 1)[1].split("\n## ", 1)[0]
    missing = [g.marker for g in GATES if f"`{g.marker}`" not in section]
    assert not missing, f"docs/{page}#{anchor} does not list {missing}"


@pytest.mark.parametrize("needle", ["pytest-sglang", "--model NAME", "--sim-host-alloc-scale"])
def test_the_cli_surface_is_documented(needle: str) -> None:
    assert any(needle in page.read_text() for page in PAGES), f"no page documents {needle}"
