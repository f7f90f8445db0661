"""``python -m pytest_sglang.simulator``: see :mod:`pytest_sglang.simulator.server`."""

from __future__ import annotations

import sys

from pytest_sglang.simulator.server import main

if __name__ == "__main__":
    sys.exit(main())
