"""A path given as the separate value of a pytest-sglang option must not move pytest's rootdir.

pytest picks its rootdir and ini file before it loads plugins, so it does not yet know that
``--sglang-python`` takes a value: in ``--sglang-python /opt/venv/bin/python`` the path counts as a
test path, the rootdir becomes ``/opt/venv/bin`` and the project's ini file (its ``sglang_*``
settings, its ``addopts``) is not read (pytest-dev/pytest#8846, a known limitation). With
``--sglang-python=/opt/venv/bin/python`` pytest sets the value aside. A value inside the directory
pytest started from leaves the rootdir where it was; one outside it is refused before anything starts.
"""

from __future__ import annotations

import itertools
import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from pytest_sglang.errors import ConfigError
from pytest_sglang.plugin.options import OPTIONS

#: The command-line spellings of the options that take a value (not the flags).
VALUED = frozenset(o.cli for o in OPTIONS if o.kind not in ("flag", "negatable"))


def check_separate_path_values(args: Sequence[str], invocation_dir: Path, rootpath: Path) -> None:
    """Raise :class:`ConfigError` for ``--sglang-X PATH`` where PATH exists outside ``invocation_dir``."""
    words = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *args]
    here = invocation_dir.resolve()
    for flag, value in itertools.pairwise(words):
        if flag not in VALUED or value.startswith("-") or not value:
            continue
        try:
            path = Path(invocation_dir, value).resolve()
            outside = path.exists() and not path.is_relative_to(here)
        except (OSError, ValueError):  # not a name the OS accepts (a NUL byte): pytest took no path from it
            continue
        if outside:
            raise ConfigError(
                flag, value, "given as a separate word, an existing path counts as a test path when pytest picks "
                f"its rootdir and ini file, before it knows this option (pytest-dev/pytest#8846): the rootdir "
                f"became {rootpath}, and the project's ini file may not have been read",
                f"write {flag}={shlex.quote(value)}")
