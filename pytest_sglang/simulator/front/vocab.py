"""The model's vocabulary as 0.5.23 enforces it (``--sim-vocab-size``).

0.5.23 checks ``token_ids_logprob`` against the vocabulary (``TokenizerManager._validate_token_ids_logprob``:
a 400 naming the valid range, which is how a client reads the size), but not the prompt's ``input_ids``:
an id past the embedding table kills the server (a 401-token model died on random ids from [10, 1000)).
"""

from __future__ import annotations

import os
from typing import Any

from pytest_sglang.simulator.state import State

#: Without ``--sim-vocab-size``: the simulator's tokenizer's ids (prompt ids are then not checked).
DEFAULT_VOCAB_SIZE = 32_000


def vocab_size(state: State) -> int:
    """The vocabulary size the simulated model has."""
    return state.cfg.sim.vocab_size or DEFAULT_VOCAB_SIZE


def logprob_ids_error(state: State, body: dict[str, Any]) -> str | None:
    """0.5.23's message for a ``token_ids_logprob`` id outside the vocabulary, or None."""
    ids = body.get("token_ids_logprob")
    if not isinstance(ids, list):
        return None
    size = vocab_size(state)
    for token_id in ids:
        if isinstance(token_id, int) and not 0 <= token_id < size:
            return f"token_ids_logprob contains out-of-vocabulary token id {token_id}; valid range is [0, {size})."
    return None


def crash_on_unknown_ids(state: State, prompts: list[list[int]]) -> None:
    """With ``--sim-vocab-size``, a prompt id outside the vocabulary kills the server, as on 0.5.23."""
    size = state.cfg.sim.vocab_size
    if size is None:
        return
    bad = next((i for ids in prompts for i in ids if not 0 <= i < size), None)
    if bad is not None:
        state.log.always(
            "Scheduler hit an exception: Traceback (most recent call last):\n"
            "  File \"sglang/srt/managers/scheduler.py\", in event_loop_overlap\n"
            f"IndexError: index out of range in self (input id {bad} >= vocab_size {size}; "
            "simulated with --sim-vocab-size)\nReceived sigquit from a child process. It usually means the child "
            "failed."
        )
        os._exit(1)
