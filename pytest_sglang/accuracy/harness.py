"""The harness settings of an accuracy run: task, data, prompt format, route and sampling.

A score is only comparable with a baseline measured the same way: SGLang's own floors for one model
moved 0.82 -> 0.80 -> 0.77 as its harness changed (mgsm_en, 5-shot chat, zero-shot boxed). So every
setting that changes a score is recorded next to it (:meth:`Harness.fingerprint`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_sglang.accuracy import arithmetic, gsm8k, mmlu
from pytest_sglang.accuracy.task import MAX_EXAMPLES, Example, Task
from pytest_sglang.errors import ConfigError

TASKS = ("arithmetic", "gsm8k", "mmlu")
#: ``num_examples=ALL``: every example of the data set (refused beyond :data:`MAX_EXAMPLES`).
ALL = "all"
ROUTES = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "generate": "/generate"}
#: Per SGLang's harnesses: gsm8k on completions with 512 new tokens (GSM8KMixin); MMLU zero-shot on
#: chat with 1024 (MMLUSanityMixin); the classic few-shot MMLU needs only the answer letter.
_DEFAULT_MAX_TOKENS = {"arithmetic": 512, "gsm8k": 512, "mmlu-few-shot": 8, "simple-evals-multichoice": 1024}


@dataclass(frozen=True)
class Harness:
    """How to run one task. ``route``/``max_tokens`` None: the task's SGLang default.

    ``data`` None: ``arithmetic`` is generated; ``gsm8k`` and ``mmlu`` come from the Hugging Face hub.
    """

    task: str
    #: An int: exactly that many (a data set with fewer is refused, never silently fewer); ``"all"``.
    num_examples: int | str = 200
    shots: int = 5
    route: str | None = None
    max_tokens: int | None = None
    temperature: float = 0.0
    concurrency: int = 64
    request_timeout_s: float = 300.0
    data: Path | None = None
    seed: int = arithmetic.DEFAULT_SEED
    confidence: float = 0.95
    #: gsm8k/mmlu without ``data``: seconds the hub download may take in all.
    hub_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        _choice("task", self.task, TASKS)
        if self.route is not None:
            _choice("route", self.route, tuple(ROUTES))
        _at_least("concurrency", self.concurrency, 1)
        if self.num_examples != ALL:
            _at_least("num_examples", self.num_examples, 1)
            if isinstance(self.num_examples, int) and self.num_examples > MAX_EXAMPLES:
                raise ConfigError("num_examples", self.num_examples, f"is more than {MAX_EXAMPLES:,}",
                                  f"pass at most {MAX_EXAMPLES:,} (the interval is then +-0.3 points), or 'all'")
        if self.task == "arithmetic" and self.num_examples == ALL:
            raise ConfigError("num_examples", ALL, "has no meaning for the generated arithmetic task",
                              "pass a number of examples, e.g. 200")
        _at_least("shots", self.shots, 0)
        if self.max_tokens is not None:
            _at_least("max_tokens", self.max_tokens, 1)
        if not _finite(self.temperature) or self.temperature < 0:
            raise ConfigError("temperature", self.temperature, "must be a number >= 0",
                              "pass 0 (greedy) or another number >= 0")
        if not _finite(self.request_timeout_s) or self.request_timeout_s <= 0:
            raise ConfigError("request_timeout_s", self.request_timeout_s, "must be > 0",
                              "pass a number of seconds, e.g. 300")
        if not _finite(self.confidence) or not 0 < self.confidence < 1:
            raise ConfigError("confidence", self.confidence, "must be between 0 and 1", "pass a level such as 0.95")
        if not _finite(self.hub_timeout_s) or self.hub_timeout_s <= 0:
            raise ConfigError("hub_timeout_s", self.hub_timeout_s, "must be > 0", "pass a number of seconds, e.g. 120")

    def load(self) -> Task:
        """The task's examples: generated, from ``data``, or (gsm8k, mmlu without ``data``) from the hub."""
        if self.task == "arithmetic":
            assert isinstance(self.num_examples, int)  # "all" is refused for generated examples
            return arithmetic.task(self.num_examples, self.shots, self.seed)
        data = Path(self.data) if self.data is not None else None
        if self.task == "gsm8k":
            return gsm8k.task(data, self.num_examples, self.shots, hub_timeout_s=self.hub_timeout_s)
        return mmlu.task(data, self.num_examples, self.shots, hub_timeout_s=self.hub_timeout_s)

    def resolved(self, task: Task) -> Harness:
        """This harness with the task's defaults filled in (route, max_tokens)."""
        zero_shot_chat = task.template == "simple-evals-multichoice"
        route = self.route or ("chat" if zero_shot_chat else "completions")
        return replace(self, route=route, max_tokens=self.max_tokens or _DEFAULT_MAX_TOKENS[
            task.template if task.name == "mmlu" else task.name])

    def fingerprint(self, task: Task) -> dict[str, Any]:
        """Everything that changes a score; two runs compare only when these are equal."""
        h = self.resolved(task)
        return {"runner": "builtin", "task": task.name, "template": task.template, "shots": h.shots, "route": h.route,
                "max_tokens": h.max_tokens, "temperature": h.temperature, "top_p": 1.0,
                "stop": list(task.stop) if h.route != "chat" else [], "source": task.source,
                "num_examples": len(task.examples), "extraction": task.extract.__name__}

    def request(self, task: Task, example: Example, model: str) -> tuple[str, dict[str, Any]]:
        """The route path and JSON body that ask ``example``."""
        h = self.resolved(task)
        assert h.route is not None and h.max_tokens is not None
        prompt = task.prompt(example, task.shots_for(example, h.shots))
        sampling = {"temperature": h.temperature, "top_p": 1.0}
        stop = list(task.stop)
        if h.route == "generate":
            params = {"max_new_tokens": h.max_tokens, **sampling, **({"stop": stop} if stop else {})}
            return ROUTES["generate"], {"text": prompt, "sampling_params": params}
        if h.route == "chat":  # SGLang's chat sampler sends no stop strings
            return ROUTES["chat"], {"model": model, "messages": [{"role": "user", "content": prompt}],
                                    "max_tokens": h.max_tokens, **sampling}
        return ROUTES["completions"], {"model": model, "prompt": prompt, "max_tokens": h.max_tokens, **sampling,
                                       **({"stop": stop} if stop else {})}


def answer_text(route: str, body: object) -> str | None:
    """The generated text in a response body of ``route``, or None when it has none."""
    if not isinstance(body, dict):
        return None
    if route == "generate":
        text = body.get("text")
        return text if isinstance(text, str) else None
    choices = body.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    if route == "chat":
        message = first.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        return content if isinstance(content, str) else None
    text = first.get("text")
    return text if isinstance(text, str) else None


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(name, value, f"is not one of {', '.join(allowed)}", f"pass one of {', '.join(allowed)}")


def _at_least(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(name, value, f"must be an integer >= {low}", f"pass an integer >= {low}")


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
