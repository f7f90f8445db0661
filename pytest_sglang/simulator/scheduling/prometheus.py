"""Writing Prometheus text: label sets and families (shared by :mod:`~pytest_sglang.simulator.front.metrics` and :mod:`~pytest_sglang.simulator.front.metrics_extra`)."""

from __future__ import annotations

from collections.abc import Iterable

from pytest_sglang.simulator.scheduling.stats import Histogram


def labels(**kv: str) -> str:
    """``{a="1",b="2"}``: a label set, names sorted (as prometheus_client writes them)."""
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(kv.items())) + "}"


class PromText:
    """Prometheus text exposition lines, one family after another (``sglang:`` names)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: Iterable[tuple[str, float]]) -> None:
        """A gauge or counter family: ``samples`` are (label text, value)."""
        self.lines.append(f"# HELP sglang:{name} {help_text}")
        self.lines.append(f"# TYPE sglang:{name} {kind}")
        for label_text, value in samples:
            self.lines.append(f"sglang:{name}{label_text} {float(value)!r}")

    def histogram(self, name: str, help_text: str, items: Iterable[tuple[dict[str, str], Histogram]]) -> None:
        """A histogram family: cumulative buckets, sum and count per label set."""
        self.lines.append(f"# HELP sglang:{name} {help_text}")
        self.lines.append(f"# TYPE sglang:{name} histogram")
        for label_set, h in items:
            for le, count in h.cumulative():
                self.lines.append(f"sglang:{name}_bucket{labels(**label_set, le=le)} {float(count)!r}")
            self.lines.append(f"sglang:{name}_sum{labels(**label_set)} {h.sum!r}")
            self.lines.append(f"sglang:{name}_count{labels(**label_set)} {float(h.count)!r}")
