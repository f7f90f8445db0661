"""README.md is assembled from docs/ and opens with the two commands for a fresh machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_is_current() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_readme.py"), "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_readme_opens_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text().splitlines()[:6]
    assert "bash scripts/bootstrap.sh && .venv/bin/pytest examples/" in "\n".join(head)
    assert any(line.startswith("bash scripts/test.sh") for line in head)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci and ".venv/bin/pytest examples/" in ci
