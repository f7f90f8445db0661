"""A JSON instance for a JSON Schema: what the simulated model writes under a ``json_schema`` grammar.

Real SGLang compiles the schema with its grammar backend and masks every token that would leave
the language, so any output is valid. The simulator builds one valid instance directly (the same
one each time for the same schema) and rejects what 0.5.23's xgrammar backend rejects, with the
same text (``sglang/srt/constrained/json_schema_validation.py``).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from pytest_sglang.simulator.model.regex_instance import regex_instance

__all__ = ["check_supported", "instance", "violate"]

#: xgrammar 0.2.x accepts these keywords without enforcing them; 0.5.23 rejects the schema.
XGRAMMAR_UNSUPPORTED = frozenset(
    {
        "contains",
        "dependentRequired",
        "dependentSchemas",
        "else",
        "if",
        "maxContains",
        "minContains",
        "multipleOf",
        "not",
        "then",
        "uniqueItems",
    }
)
XGRAMMAR_FORMATS = frozenset(
    {
        "date",
        "date-time",
        "duration",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "json-pointer",
        "relative-json-pointer",
        "time",
        "uri",
        "uri-reference",
        "uri-template",
        "uuid",
    }
)
_FORMAT_SAMPLES = {
    "date": "2024-01-02",
    "date-time": "2024-01-02T03:04:05Z",
    "duration": "P1D",
    "email": "user@example.com",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "json-pointer": "/a",
    "relative-json-pointer": "0",
    "time": "03:04:05Z",
    "uri": "https://example.com/",
    "uri-reference": "/a",
    "uri-template": "/a/{b}",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
}
_WORDS = ("Paris", "blue", "alpha", "seven", "river", "lamp", "Tokyo", "green")
_MAX_DEPTH = 12
#: Bounds on the work a hostile schema can cause: values built, and array / string sizes.
_MAX_NODES = 10_000
_MAX_SIZE = 1_000


def _subschemas(schema: Any, pointer: str = "#") -> list[tuple[dict[str, Any], str]]:
    out: list[tuple[dict[str, Any], str]] = []
    if not isinstance(schema, dict):
        return out
    out.append((schema, pointer))
    for key in ("additionalProperties", "items", "not", "if", "then", "else", "contains", "propertyNames"):
        child = schema.get(key)
        if isinstance(child, dict):
            out += _subschemas(child, f"{pointer}/{key}")
    for key in ("allOf", "anyOf", "oneOf", "prefixItems"):
        for i, child in enumerate(schema.get(key) or []):
            out += _subschemas(child, f"{pointer}/{key}/{i}")
    for key in ("$defs", "definitions", "properties", "patternProperties"):
        children = schema.get(key)
        if isinstance(children, dict):
            for name, child in children.items():
                escaped = str(name).replace("~", "~0").replace("/", "~1")
                out += _subschemas(child, f"{pointer}/{key}/{escaped}")
    return out


def check_supported(schema: Any) -> str | None:
    """The 0.5.23 xgrammar error for ``schema`` (without the ``Failed to compile`` prefix), or None."""
    for sub, pointer in _subschemas(schema):
        bad = sorted(XGRAMMAR_UNSUPPORTED.intersection(sub))
        if bad:
            return (
                f"JSON Schema at {pointer} is not supported by xgrammar: keyword(s) {', '.join(bad)} would be ignored"
            )
        stringy = sub.get("type") in (None, "string") or (isinstance(sub.get("type"), list) and "string" in sub["type"])
        if stringy and "format" in sub and sub["format"] not in XGRAMMAR_FORMATS:
            return (
                f"JSON Schema at {pointer} is not supported by xgrammar: "
                f"string format {sub['format']!r} is not implemented"
            )
        groups = [g for g, keys in _STRING_GROUPS if stringy and any(k in sub for k in keys)]
        if len(groups) > 1:
            return (
                f"JSON Schema at {pointer} is not supported by xgrammar: constraints "
                f"{', '.join(groups)} cannot be enforced together"
            )
    return None


_STRING_GROUPS = (
    ("format", ("format",)),
    ("pattern", ("pattern",)),
    ("minLength/maxLength", ("minLength", "maxLength")),
)


class _Builder:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.nodes = 0

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            node: Any = self.root
            for part in ref[2:].split("/"):
                node = node.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(node, dict) else {}
            return node if isinstance(node, dict) else {}
        return schema

    def build(self, schema: Any, name: str, depth: int) -> Any:
        self.nodes += 1
        if not isinstance(schema, dict) or depth > _MAX_DEPTH or self.nodes > _MAX_NODES:
            return None if schema is False else {}
        schema = self.resolve(schema)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][0]
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                return self.build(schema[key][0], name, depth + 1)
        if schema.get("allOf"):
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                merged.update(self.resolve(part) if isinstance(part, dict) else {})
            return self.build(merged, name, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
        return getattr(self, f"_{kind}", self._null)(schema, name, depth)

    def _object(self, schema: dict[str, Any], name: str, depth: int) -> dict[str, Any]:
        props: dict[str, Any] = schema.get("properties") or {}
        required = [str(k) for k in schema.get("required") or []]
        # Every required property, then the optional ones (a model under a grammar fills in most).
        keys = required + [k for k in props if k not in required]
        return {k: self.build(props.get(k, {}), k, depth + 1) for k in keys}

    def _array(self, schema: dict[str, Any], name: str, depth: int) -> list[Any]:
        count = min(_MAX_SIZE, max(int(schema.get("minItems") or 0), min(2, int(schema.get("maxItems", 2)))))
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", {})
        return [self.build(prefix[i] if i < len(prefix) else items, name, depth + 1) for i in range(count)]

    def _string(self, schema: dict[str, Any], name: str, depth: int) -> str:
        if schema.get("format") in _FORMAT_SAMPLES:
            return _FORMAT_SAMPLES[str(schema["format"])]
        if isinstance(schema.get("pattern"), str):
            return regex_instance(str(schema["pattern"]).removeprefix("^").removesuffix("$"))
        word = _WORDS[zlib.crc32(name.encode()) % len(_WORDS)]
        low, high = int(schema.get("minLength") or 0), schema.get("maxLength")
        text = word.ljust(min(low, _MAX_SIZE), "a")
        return text[: int(high)] if high is not None else text

    def _integer(self, schema: dict[str, Any], name: str, depth: int) -> int:
        return int(self._number(schema, name, depth, step=1))

    def _number(self, schema: dict[str, Any], name: str, depth: int, step: float = 0.5) -> float:
        value = float(3 + zlib.crc32(name.encode()) % 40)
        if "minimum" in schema:
            value = max(value, float(schema["minimum"]))
        if "exclusiveMinimum" in schema:
            value = max(value, float(schema["exclusiveMinimum"]) + step)
        if "maximum" in schema:
            value = min(value, float(schema["maximum"]))
        if "exclusiveMaximum" in schema:
            value = min(value, float(schema["exclusiveMaximum"]) - step)
        return value

    def _boolean(self, schema: dict[str, Any], name: str, depth: int) -> bool:
        return True

    def _null(self, schema: dict[str, Any], name: str, depth: int) -> None:
        return None


def instance(schema: dict[str, Any]) -> Any:
    """One instance valid against ``schema`` (types, required, enum/const, bounds, $ref, anyOf...)."""
    return _Builder(schema).build(schema, "value", 0)


def violate(schema: dict[str, Any], value: Any) -> Any:
    """``value`` made invalid against ``schema`` (the ``json-schema-violation`` fault), still JSON."""
    if isinstance(value, dict):
        required = [str(k) for k in schema.get("required") or [] if k in value]
        if required:
            return {k: v for k, v in value.items() if k != required[0]}
        return {**value, "_unexpected": [1]} if schema.get("additionalProperties") is False else []
    if isinstance(value, bool) or value is None:
        return "not-a-boolean"
    if isinstance(value, (int, float, list)):
        return "not-a-number" if not isinstance(value, list) else {"not": "an array"}
    return 12345


def dumps(value: Any) -> str:
    """How the constrained model spells JSON: xgrammar's default separators (``", "``, ``": "``)."""
    return json.dumps(value, ensure_ascii=False)
