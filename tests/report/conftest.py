from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # sample.py and browser.py are helpers of this directory


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outer settings must not leak into inner runs, nor may inner runs write CI's step summary."""
    from pytest_sglang.plugin import settings

    for option in settings.OPTIONS:
        monkeypatch.delenv(option.env, raising=False)
    for name in ("SGLANG_API_KEY", "GITHUB_STEP_SUMMARY", "SYNTH_TPUT", "SYNTH_GPU", "SYNTH_TOKENS", "SYNTH_ARGS",
                 "SYNTH_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def synthetic(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester dir holding the inner synthetic gate tests, their conftest and sample.py."""
    for path in [*(HERE / "examples" / "synthetic").glob("*.py"), HERE / "sample.py"]:
        (pytester.path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    return pytester


@pytest.fixture
def real(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester dir holding inner tests for the real plugin and simulator."""
    for path in (HERE / "examples" / "real").glob("*.py"):
        (pytester.path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    return pytester
