"""The published report schema ships in the wheel and loads from there (not from the checkout).

Same approach as ``tests/server/test_validation.py``: build the wheel, install it into a private
``--target`` directory, and load the schema in a fresh interpreter whose ``sys.path`` starts there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])
from importlib import resources
import pytest_sglang
from pytest_sglang.report import json_report
assert pytest_sglang.__file__.startswith(sys.argv[1]), pytest_sglang.__file__
resource = resources.files("pytest_sglang").joinpath("schemas/report.schema.json")
assert str(resource).startswith(sys.argv[1]) and resource.is_file(), resource
schema = json_report.load_schema()
print(json.dumps({"id": schema["$id"], "same": schema == json.loads(resource.read_text("utf-8")),
                  "errors": json_report.validation_errors(json_report.build_report([], None))}))
"""


@pytest.mark.slow
def test_report_schema_loads_from_the_installed_wheel(tmp_path: Path) -> None:
    dist, site = tmp_path / "dist", tmp_path / "site"
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    wheel = next(dist.glob("pytest_sglang-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    # cwd=tmp_path: the checkout's schemas/ directory must not be reachable from there.
    out = subprocess.run([sys.executable, "-c", CHECK, str(site)], cwd=tmp_path, check=True,
                         capture_output=True, text=True, timeout=60)
    from pytest_sglang.report.json_report import SCHEMA_ID

    assert json.loads(out.stdout) == {"id": SCHEMA_ID, "same": True, "errors": []}
