"""One mask for every writer of ``user_properties`` (issue 22): a gateway listing a worker as
``http://user:password@host`` put the password into JUnit property names (terminal, JSON and HTML masked it)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_sglang import redaction
from pytest_sglang.plugin.results import mask_properties
from pytest_sglang.server.url import parse_server_url
from tests.server.fakehttp import Route, fake_server, json_answer

PASSWORD = "s3cret-Pw-91"
INNER = """
import pytest

@pytest.mark.sglang_capacity(min_total_tokens=1000)
def test_capacity(sglang_server):
    pass
"""


def _gateway(worker_url: str) -> dict[str, Route]:
    body = {"workers": [{"url": worker_url, "worker_type": "regular", "is_healthy": True, "labels": {}}], "total": 1}
    return {"/workers": lambda h: json_answer(body), "/health": lambda h: (200, "", None),
            "/readiness": lambda h: json_answer({"healthy_workers": 1, "total_workers": 1})}


def test_junit_property_names_mask_a_worker_url_password(pytester: pytest.Pytester, sim_factory: Any) -> None:
    sim = sim_factory()
    port = parse_server_url(sim.url).port
    pytester.makepyfile(test_fleet_capacity=INNER)
    with fake_server(_gateway(f"http://ci:{PASSWORD}@127.0.0.1:{port}")) as gateway:
        result = pytester.runpytest_subprocess("--sglang-url", gateway.url, "--junitxml=junit.xml",
                                               "--sglang-report=report.json", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    junit = (pytester.path / "junit.xml").read_text()
    assert PASSWORD not in junit
    names = [p.get("name") for p in ET.fromstring(junit).iter("property")]
    assert f"sglang.capacity.max_total_num_tokens of worker 0 (http://ci:***@127.0.0.1:{port})" in names
    assert PASSWORD not in result.stdout.str() and PASSWORD not in (pytester.path / "report.json").read_text()


#: What RFC 3986 allows in a URL's password (anything else arrives percent-encoded).
_secret = st.from_regex(r"[A-Za-z0-9\-._~!$&'()*+,;=%]{4,20}", fullmatch=True)


@given(user=st.from_regex(r"[a-z]{1,8}", fullmatch=True), password=_secret, value=st.integers())
def test_every_property_name_and_text_value_is_masked(user: str, password: str, value: int) -> None:
    url, shown = f"http://{user}:{password}@10.0.0.2:30000", f"http://{user}:***@10.0.0.2:30000"
    masked = mask_properties([(f"sglang.capacity.x of worker 0 ({url})", value), ("note", f"see {url}/x"),
                              ("sglang_outcome", json.dumps({"url": url}))])
    assert masked == [(f"sglang.capacity.x of worker 0 ({shown})", value), ("note", f"see {shown}/x"),
                      ("sglang_outcome", json.dumps({"url": shown}))]


def test_a_registered_secret_is_masked_in_names_too() -> None:
    redaction.register("hf_abcdefgh")
    try:
        assert mask_properties([("sglang.x hf_abcdefgh", "hf_abcdefgh")]) == [("sglang.x ***", "***")]
    finally:
        redaction.clear()
