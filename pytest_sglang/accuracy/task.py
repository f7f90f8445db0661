"""What a task is: examples (a question and its reference answer), few-shot rows, a prompt, a grader."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from pytest_sglang.errors import ConfigError

#: Examples scored at most, by the marker, the ``eval`` command and the engine alike: at 100,000 the
#: 95 % interval is +-0.3 points; more only costs time (a CLI run of 10**9 once reached 3.7 GB).
MAX_EXAMPLES = 100_000

#: Completion-route stop strings of SGLang's gsm8k harnesses (``few_shot_gsm8k``, ``run_eval``).
QA_STOP = ("Question", "Assistant:", "<|separator|>")
#: ``run_eval``'s number pattern: the *last* match is the answer (commas removed first).
_NUMBER = re.compile(r"-?\d+\.?\d*")


@dataclass(frozen=True)
class Example:
    question: str
    answer: str  # the reference solution as the dataset writes it (shown in few-shot prompts)
    target: str  # what a correct extracted answer equals ("42", "B")
    subject: str = ""
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    """A task bound to its data: ``examples`` are scored, ``shot_pool`` feeds few-shot prompts."""

    name: str
    examples: Sequence[Example]
    shot_pool: Sequence[Example]
    prompt: Callable[[Example, Sequence[Example]], str]
    extract: Callable[[str], str | None]
    template: str  # a name for the prompt format, recorded with the results
    stop: tuple[str, ...] = QA_STOP
    source: str = ""  # where the examples came from (a path, or "generated, seed N")

    def shots_for(self, example: Example, k: int) -> list[Example]:
        """The ``k`` few-shot rows for ``example``: same subject first, in file order."""
        if k <= 0:
            return []
        same = [s for s in self.shot_pool if s.subject == example.subject]
        rest = [s for s in self.shot_pool if s.subject != example.subject]
        return (same + rest)[:k]

    def is_correct(self, extracted: str | None, example: Example) -> bool:
        if extracted is None:
            return False
        a, b = as_number(extracted), as_number(example.target)
        return a == b if a is not None and b is not None else extracted.strip() == example.target.strip()


def take(rows: Sequence[Example], num_examples: int | str, source: str, shots_note: str = "") -> Sequence[Example]:
    """The first ``num_examples`` rows (``"all"``: every row), never silently fewer.

    ``sglang_accuracy(num_examples=200)`` on a 55-row file once scored 55 without a word: a floor
    judged on a quarter of the sample asked for is a different test. Fewer rows than asked is a
    :class:`ConfigError` with the count; ``"all"`` takes what the data set has (up to ``max_examples``).
    """
    if num_examples == "all":
        if len(rows) > MAX_EXAMPLES:
            raise ConfigError("num_examples", "all", f"would score {len(rows):,} examples of {source}, more than "
                              f"{MAX_EXAMPLES:,}", f"pass num_examples={MAX_EXAMPLES} (the first ones) or fewer")
        return rows
    assert isinstance(num_examples, int)
    if len(rows) < num_examples:
        raise ConfigError("num_examples", num_examples, f"is more than the {len(rows):,} examples {source} has"
                          f"{shots_note}", f"pass num_examples={len(rows)} or fewer, num_examples='all' (every "
                          "example), or a larger data set")
    return rows[:num_examples]


def last_number(text: str) -> str | None:
    """The last number in ``text`` (SGLang's gsm8k extraction), commas removed; None when there is none."""
    numbers = _NUMBER.findall(text.replace(",", ""))
    return numbers[-1] if numbers else None


def as_number(text: str) -> Fraction | None:
    """``"42"``, ``"42.0"``, ``"42."`` and ``"-3.5"`` as exact numbers (so ``42.0`` equals ``42``)."""
    try:
        return Fraction(text.strip().rstrip("."))
    except (ValueError, ZeroDivisionError):
        return None


def qa_prompt(example: Example, shots: Sequence[Example]) -> str:
    r"""SGLang's gsm8k few-shot format: ``Question: ...\nAnswer: ...`` blocks, the open one last."""
    head = "".join(f"Question: {s.question}\nAnswer: {s.answer}\n\n" for s in shots)
    return f"{head}Question: {example.question}\nAnswer:"
