"""Import-only stand-in for SGLang's CPU ``sgl_kernel`` extension.

With ``SGLANG_USE_CPU_ENGINE=1``, SGLang 0.5.23 runs ``from sgl_kernel import <op>`` at module
import in a few places. The CPU build of sgl-kernel is compiled from SGLang's sources and is not
published on the package index, so without a stand-in the server cannot even import.

Every attribute of this module is a placeholder: importing any name works, and *calling* it raises
``NotImplementedError`` with the op's name. Nothing fakes a kernel's result, so if a code path ever
needs a real CPU kernel the server fails loudly instead of computing garbage. With the tiny Llama
model, ``--attention-backend torch_native`` and no AMX, no op is called.

The same holds for ``torch.ops.sgl_kernel.<name>_cpu``: SGLang 0.5.23 looks some up at module import
(``models/qwen3_5.py``, imported with the Qwen2-VL multimodal processor), which fails without the real
extension; those few (:data:`IMPORT_TIME_OPS`) resolve to placeholders that refuse to run. The tiny
Qwen2-VL (make_tiny_vlm.py) calls none of them.
"""

from __future__ import annotations

import importlib.util
from typing import Any, NoReturn

__version__ = "0.0.0+pytest-sglang-shim"


class MissingKernel:
    """A named placeholder for one sgl_kernel op that refuses to run."""

    def __init__(self, name: str) -> None:
        self.__name__ = name
        self.__qualname__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError(
            f"sgl_kernel stand-in (pytest-sglang): op {self.__name__!r} has no CPU implementation here"
        )

    def __getattr__(self, name: str) -> MissingKernel:
        # Sub-namespaces such as sgl_kernel.ops.<x> resolve to placeholders too.
        if name.startswith("__"):
            raise AttributeError(name)
        return MissingKernel(f"{self.__name__}.{name}")

    def __repr__(self) -> str:
        return f"<sgl_kernel stand-in: {self.__name__}>"


def __getattr__(name: str) -> MissingKernel:
    # Dunder lookups (e.g. __path__, __file__ probes by importlib/inspect) must stay real misses.
    if name.startswith("__"):
        raise AttributeError(name)
    return MissingKernel(name)


#: The CPU ops SGLang 0.5.23 looks up when importing the Qwen-VL processor (models/qwen3_5.py), found by
#: logging the misses of that import. Only these: other code probes ops with hasattr() to pick a fused
#: path (models/utils.py ``fused_qk_norm_cpu``), and a placeholder there would be called.
IMPORT_TIME_OPS = frozenset({
    "fused_sigmoid_mul_cpu", "fused_qk_gemma_rmsnorm_cpu", "fused_qk_gemma_rmsnorm_with_gate_cpu",
    "fused_qkvzba_split_reshape_cat_contiguous_cpu", "fused_input_proj_cpu",
})


class _CpuOps:
    """``torch.ops.sgl_kernel``: the registered ops, and a placeholder for a missing import-time op."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        try:
            return getattr(self._real, name)
        except (AttributeError, RuntimeError):
            if name in IMPORT_TIME_OPS:
                return MissingKernel(f"torch.ops.sgl_kernel.{name}")
            raise


def _install_cpu_ops() -> None:
    import torch

    if not isinstance(torch.ops.sgl_kernel, _CpuOps):
        torch.ops.sgl_kernel = _CpuOps(torch.ops.sgl_kernel)  # type: ignore[attr-defined]


if importlib.util.find_spec("torch") is not None:  # the SGLang venv; the project's tests load this without torch
    _install_cpu_ops()
