"""The handle's shape as the gates see it: what they judge is ``members()``, one server or a fleet's workers.

A lone :class:`~pytest_sglang.server.SGLangServer` is its own one member; a fleet
(:class:`~pytest_sglang.fleet.SGLangFleet`) returns its workers. A gate that checks each server's own
figures (capacity, hicache...) loops over ``members()`` and never asks which kind of handle it holds; only
what exists on a fleet alone (failover, prefill-decode, worker shares) asks for the fleet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pytest_sglang.server.handle import SGLangServer

__all__ = ["Handle", "Member"]


class Member(Protocol):
    """One server a gate judges: the handle's lone server, or one worker of a fleet."""

    @property
    def server(self) -> SGLangServer | None:
        """Its own handle, talked to directly (None when this machine cannot reach it)."""

    @property
    def unreachable(self) -> str | None:
        """Why ``server`` is None, in words for messages."""

    def label(self) -> str | None:
        """``worker 1 (URL)`` for a fleet's worker; None for a lone server (its records keep plain names)."""


class Handle(Protocol):
    """What fixtures and gates take: a server or a fleet, each telling its members."""

    def members(self) -> Sequence[Member]:
        """The servers behind this handle: itself when alone, its workers for a fleet."""
