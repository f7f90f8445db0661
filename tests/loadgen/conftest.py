from __future__ import annotations

from loadgen.loadgen_fake import fake_server
from loadgen.sim_model import sim_url

__all__ = ["fake_server", "sim_url"]
