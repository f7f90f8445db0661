"""``arithmetic``: generated integer arithmetic in the gsm8k format; needs no download.

The examples come from a seeded generator, so a run and its baseline ask the same questions. The
reference answer ends with ``#### N`` like gsm8k's, so extraction is the same (last number).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from typing import overload

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


class Generated(Sequence[Example]):
    """``generate(n, seed)`` without the list: examples are made as they are read.

    An eval of 100,000 examples then holds the examples in flight, not 100,000 of them (memory flat in
    ``n``, see ``benchmarks/bench_eval_memory.py``). The sequence is the one ``generate`` gives, so a
    baseline and a run ask the same questions.
    """

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed = n, seed

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[Example]:
        rng = random.Random(self.seed)
        return (example(rng) for _ in range(self.n))

    @overload
    def __getitem__(self, index: int) -> Example: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Example]: ...

    def __getitem__(self, index: int | slice) -> Example | Sequence[Example]:
        if isinstance(index, slice):
            return list(itertools.islice(iter(self), *index.indices(self.n)))
        if not -self.n <= index < self.n:
            raise IndexError(index)
        return next(itertools.islice(iter(self), index % self.n, None))  # O(index): tests and messages only


def task(num_examples: int, shots: int, seed: int = DEFAULT_SEED) -> Task:
    return Task(name="arithmetic", examples=Generated(num_examples, seed),
                shot_pool=generate(max(shots, 0), seed + _SHOT_SEED_OFFSET), prompt=qa_prompt,
                extract=last_number, template="gsm8k-qa", source=f"generated, seed {seed}")
