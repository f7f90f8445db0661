"""``sglang_speculative``'s context-length buckets: the lengths to measure, each one's floor, and the keyword rule.

A floor (``min_accept_length``, ``min_accept_rate``, ``min_speedup``) is one number for every length or a
mapping ``{context tokens: floor}``; without ``context_lens`` the mappings' keys are the lengths.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["FLOORS", "Floor", "bucket_label", "bucket_lens", "bucket_problem", "floor_of"]

Floor = float | dict[int, float] | None
FLOORS = ("min_accept_length", "min_accept_rate", "min_speedup")


def floor_of(value: Floor, bucket: int | None) -> float | None:
    """The floor of ``bucket`` (None: no context_lens, or a mapping without it)."""
    if isinstance(value, dict):
        return None if bucket is None else value.get(bucket)
    return value


def bucket_lens(values: Mapping[str, object]) -> list[int]:
    """The context lengths to measure: ``context_lens``, else the keys of the floors' mappings (sorted)."""
    lens = values.get("context_lens")
    if isinstance(lens, (list, tuple)):
        return [int(b) for b in lens]
    keys = {int(k) for name in FLOORS if isinstance(m := values.get(name), dict) for k in m}
    return sorted(keys)


def bucket_problem(values: Mapping[str, object]) -> tuple[dict[str, object], str, str] | None:
    """Each bucket measured against some floor; no floor for a length that is not measured."""
    lens = values.get("context_lens")
    if isinstance(lens, (list, tuple)) and len(set(lens)) != len(lens):
        return {"context_lens": lens}, "names a context length twice", "give each context length once"
    buckets = bucket_lens(values)
    for name in FLOORS:
        floor = values.get(name)
        extra = sorted(set(floor) - set(buckets)) if isinstance(floor, dict) and lens is not None else []
        if extra:
            return ({name: floor, "context_lens": lens}, f"gives a floor for context length(s) {extra} that "
                    "context_lens does not measure", f"add {extra} to context_lens, or drop them from {name}")
    bare = [b for b in buckets if all(floor_of(v, b) is None for v in (values.get(n) for n in FLOORS)
                                      if isinstance(v, (int, float, dict)))]
    if bare:
        given = {n: values.get(n) for n in FLOORS if values.get(n) is not None}
        return ({**given, "context_lens": lens}, f"measures context length(s) {bare} against no floor",
                f"give a floor for {bare} in a mapping ({{{bare[0]}: 2.0, ...}}), or one number for every length")
    return None


def bucket_label(bucket: int | None, rank: int | None) -> str:
    where = f" at {bucket:,} context tokens" if bucket is not None else ""
    return where + (f" on DP rank {rank}" if rank is not None else "")
