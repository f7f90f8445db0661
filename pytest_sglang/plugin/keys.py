"""The plugin's ``config.stash`` and ``item.stash`` keys, in a module of their own.

The hooks read them in every pytest run; keeping them here means reading them never imports the
server pool, the report session or the gates (which a run that does not use SGLang never needs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_sglang.plugin.pool import ServerPool
    from pytest_sglang.plugin.settings import Settings

SETTINGS_KEY: pytest.StashKey[Settings] = pytest.StashKey()
POOL_KEY: pytest.StashKey[ServerPool] = pytest.StashKey()
# RESULTS_KEY lives in plugin/results.py, next to the GateResults it holds (no keys <-> results circle).
