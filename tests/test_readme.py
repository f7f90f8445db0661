"""The README is a newcomer's first screen and the docs site covers the rest.

The README opens with the two commands CI runs, stays small, and links only to pages that exist;
every docs page is in the mkdocs nav (``mkdocs build --strict`` in CI checks the links between pages);
every option and marker keyword is documented.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from markdown.extensions.toc import slugify

from pytest_sglang.plugin.settings import OPTIONS

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_BYTES = 15 * 1024
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _readme_commands() -> list[str]:
    """The commands of the README's first code block (comments dropped)."""
    head = README.read_text().split("```", 2)[1]
    lines = [line.split("#", 1)[0].strip() for line in head.splitlines()[1:]]
    return [line for line in lines if line]


def _ci_lines() -> list[str]:
    return [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]


def _nav_files(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [f for value in nav.values() for f in _nav_files(value)]
    return [f for item in nav for f in _nav_files(item)]


class _MkdocsLoader(yaml.SafeLoader):
    """mkdocs.yml names a Python function (``!!python/name:``): read it as text, never import it."""


_MkdocsLoader.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix)


def _mkdocs() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_MkdocsLoader)
    return loaded


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())  # '#' in a code block is a shell comment, not a heading
    return {slugify(m.group(1).strip(), "-") for m in re.finditer(r"^#{1,6}\s+(.+)$", text, re.M)}


def test_readme_is_a_first_screen() -> None:
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move reference material to docs/"


def test_readme_opens_with_the_two_commands_ci_runs() -> None:
    head = README.read_text().splitlines()[:6]
    commands = _readme_commands()
    assert commands == ["bash scripts/bootstrap.sh && .venv/bin/pytest examples/", "bash scripts/test.sh"]
    assert all(any(command in line for line in head) for command in commands)
    ci = _ci_lines()
    for command in commands:  # each step is a line of .ci/run (CI may add arguments such as -p no:cacheprovider)
        for step in command.split("&&"):
            assert any(line.startswith(step.strip()) for line in ci), f"{step.strip()!r} is not run by .ci/run"


@pytest.mark.parametrize("section", ["Install", "Attach", "Launch", "Simulate", "Markers", "Reports", "Reliability"])
def test_readme_has_the_newcomer_sections(section: str) -> None:
    assert re.search(rf"^## {section}\b", README.read_text(), re.M), f"README has no '## {section}' section"


def test_readme_shows_one_gate_of_each_kind() -> None:
    text = README.read_text()
    for marker in ("sglang_capacity", "sglang_hicache", "sglang_throughput", "sglang_slo"):
        assert f"@pytest.mark.{marker}(" in text


def test_readme_links_point_at_existing_docs() -> None:
    links = [t for t in LINK.findall(README.read_text()) if not t.startswith(("http://", "https://", "mailto:"))]
    assert any(t.startswith("docs/") for t in links)
    for target in links:
        path, _, anchor = target.partition("#")
        page = ROOT / path
        assert page.is_file(), f"README links to {target}, which does not exist"
        if anchor:
            assert anchor in _anchors(page), f"README links to {target}: no such heading"


def test_every_docs_page_is_in_the_nav() -> None:
    config = _mkdocs()
    in_nav = _nav_files(config["nav"])
    on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(in_nav) == on_disk
    assert config["strict"] is True
    # --strict fails on warnings only: these make a broken link or anchor, or a page left out, a warning.
    assert config["validation"]["nav"]["omitted_files"] == "warn"
    assert config["validation"]["links"]["not_found"] == "warn"
    assert config["validation"]["links"]["anchors"] == "warn"


def test_ci_builds_the_docs_strictly() -> None:
    ci = _ci_lines()
    build = [line for line in ci if "mkdocs build" in line]
    assert build and "--strict" in build[0]
    assert " -q" not in build[0] and "--quiet" not in build[0]  # quiet hides warnings, and strict then passes
    assert ci.index(build[0]) > next(i for i, line in enumerate(ci) if line.startswith(".venv/bin/mypy"))


def test_docs_stay_inside_the_repository() -> None:
    for page in DOCS.rglob("*.md"):
        text = page.read_text()
        assert "../shared" not in text and "shared/reference" not in text, f"{page.name} points outside the repo"
        assert "files you own" not in text, f"{page.name} has ownership language"


def test_every_option_is_documented() -> None:
    """Each option has a row in the options table naming its flag, ini key and environment variable."""
    rows = [line for line in (DOCS / "plugin.md").read_text().splitlines() if line.startswith("| `--sglang-")]
    for option in OPTIONS:
        row = next((r for r in rows if r.startswith(f"| `{option.cli}`")), None)
        assert row is not None, f"docs/plugin.md has no options-table row for {option.cli}"
        if not option.cli_only:
            assert f"`{option.name}`" in row and f"`{option.env}`" in row, row


@pytest.mark.parametrize(("gate", "page"), [("capacity", "capacity.md"), ("hicache", "capacity.md"),
                                            ("throughput", "loadgen.md"), ("slo", "loadgen.md"),
                                            ("accuracy", "accuracy.md"), ("golden", "accuracy.md"),
                                            ("fleet", "fleet.md"), ("failover", "fleet.md"), ("pd", "pd.md"),
                                            ("speculative", "production.md"), ("probes", "production.md"),
                                            ("soak", "production.md")])
def test_every_marker_keyword_is_documented(gate: str, page: str) -> None:
    from pytest_sglang.gates.registry import GATES  # the marker table: gates live in subpackages (issue 31)

    run_marker = next(g for g in GATES if g.marker == f"sglang_{gate}").load()
    keywords = [p.name for p in inspect.signature(run_marker).parameters.values()
                if p.kind is inspect.Parameter.KEYWORD_ONLY]
    text = (DOCS / page).read_text()
    missing = [k for k in keywords if f"`{k}`" not in text and f"`{k}=" not in text]
    assert keywords and not missing, f"docs/{page} does not document sglang_{gate} keywords {missing}"
