from __future__ import annotations

from loadgen_fake import fake_server

__all__ = ["fake_server"]
