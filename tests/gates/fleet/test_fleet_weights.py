"""``sglang_fleet(consistent=True)`` compares the loaded weights: two workers on one model path, one of them
with corrupted weights (``--sim-fault corrupt-weights``), behind SGLang's gateway. Every launch field
agrees; only ``/weights_checker`` tells them apart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gates.fleetkit import OwnFleet, own_fleet

MODEL = ("--model-path", "sim/tiny-llama")

INNER = """
import pytest


@pytest.mark.sglang_fleet()
def test_consistent():
    pass


@pytest.mark.sglang_fleet(ignore=["weights_checksum"])
def test_weights_ignored(sglang_gate):
    assert sglang_gate["fleet"].checks[1].measured == "none"
"""


@pytest.fixture(scope="module")
def corrupt_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnFleet]:
    workers = (MODEL, (*MODEL, "--sim-fault", "corrupt-weights"))
    with own_fleet(workers, tmp_path_factory.mktemp("weights-fleet")) as fleet:
        yield fleet


def test_a_worker_with_other_weights_fails_consistency_naming_both_checksums(pytester: pytest.Pytester,
                                                                             corrupt_fleet: OwnFleet) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("--sglang-url", corrupt_fleet.url, "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "sglang fleet gate failed: differing_fields weights_checksum (required == none)",
    ])
    result.stdout.fnmatch_lines([
        "  1 field(s) differ between the workers (only those are shown):",
        "    field            | worker 0 (http://127.0.0.1:*) | worker 1 (http://127.0.0.1:*)",
        "    weights_checksum | ???????????????? * | ????????????????",
        "Fix: launch every worker with the same SGLang version, model and launch arguments (or ignore=[[]...[]] a "
        "field that may differ on purpose); a weights_checksum that differs on one model path means other weights were "
        "loaded *",
    ], consecutive=True)


def test_identical_workers_pass_with_their_weights_compared(pytester: pytest.Pytester,
                                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    pytester.makepyfile(test_inner="""
import pytest


@pytest.mark.sglang_fleet()
def test_consistent():
    pass
""")
    with own_fleet((MODEL, MODEL), tmp_path_factory.mktemp("same-fleet")) as fleet:
        result = pytester.runpytest_subprocess("--sglang-url", fleet.url, "-p", "no:cacheprovider", "-rfE")
        logs = [w.log_text() for w in fleet.workers]
    result.assert_outcomes(passed=1)
    assert all('"GET /weights_checker HTTP/1.1" 200' in log for log in logs), "each worker's weights were read"


CONSISTENT = """
import pytest


@pytest.mark.sglang_fleet()
def test_consistent():
    pass
"""


def test_weights_that_could_not_be_read_are_shown_in_every_report_and_fail_under_strict(
        pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Worker 1 loaded other weights and its /weights_checker answers HTML: the fleet cannot tell, and says so."""
    workers = (MODEL, (*MODEL, "--sim-fault", "corrupt-weights", "--sim-fault", "weights-checker:garbage"))
    pytester.makepyfile(test_inner=CONSISTENT)
    with own_fleet(workers, tmp_path_factory.mktemp("unread-weights")) as fleet:
        result = pytester.runpytest_subprocess("--sglang-url", fleet.url, "--sglang-html", "report.html", "-p",
                                               "no:cacheprovider")
        strict = pytester.runpytest_subprocess("--sglang-url", fleet.url, "--sglang-strict", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_inner.py::test_consistent * PASSED"])
    result.stdout.fnmatch_lines(["  fleet differing_fields * none * == none ok"])
    result.stdout.fnmatch_lines(["    not checked: fleet: worker ? (http://127.0.0.1:*): weights not compared*",
                                 "      */weights_checker answered 200, not JSON)"], consecutive=True)
    page = (pytester.path / "report.html").read_text()
    assert "test_inner.py::test_consistent</code> not checked: fleet: worker " in page
    assert "weights not compared (GET /weights_checker answered 200, not JSON)" in page
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines([
        "sglang fleet gate failed: not checked worker ? (http://127.0.0.1:*): weights not compared (GET "
        "/weights_checker answered 200, not JSON) (required == checked)",
    ])
    strict.stdout.fnmatch_lines(["Fix: make it checkable (the line says why), or drop --sglang-strict to only "
                                 "report it"])
