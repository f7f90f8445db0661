"""The smoke suite's load shape and floors, from the server's own figures (plain Python, no pytest)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang.gates.facts.capacity import context_length, running_requests

__all__ = ["MAX_CONCURRENCY", "SINGLE_STREAM_SHARE", "SmokeShape", "smoke_shape"]

#: At most this many requests in flight: a smoke load is a probe, far below any heavy-load limit.
MAX_CONCURRENCY = 8
#: Prompt and output lengths of a smoke request, shortened to fit the server's context length.
INPUT_LEN, OUTPUT_LEN = 256, 32
#: The load's output throughput must reach this share of what the same server delivers one request at a
#: time (measured in the same test): batching must not make a server slower than serving requests in turn.
#: Half, so that the noise of two short loads on a shared machine is not read as a fault.
SINGLE_STREAM_SHARE = 0.5


@dataclass(frozen=True)
class SmokeShape:
    """One short load sized by the server: ``concurrency`` requests of ``input_len + output_len`` at once."""

    concurrency: int
    requests: int
    input_len: int
    output_len: int

    @property
    def request_tokens(self) -> int:
        return self.input_len + self.output_len


def smoke_shape(info: Mapping[str, Any]) -> SmokeShape:
    """The load for ``/server_info`` ``info``: up to 8 requests in flight, as many as it runs at once."""
    ctx = context_length(info, None).least or INPUT_LEN + OUTPUT_LEN
    output_len = max(1, min(OUTPUT_LEN, ctx // 8))
    input_len = max(1, min(INPUT_LEN, ctx - output_len - 1))
    running = running_requests(info).least
    concurrency = max(1, min(MAX_CONCURRENCY, running or MAX_CONCURRENCY))
    return SmokeShape(concurrency=concurrency, requests=4 * concurrency, input_len=input_len, output_len=output_len)

