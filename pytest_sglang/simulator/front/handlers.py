"""The generation routes: /generate, /v1/completions and /v1/chat/completions.

Their implementations (:mod:`.native`, :mod:`~pytest_sglang.simulator.front.openai.handler`) and the model behind them
(answers, grammars, tool calls, reasoning, logprobs) are imported by :func:`preload`, which the
server calls after its start-up phases: the simulator must reach its first start-up log line as
fast as ``sglang.launch_server`` does, and its first request must not pay for imports.
"""

from __future__ import annotations

import importlib

from aiohttp import web

from pytest_sglang.simulator.front.respond import error_response, json_response
from pytest_sglang.simulator.state import State

__all__ = ["error_response", "generate", "json_response", "openai", "preload"]


def preload() -> None:
    for name in ("front.native", "front.openai.handler"):
        importlib.import_module(f"pytest_sglang.simulator.{name}")


async def generate(state: State, request: web.Request) -> web.StreamResponse:
    from pytest_sglang.simulator.front import (
        native as native_handler,  # imported by preload(); see the module docstring
    )

    return await native_handler.generate(state, request)


async def openai(state: State, request: web.Request, *, chat: bool) -> web.StreamResponse:
    from pytest_sglang.simulator.front.openai import (
        handler as openai_handler,  # imported by preload(); see the module docstring
    )

    return await openai_handler.openai(state, request, chat=chat)
