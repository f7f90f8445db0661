"""Parse Prometheus text exposition (SGLang's ``/metrics``) with prometheus_client's own parser.

The result is keyed by **sample name** (``sglang:num_requests_total``,
``sglang:e2e_request_latency_seconds_bucket``) because that is the name users read on the page;
label order is not guaranteed by SGLang, so labels are a dict and :func:`value` selects by label subset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Sample:
    """One sample line: name, labels, value (and the family's type, e.g. ``counter``)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    value: float = 0.0
    type: str = "untyped"


def parse(text: str) -> dict[str, list[Sample]]:
    """Parse exposition text into ``{sample name: [Sample, ...]}`` (raises ValueError on bad text)."""
    out: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            item = Sample(name=sample.name, labels=dict(sample.labels), value=float(sample.value),
                          type=family.type)
            out.setdefault(sample.name, []).append(item)
    return out


def value(metrics: Mapping[str, list[Sample]], name: str, **labels: str) -> float | None:
    """The sum of the samples called ``name`` whose labels include ``labels`` (None when absent).

    Summing is what a reader wants for per-rank gauges and counters split by label (e.g.
    ``sglang:num_requests_total`` with and without ``is_streaming``).
    """
    matching = [s.value for s in metrics.get(name, [])
                if all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(matching) if matching else None
