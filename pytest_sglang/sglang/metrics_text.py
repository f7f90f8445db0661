"""Parse Prometheus text exposition (SGLang's ``/metrics``) with prometheus_client's own parser.

The result is keyed by **sample name** (``sglang:num_requests_total``,
``sglang:e2e_request_latency_seconds_bucket``) because that is the name users read on the page;
label order is not guaranteed by SGLang, so labels are a dict and :func:`value` selects by label subset.

SGLang's metric names are spelt ``sglang:NAME`` or ``sglang_NAME`` depending on the version and on how
Prometheus multiprocess mode is set up; both are seen in the field. Every name is read in its canonical
``sglang:`` spelling (:func:`canonical`), here and only here, so a reader never calls a metric absent
because of its spelling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["PREFIX", "Sample", "canonical", "parse", "value"]

#: The canonical prefix of SGLang's metric names.
PREFIX = "sglang:"
_OTHER_PREFIX = "sglang_"


@dataclass(frozen=True)
class Sample:
    """One sample line: name, labels, value (and the family's type, e.g. ``counter``)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    value: float = 0.0
    type: str = "untyped"


def canonical(name: str) -> str:
    """``sglang_num_running_reqs`` -> ``sglang:num_running_reqs``; other names unchanged."""
    return PREFIX + name[len(_OTHER_PREFIX):] if name.startswith(_OTHER_PREFIX) else name


def parse(text: str) -> dict[str, list[Sample]]:
    """Parse exposition text into ``{canonical sample name: [Sample, ...]}`` (raises ValueError on bad text).

    A page that carries one metric in both spellings keeps the ``sglang:`` one only: summing the two
    would count every request twice.
    """
    raw: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            item = Sample(name=sample.name, labels=dict(sample.labels), value=float(sample.value),
                          type=family.type)
            raw.setdefault(sample.name, []).append(item)
    out: dict[str, list[Sample]] = {}
    for name, samples in raw.items():
        key = canonical(name)
        if key != name and key in raw:
            continue
        out[key] = [s if s.name == key else Sample(key, s.labels, s.value, s.type) for s in samples]
    return out


def value(metrics: Mapping[str, list[Sample]], name: str, **labels: str) -> float | None:
    """The sum of the samples called ``name`` (either spelling) whose labels include ``labels`` (None when absent).

    Summing is what a reader wants for per-rank gauges and counters split by label (e.g.
    ``sglang:num_requests_total`` with and without ``is_streaming``).
    """
    matching = [s.value for s in metrics.get(canonical(name), [])
                if all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(matching) if matching else None
