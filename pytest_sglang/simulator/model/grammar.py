"""Constrained decoding (``json_schema``, ``regex``, ``ebnf``) as SGLang 0.5.23 accepts it.

Where a request asks for it (checked like 0.5.23, messages verbatim):
- ``/generate``: ``sampling_params.json_schema`` (a JSON string), ``regex``, ``ebnf``;
- ``/v1/chat/completions`` and ``/v1/completions``: ``response_format`` of type ``json_schema``
  (``{"json_schema": {"name", "schema"}}``) or ``json_object``, and the SGLang extras ``regex``
  and ``ebnf`` at the top level (``response_format: {"type": "regex"}`` is a 400 in 0.5.23).
At most one may be set ("Only one of json_schema, regex, ebnf, or structural_tag can be set.").
The grammar is compiled when the request is scheduled, so a compile error is a 400 before a
stream starts and an in-band error chunk once it has. ``--grammar-backend none`` refuses them all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pytest_sglang.simulator.model import schema_instance
from pytest_sglang.simulator.model.ebnf_instance import ebnf_instance
from pytest_sglang.simulator.model.regex_instance import GrammarError, regex_instance

__all__ = ["Constraint", "ConstraintError", "compile_instance", "from_native", "from_openai"]

Kind = Literal["json", "regex", "ebnf", "structural_tag"]
NO_BACKEND = (
    "Grammar-based generation (json_schema, regex, ebnf, structural_tag) is not supported when the "
    "server is launched with --grammar-backend none"
)
ONLY_ONE = "Only one of json_schema, regex, ebnf, or structural_tag can be set."
#: What the model writes for ``response_format: json_object`` (0.5.23 constrains to {"type": "object"}).
JSON_OBJECT = '{"type": "object"}'


class ConstraintError(ValueError):
    """A constraint SGLang refuses; ``str()`` is SGLang's message (the caller picks the envelope)."""


@dataclass(frozen=True)
class Constraint:
    kind: Kind
    source: str  # the schema as JSON text, the regex or the EBNF grammar

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON schema of a json constraint ({} for other kinds or a schema that is not an object)."""
        if self.kind != "json":
            return {}
        try:
            value = json.loads(self.source)
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}

    def answer(self, value: Any) -> tuple[str, Any]:
        """How :class:`~pytest_sglang.simulator.model.answer.Ask` carries the compiled instance."""
        return ("json" if self.kind == "json" else "text", value)


def _one(found: list[Constraint]) -> Constraint | None:
    if len(found) > 1:
        raise ConstraintError(ONLY_ONE)
    return found[0] if found else None


_NATIVE_KEYS: tuple[tuple[str, Kind], ...] = (
    ("json_schema", "json"),
    ("regex", "regex"),
    ("ebnf", "ebnf"),
    ("structural_tag", "structural_tag"),
)


def from_native(sampling_params: dict[str, Any]) -> Constraint | None:
    """The constraint of a /generate ``sampling_params`` (None when unconstrained)."""
    found: list[Constraint] = []
    for key, kind in _NATIVE_KEYS:
        value = sampling_params.get(key)
        if value is not None:
            found.append(Constraint(kind, json.dumps(value) if isinstance(value, dict) else str(value)))
    return _one(found)


def from_openai(body: dict[str, Any]) -> Constraint | None:
    """The constraint of an OpenAI request: ``response_format`` plus the ``regex``/``ebnf`` extras."""
    found: list[Constraint] = []
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else fmt.get("schema")
        if schema is None:
            raise ConstraintError("schema_ is required for json_schema response format request.")
        found.append(Constraint("json", json.dumps(schema)))
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        found.append(Constraint("json", JSON_OBJECT))
    if body.get("regex") is not None:
        found.append(Constraint("regex", str(body["regex"])))
    if body.get("ebnf") is not None:
        found.append(Constraint("ebnf", str(body["ebnf"])))
    if body.get("json_schema") is not None:  # CompletionRequest's extra field
        found.append(Constraint("json", str(body["json_schema"])))
    return _one(found)


def check_response_format(body: dict[str, Any]) -> str | None:
    """0.5.23's pydantic refusal of a ``response_format`` type it does not know (e.g. "regex"), or None."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict) or fmt.get("type") in ("text", "json_object", "json_schema", "structural_tag"):
        return None
    kind = fmt.get("type")
    lit = "'type': 'literal_error', 'loc': ('body', 'response_format', {model}, 'type'), 'msg': {msg}, "
    errors = [
        "{"
        + lit.format(model="'ResponseFormat'", msg="\"Input should be 'text', 'json_object' or 'json_schema'\"")
        + f"'input': {kind!r}, 'ctx': {{'expected': \"'text', 'json_object' or 'json_schema'\"}}}}",
    ]
    for model, missing in (
        ("LegacyStructuralTagResponseFormat", ("structures", "triggers")),
        ("StructuralTag", ("format",)),
    ):
        errors.append(
            "{"
            + lit.format(model=repr(model), msg="\"Input should be 'structural_tag'\"")
            + f"'input': {kind!r}, 'ctx': {{'expected': \"'structural_tag'\"}}}}"
        )
        errors += [
            f"{{'type': 'missing', 'loc': ('body', 'response_format', {model!r}, {field!r}), "
            f"'msg': 'Field required', 'input': {fmt!r}}}"
            for field in missing
        ]
    return f"{len(errors)} validation errors:\n  " + "\n  ".join(errors)


def compile_instance(constraint: Constraint, backend: str | None) -> Any:
    """The model's output under ``constraint``: the JSON value (kind json) or the text.

    Raises :class:`ConstraintError` with 0.5.23's text when the grammar does not compile.
    """
    if backend in (None, "none"):
        raise ConstraintError(NO_BACKEND)
    try:
        if constraint.kind == "json":
            return _json_value(constraint.source)
        if constraint.kind == "regex":
            return regex_instance(constraint.source)
        if constraint.kind == "ebnf":
            return ebnf_instance(constraint.source)
    except GrammarError as exc:
        raise ConstraintError(f"Failed to compile {constraint.kind} grammar: {exc}") from None
    raise ConstraintError("Failed to compile structural_tag grammar: the simulator does not model structural tags")


def _json_value(source: str) -> Any:
    try:
        schema = json.loads(source)
    except json.JSONDecodeError as exc:
        raise ConstraintError(f"Failed to compile json grammar: {exc}") from None
    problem = schema_instance.check_supported(schema)
    if problem:
        raise ConstraintError(f"Failed to compile json grammar: {problem}")
    if source == JSON_OBJECT:
        return {"answer": "yes"}  # any object is valid; an empty one would look like a broken model
    return schema_instance.instance(schema if isinstance(schema, dict) else {})
