"""Structured output: every constrained answer parses and matches its constraint, under mixed traffic."""

from __future__ import annotations

import pytest

from pytest_sglang.acceptance.support import run
from pytest_sglang.correctness import CheckContext, structured


@pytest.mark.parametrize(("kind", "stream"), [
    pytest.param("json_schema", False, id="json_schema"),
    pytest.param("json_schema", True, id="json_schema-stream"),
    pytest.param("regex", False, id="regex"),
    pytest.param("ebnf", False, id="ebnf"),
])
def test_structured_output(sglang_acceptance: CheckContext, kind: str, stream: bool) -> None:
    run(structured.check_structured, sglang_acceptance, kind, stream)
