"""Both of SGLang's metric spellings (``sglang:`` and ``sglang_``) read as one name."""

from __future__ import annotations

from pytest_sglang.loadgen.client.servermetrics import parse_gauges
from pytest_sglang.sglang import metrics_text

COLON = """# HELP sglang:num_running_reqs running
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{tp_rank="0"} 3.0
sglang:num_running_reqs{tp_rank="1"} 2.0
"""
UNDERSCORE = COLON.replace("sglang:", "sglang_")


def test_the_underscore_spelling_reads_as_the_colon_one() -> None:
    parsed = metrics_text.parse(UNDERSCORE)
    assert metrics_text.value(parsed, "sglang:num_running_reqs") == 5.0
    assert metrics_text.value(parsed, "sglang_num_running_reqs") == 5.0
    assert parsed["sglang:num_running_reqs"][0].name == "sglang:num_running_reqs"
    assert metrics_text.value(parsed, "sglang:num_running_reqs", tp_rank="1") == 2.0


def test_a_page_with_both_spellings_is_not_counted_twice() -> None:
    both = COLON + UNDERSCORE.replace("3.0", "30.0")
    assert metrics_text.value(metrics_text.parse(both), "sglang:num_running_reqs") == 5.0


def test_counters_keep_their_total_suffix_in_either_spelling() -> None:
    text = "# TYPE sglang_num_requests_total counter\nsglang_num_requests_total 7.0\n"
    assert metrics_text.value(metrics_text.parse(text), "sglang:num_requests_total") == 7.0


def test_other_names_are_left_alone() -> None:
    assert metrics_text.canonical("process_cpu_seconds_total") == "process_cpu_seconds_total"
    assert metrics_text.canonical("sglang_x") == "sglang:x"
    assert metrics_text.canonical("sglang:x") == "sglang:x"


def test_the_load_samplers_gauges_read_either_spelling() -> None:
    assert parse_gauges(UNDERSCORE) == {"num_running_reqs": 5.0}
    assert parse_gauges(COLON) == {"num_running_reqs": 5.0}
