"""Make the index's torchvision wheel importable next to CPU-only torch (idempotent).

Why: the torchvision wheel on the package index is a CUDA build. Its ``_C`` extension links
libtorch_cuda, so against CPU torch it does not load and the ``torchvision::*`` operators are never
defined. ``torchvision/_meta_registrations.py`` still registers fake (meta) kernels for two of them
with ``@torch.library.register_fake(...)`` at import time, which raises
"operator torchvision::nms does not exist" and breaks ``import torchvision``, hence SGLang's import
chain (it only needs ``torchvision.transforms``).

torchvision already guards its ``register_meta`` helper with ``torchvision.extension._has_ops()``;
this script gives the ``register_fake`` decorators the same guard, and does nothing when no
unguarded decorator is left (already patched, by this script or an earlier equivalent).

Usage: python patch_torchvision.py <site-packages>
"""

from __future__ import annotations

import sys
from pathlib import Path

UNGUARDED = "\n@torch.library.register_fake("
GUARDED = "\n@_pytest_sglang_guarded_fake("
ANCHOR = "@functools.lru_cache(None)\ndef get_meta_lib():"
HELPER = '''# pytest-sglang: without torchvision's compiled ops (CUDA wheel on CPU torch) the operators do
# not exist; register fake kernels only when they do, like register_meta() below.
def _pytest_sglang_guarded_fake(op_name):
    def wrapper(fn):
        if torchvision.extension._has_ops():
            return torch.library.register_fake(op_name)(fn)
        return fn

    return wrapper


'''


def patch(source: str) -> str | None:
    """Return the guarded source, or None when nothing is left to guard."""
    if UNGUARDED not in source:
        return None
    if ANCHOR not in source:
        raise SystemExit(f"patch_torchvision: anchor {ANCHOR!r} not found; torchvision layout changed")
    guarded = source.replace(ANCHOR, HELPER + ANCHOR, 1)
    return guarded.replace(UNGUARDED, GUARDED)


def main(site_packages: str) -> int:
    path = Path(site_packages) / "torchvision" / "_meta_registrations.py"
    new = patch(path.read_text())
    if new is None:
        print(f"torchvision: fake registrations already guarded ({path})")
        return 0
    path.write_text(new)
    print(f"torchvision: guarded fake registrations in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
