"""JSON Schema validation of SGLang payloads (``/server_info``, ``/model_info``, health probes).

Schemas live in the top-level ``schemas/`` directory of the source tree; the wheel force-includes it
as ``pytest_sglang/schemas`` (see ``pyproject.toml``), so they are found through
:mod:`importlib.resources` once installed and through the source tree in an editable checkout.

Error messages follow STYLE.md: jsonschema's ``best_match`` as the headline, then every error as
``json_path: message`` with the offending value truncated, never the whole document (a 0.5.23
``/server_info`` body is ~37 kB).
"""

from __future__ import annotations

import functools
import json
import sys
from importlib import resources
from pathlib import Path

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from pytest_sglang.errors import SchemaMismatch
from pytest_sglang.jsontypes import JSONObject

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - Python 3.10
    from importlib.abc import Traversable

#: Names accepted by :func:`load_schema` (file ``schemas/<name>.schema.json``).
SCHEMA_NAMES = ("health", "model_info", "server_info")
EXCERPT_CHARS = 80
MAX_LISTED_ERRORS = 20


def schema_dir() -> Traversable:
    """Where the schemas are: inside the installed package, else the source tree's ``schemas/``."""
    packaged = resources.files("pytest_sglang") / "schemas"
    if packaged.is_dir():
        return packaged
    # Editable checkout: the package is pytest_sglang/ next to the top-level schemas/.
    return Path(__file__).resolve().parents[2] / "schemas"


@functools.cache
def load_schema(name: str) -> JSONObject:
    """Return the parsed schema ``name`` (checked against its metaschema once, then cached)."""
    if name not in SCHEMA_NAMES:
        raise ValueError(f"unknown schema {name!r}: expected one of {', '.join(SCHEMA_NAMES)}")
    schema: JSONObject = json.loads((schema_dir() / f"{name}.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return schema


@functools.cache
def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(load_schema(name))


def prepare(name: str) -> None:
    """Load, check and compile schema ``name`` now (once per process), so its first use is fast.

    The readiness wait calls it while the server is still starting: the metaschema check (tens of ms)
    then no longer sits between the first ``/health`` 200 and the validated ``/server_info``.
    """
    _validator(name)


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """A short, single-line rendering of ``value`` for error messages."""
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_error(error: ValidationError) -> str:
    """``$.path: message (value: excerpt)`` without dumping large instances."""
    path = error.json_path
    if error.validator == "required":
        return f"{path}: {error.message}"
    message = error.message
    whole = repr(error.instance)
    if len(whole) > EXCERPT_CHARS and whole in message:
        message = message.replace(whole, excerpt(error.instance))
    if len(message) > 2 * EXCERPT_CHARS:
        message = message[: 2 * EXCERPT_CHARS - 3] + "..."
    return f"{path}: {message} (value: {excerpt(error.instance)})"


def payload_errors(payload: object, name: str) -> list[ValidationError]:
    """Every validation error of ``payload`` against schema ``name``, ordered by JSON path."""
    return sorted(_validator(name).iter_errors(payload), key=lambda e: (e.json_path, e.message))


def validate_payload(payload: object, name: str, endpoint: str) -> None:
    """Raise :class:`SchemaMismatch` if ``payload`` (from ``endpoint``) does not match schema ``name``."""
    errors = payload_errors(payload, name)
    if not errors:
        return
    best = best_match(errors)
    headline = describe_error(best) if best is not None else describe_error(errors[0])
    lines = [describe_error(e) for e in errors[:MAX_LISTED_ERRORS]]
    if len(errors) > MAX_LISTED_ERRORS:
        lines.append(f"... and {len(errors) - MAX_LISTED_ERRORS} more errors")
    raise SchemaMismatch(endpoint, str(load_schema(name).get("$id", name)), headline, lines)


def not_json_error(endpoint: str, name: str, text: str, content_type: str | None) -> SchemaMismatch:
    """The error for a body that is not JSON at all (shown with a short excerpt of the body)."""
    body = text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 3] + "..."
    headline = f"$: the body is not JSON (content-type {content_type or 'none'}): {body!r}"
    return SchemaMismatch(endpoint, str(load_schema(name).get("$id", name)), headline, [])


class SchemaWarning(UserWarning):
    """A schema mismatch reported as a warning (``--sglang-validate=warn``)."""
