"""Flags a program does not know: a misspelling of a known flag, or a flag of a newer release.

A recorded table (SGLang 0.5.23's launch flags, smg's, sglang-router's) knows every flag of one
release. A flag it does not know is either a typo (``--tp-szie``, ``--polcy``: one or two keystrokes
from a known flag) or a flag added after the recorded release. The first is refused before anything
starts, naming the flag meant (:class:`Typo`); the second is only reported (:func:`check_flags`
returns it), since refusing it would make the plugin older than the server it tests.

"Close" is an edit distance (insertions, deletions, substitutions, swaps of neighbours) of at most 2
(1 for names of 4 characters or fewer): recorded flags themselves are that close to one another in
only 20 of SGLang's 559 option strings (``--tp-size``/``--pp-size``), whereas difflib's ratio would
call a quarter of them close. difflib ranks the suggestions.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Typo", "UnknownFlag", "check_flags", "close_flags", "flag_heads"]


@dataclass(frozen=True)
class UnknownFlag:
    """A flag the recorded table does not know, and the known flags it is close to (empty: none)."""

    flag: str
    close: tuple[str, ...] = ()


class Typo(ValueError):
    """Flags that look like misspellings of known ones."""

    def __init__(self, typos: Sequence[UnknownFlag]) -> None:
        self.typos = tuple(typos)
        super().__init__("; ".join(f"{t.flag} is not a known flag, did you mean {t.close[0]}?" for t in typos))


def _distance(a: str, b: str) -> int:
    """Optimal string alignment distance (Levenshtein plus swaps of two neighbouring characters)."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], previous2[j - 2] + 1)
        previous2, previous = previous, row
    return previous[-1]


def close_flags(flag: str, known: Iterable[str]) -> tuple[str, ...]:
    """The known flags ``flag`` is a likely misspelling of, best first (difflib's ranking)."""
    limit = 1 if len(flag.lstrip("-")) <= 4 else 2
    candidates = [k for k in set(known) if k != flag and abs(len(k) - len(flag)) <= limit
                  and _distance(flag, k) <= limit]
    ranked = difflib.get_close_matches(flag, candidates, n=3, cutoff=0.0)
    return tuple(ranked)


def flag_heads(tokens: Iterable[str]) -> list[str]:
    """The flag names among argv tokens a parser left over (``--x=1`` -> ``--x``; values skipped)."""
    return [t.split("=", 1)[0] for t in tokens if t.startswith("--") and len(t) > 2]


def check_flags(unknown: Iterable[str], known: Iterable[str]) -> list[UnknownFlag]:
    """Raise :class:`Typo` for leftover flags close to a known one; return the others (flags of a newer release).

    ``unknown`` are the argv tokens the parser did not place (as :attr:`LaunchArgs.unknown`), values included.
    """
    known_set = frozenset(known)
    found = [UnknownFlag(head, close_flags(head, known_set)) for head in flag_heads(unknown) if head not in known_set]
    typos = [f for f in found if f.close]
    if typos:
        raise Typo(typos)
    return found
