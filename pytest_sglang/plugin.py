"""The pytest plugin (entry point ``sglang``). Thin: hooks only; the engine lives elsewhere."""

from __future__ import annotations
