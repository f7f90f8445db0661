"""``arithmetic``: generated integer arithmetic in the gsm8k format; needs no download.

The examples come from a seeded generator, so a run and its baseline ask the same questions. The
reference answer ends with ``#### N`` like gsm8k's, so extraction is the same (last number).
"""

from __future__ import annotations

import random

from pytest_sglang.accuracy.task import Example, Task, last_number, qa_prompt

DEFAULT_SEED = 1234
#: Few-shot rows are generated from their own seed, so they never coincide with scored questions' order.
_SHOT_SEED_OFFSET = 7919


def _expression(rng: random.Random) -> tuple[str, int]:
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 12)
    shape = rng.randrange(5)
    if shape == 0:
        return f"{a} + {b}", a + b
    if shape == 1:
        return f"{a} - {b}", a - b
    if shape == 2:
        return f"{a} * {c}", a * c
    if shape == 3:
        return f"({a} + {b}) * {c}", (a + b) * c
    return f"{a} * {c} - {b}", a * c - b


def example(rng: random.Random) -> Example:
    expression, value = _expression(rng)
    return Example(question=f"What is {expression}?", answer=f"{expression} = {value}.\n#### {value}",
                   target=str(value))


def generate(n: int, seed: int = DEFAULT_SEED) -> list[Example]:
    rng = random.Random(seed)
    return [example(rng) for _ in range(n)]


def task(num_examples: int, shots: int, seed: int = DEFAULT_SEED) -> Task:
    return Task(name="arithmetic", examples=generate(num_examples, seed),
                shot_pool=generate(max(shots, 0), seed + _SHOT_SEED_OFFSET), prompt=qa_prompt,
                extract=last_number, template="gsm8k-qa", source=f"generated, seed {seed}")
