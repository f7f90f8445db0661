"""The pieces of scripts/real-sglang that run without real SGLang (always run, no marker)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "real-sglang"
TORCHVISION_SAMPLE = '''import functools

import torch
import torchvision.extension  # noqa: F401


@functools.lru_cache(None)
def get_meta_lib():
    return torch.library.Library("torchvision", "IMPL", "Meta")


@torch.library.register_fake("torchvision::nms")
def meta_nms(dets, scores, iou_threshold):
    return dets


@torch.library.register_fake("torchvision::qnms")
def meta_qnms(dets, scores, iou_threshold):
    return dets
'''


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_torchvision_patch_guards_every_fake_registration_once() -> None:
    patcher = _load("patch_torchvision", SCRIPTS / "patch_torchvision.py")
    patched = patcher.patch(TORCHVISION_SAMPLE)
    assert patched is not None
    assert "@torch.library.register_fake(" not in patched
    assert patched.count("@_pytest_sglang_guarded_fake(") == 2
    assert "if torchvision.extension._has_ops():" in patched
    compile(patched, "_meta_registrations.py", "exec")
    assert patcher.patch(patched) is None  # idempotent


def test_torchvision_patch_refuses_an_unknown_layout() -> None:
    patcher = _load("patch_torchvision", SCRIPTS / "patch_torchvision.py")
    with pytest.raises(SystemExit, match=r"anchor .* not found"):
        patcher.patch("import torch\n\n@torch.library.register_fake('x::y')\ndef f(): ...\n")


def test_torchvision_patch_main_edits_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    patcher = _load("patch_torchvision", SCRIPTS / "patch_torchvision.py")
    target = tmp_path / "torchvision" / "_meta_registrations.py"
    target.parent.mkdir()
    target.write_text(TORCHVISION_SAMPLE)
    assert patcher.main(str(tmp_path)) == 0
    assert patcher.main(str(tmp_path)) == 0
    assert "guarded fake registrations in" in capsys.readouterr().out.splitlines()[0]
    assert target.read_text().count("_pytest_sglang_guarded_fake") == 3  # helper + 2 uses


def test_sgl_kernel_stand_in_imports_anything_and_refuses_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    shim = _load("sgl_kernel", SCRIPTS / "shim" / "sgl_kernel" / "__init__.py")
    monkeypatch.setitem(sys.modules, "sgl_kernel", shim)
    from sgl_kernel import fused_add_rmsnorm_cpu

    with pytest.raises(NotImplementedError, match="'fused_add_rmsnorm_cpu' has no CPU implementation"):
        fused_add_rmsnorm_cpu(1, 2)
    with pytest.raises(NotImplementedError, match=r"'ops.silu_and_mul'"):
        shim.ops.silu_and_mul()
    with pytest.raises(AttributeError):
        shim.__wrapped__  # noqa: B018 - dunder probes (inspect, importlib) must stay real misses
    assert "stand-in" in repr(shim.anything)


def test_leftover_detector_sees_an_sglang_process_and_its_exit() -> None:
    import subprocess
    import time

    from realsgl import RealSetup, sglang_processes, wait_no_sglang

    setup = RealSetup(python=Path(sys.executable), model=Path("."))
    since = time.time()
    # argv carrying "sglang.launch_server" is what a real launcher's cmdline looks like to psutil
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "sglang.launch_server"])
    try:
        deadline = time.monotonic() + 10
        while not (found := sglang_processes(setup, since)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(f"pid {proc.pid} " in line for line in found), found
        assert sglang_processes(setup, since=time.time() + 60) == []  # older than `since`: not ours
    finally:
        proc.kill()
        proc.wait()
    assert wait_no_sglang(setup, since, timeout_s=5) == []
