"""The type of a decoded JSON document, for signatures that take or return one (instead of ``Any``).

``json.loads`` returns one of these; a caller narrows with ``isinstance`` before reading a field, so a
server answering an unexpected shape is a clear check failure, never an ``AttributeError`` deep inside.
"""

from __future__ import annotations

from typing import TypeAlias, Union

JSONValue: TypeAlias = Union["JSONObject", "JSONArray", str, int, float, bool, None]
JSONArray: TypeAlias = list[JSONValue]
JSONObject: TypeAlias = dict[str, JSONValue]
