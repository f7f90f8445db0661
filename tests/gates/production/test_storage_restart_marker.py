"""``@pytest.mark.sglang_hicache(restart=True)`` in a pytest session: the plugin launches, the gate restarts.

The storage directory is given the way 0.5.23 reads it first, ``SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SimFactory

LAUNCH = ("--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --enable-metrics "
          "--enable-hierarchical-cache --hicache-ratio 4 --hicache-storage-backend file")
INNER = """
import pytest


@pytest.mark.sglang_hicache(restart=True, min_storage_share=0.8)
def test_storage_survives_a_restart():
    pass
"""


@pytest.fixture
def storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "l3"
    monkeypatch.setenv("SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR", str(directory))
    return directory


@pytest.mark.parametrize("fault", [None, "l3-lost-on-restart"])
def test_the_marker_passes_the_healthy_twin_and_catches_the_lost_tier(pytester: pytest.Pytester, storage: Path,
                                                                      fault: str | None) -> None:
    pytester.makepyfile(test_inner=INNER)
    launch = LAUNCH + (f" --sim-fault {fault}" if fault else "")
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", launch, "-p", "no:cacheprovider",
                                           "-rfE")
    if fault is None:
        result.assert_outcomes(passed=1)
        assert list(storage.glob("*.bin"))
        return
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "sglang hicache gate failed: min_storage_share=0.8: measured 0 (storage_hit_share)",
        "*tokens were backed up and not read back after the restart (sglang#27619, #26886, #33713)*",
    ])


def test_an_attached_server_needs_consent(pytester: pytest.Pytester, storage: Path, sim_factory: SimFactory) -> None:
    sim = sim_factory(*LAUNCH.split()[6:])
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("--sglang-url", sim.url, "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*an attached server is never restarted*--sglang-allow-disruptive*"])
    allowed = pytester.runpytest_subprocess("--sglang-url", sim.url, "--sglang-allow-disruptive", "-p",
                                            "no:cacheprovider")
    allowed.assert_outcomes(passed=1)
