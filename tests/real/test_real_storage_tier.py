"""``sglang_hicache(restart=True)`` on real SGLang 0.5.23 on a CPU: the file storage tier cannot be reached there.

The L3 tier sits behind the host pool, which 0.5.23 allocates through CUDA (``_cuda_host_register``): the
launch dies before the storage backend exists, and the gate's test errors with that diagnosis, never a
pass (docs/limitations.md). Should a later SGLang run it on a CPU, this test fails and the gate gets its
real-SGLang twin.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from realsgl import CRASH_ARGS, RealSetup, launch_options

pytestmark = pytest.mark.real_sglang

INNER = """
import pytest


@pytest.mark.sglang_hicache(restart=True)
def test_storage_survives_a_restart():
    pass
"""


def test_the_file_backend_dies_with_the_host_pool_on_a_cpu(pytester: pytest.Pytester, real_setup: RealSetup,
                                                            leftover_check: None, tmp_path: Path) -> None:
    pytester.makepyfile(test_inner=INNER)
    storage = tmp_path / "l3"
    result = pytester.runpytest_subprocess(
        *launch_options(real_setup, pytester.path / "logs", *CRASH_ARGS, "--hicache-storage-backend", "file"),
        f"--sglang-env=SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR={storage}", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["Known fatal line: *Torch not compiled with CUDA enabled*"])
    assert not storage.exists() or not any(storage.iterdir())  # nothing was ever stored
