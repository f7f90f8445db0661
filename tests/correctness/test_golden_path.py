"""A golden path that does not exist says where it was looked for; it does not only advise re-recording."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sglang.correctness.golden import load
from pytest_sglang.errors import ConfigError


def test_a_missing_recording_names_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load(Path("golden/prod.json"), "--sglang-golden")
    text = str(caught.value)
    assert text.startswith("--sglang-golden='golden/prod.json': does not exist (")
    assert f"a relative path is read from {tmp_path}" in text
    assert "Fix: pass the recording's path" in text
