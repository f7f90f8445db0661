"""The acceptance suite's checks are gate records: summary table, JSON, JUnit and Markdown show them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import SimFactory

SUITE = ("--pyargs", "pytest_sglang.acceptance", "-p", "no:cacheprovider")


def test_checks_reach_every_report(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "empty-finish-reason")
    result = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", "-k", "response_shape or test_generate",
                                           "--sglang-report=r.json", "--junitxml=j.xml", "--sglang-markdown=s.md")
    out = result.stdout.str()
    result.assert_outcomes(passed=4, failed=4)
    assert "FAILED: 4/8 checks ok in 8 tests" in out
    assert "0/0 checks" not in out and "no gate checks were recorded" not in out
    # Each finding once, with its count: not the same line for each of the 8 prompts. (Each failed
    # test shows it in its failure and, with CI=true's untruncated summary, in the short summary too.)
    mentions = [line for line in out.splitlines() if 'finish_reason is ""' in line]
    assert len(mentions) in (4, 8) and all("(x8: prompts 0-7)" in line for line in mentions), mentions
    report = json.loads((pytester.path / "r.json").read_text())
    acceptance = [r for r in report["records"] if r["gate"] == "acceptance"]
    assert len(acceptance) == 8 and sum(not r["passed"] for r in acceptance) == 4
    failed = next(r for r in acceptance if r["metric"] == "chat batch response shape")
    assert failed["measured"] == 8 and "(x8: prompts 0-7)" in failed["detail"]
    props = [p.get("name") for p in ET.parse(pytester.path / "j.xml").iter("property")]
    assert "sglang.acceptance.chat batch response shape" in props
    assert "| acceptance | chat batch response shape |" in (pytester.path / "s.md").read_text()
