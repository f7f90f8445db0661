# Near 600 lines: the one declaration of every marker keyword's types, constraints and relations (issue 31).
"""Marker keywords, declared once: the keyword-only parameters of a gate's ``run_marker``.

A gate declares each keyword in its signature, with its type, default and constraints::

    @keywords.rules(Requires("min_concurrent_requests", needs=("avg_request_tokens",), why="..."))
    def run_marker(ctx: GateContext, *,
                   min_total_tokens: Annotated[int | None, AtLeast(1)] = None, ...) -> GateOutcome:

Everything else is derived from that one place: the ``pytest --markers`` line (:func:`signature_text`),
the collection-time check of a marker (:func:`marker_problem`: unknown and missing keywords, types from
the annotation, ranges and choices from the constraints, relations from :func:`rules`), and the same
check for the ``evaluate_*``/``assert_*`` helpers (:func:`check`). Threshold checks carry the keyword
(``Check.keyword``), so a failure names what the user wrote: ``min_total_tokens=231120: measured ...``.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin, get_type_hints

from pytest_sglang.errors import ConfigError

__all__ = [
    "Above", "Always", "AnyOf", "AtLeast", "AtMost", "Below", "Checks", "Count", "CountOrWord", "EachOneOf",
    "Excludes", "Fraction", "IntList", "Keyword", "KeywordError",
    "NotBelow",
    "OneOf", "OptionalCount", "Relation", "Requires", "Seconds", "Threshold", "UrlPath", "check", "declared", "given",
    "marker_problem", "rules", "sglang_choices", "signature_text",
]

F = TypeVar("F", bound=Callable[..., Any])
_EMPTY = inspect.Parameter.empty


# ---- constraints on one keyword (next to its annotation) -----------------------------------------
def _num(value: float) -> str:
    return f"{value:,g}" if isinstance(value, float) else f"{value:,}"


@dataclass(frozen=True)
class AtLeast:
    bound: float

    @property
    def text(self) -> str:
        return f">= {_num(self.bound)}"

    def ok(self, value: object) -> bool:
        return isinstance(value, (int, float)) and value >= self.bound


@dataclass(frozen=True)
class Above:
    bound: float

    @property
    def text(self) -> str:
        return f"> {_num(self.bound)}"

    def ok(self, value: object) -> bool:
        return isinstance(value, (int, float)) and value > self.bound


@dataclass(frozen=True)
class AtMost:
    bound: float

    @property
    def text(self) -> str:
        return f"<= {_num(self.bound)}"

    def ok(self, value: object) -> bool:
        return isinstance(value, (int, float)) and value <= self.bound


@dataclass(frozen=True)
class Fraction:
    """A rate from 0 to 1 (``max_error_rate=0.01`` is 1 %).

    ``over_one``: what a number above 1 more likely means for this keyword (``min_accept_rate=1.5`` is an
    accept length, not 1.5 %), said in the fix instead of a percent reading.
    """

    over_one: str = ""

    @property
    def text(self) -> str:
        return "from 0 to 1 (a fraction: 0.01 = 1%)"

    def ok(self, value: object) -> bool:
        return isinstance(value, (int, float)) and 0 <= value <= 1

    def suggest(self, value: object) -> str | None:
        """The fraction meant where a percent is the sensible reading: ``"1.5%"``, or a whole number to 100.

        ``1.5`` may be 1.5 % or another figure (an accept length, a ratio): no fraction is guessed for it.
        """
        written = isinstance(value, str) and value.strip().endswith("%")
        text = str(value).strip().removesuffix("%") if isinstance(value, (str, int, float)) else ""
        try:
            number = float(text)
        except ValueError:
            return None
        if isinstance(value, bool) or not math.isfinite(number) or not 0 <= number <= 100:
            return None
        return f"{number / 100:g}" if written or number.is_integer() else None

    def hint(self, value: object) -> str | None:
        """``over_one`` for a number above 1 (None otherwise)."""
        above = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1
        return self.over_one.format(value=value) if above and self.over_one else None


@dataclass(frozen=True)
class OneOf:
    choices: tuple[str, ...]
    #: Where the choices come from, e.g. "SGLang 0.5.23's --hicache-write-policy".
    origin: str = ""

    @property
    def text(self) -> str:
        origin = f" ({self.origin})" if self.origin else ""
        return f"one of {', '.join(self.choices)}{origin}"

    def ok(self, value: object) -> bool:
        return value in self.choices

    def suggest(self, value: object) -> str | None:
        text = str(value) if isinstance(value, str) else ""
        close = difflib.get_close_matches(text, self.choices, n=1) if len(text) <= 100 else []
        return repr(close[0]) if close else None


@dataclass(frozen=True)
class EachOneOf:
    """A list keyword (``list[str]``) whose every item is one of ``choices`` (``ignore=["tp_size"]``).

    The choices can be many, so the requirement names ``what`` they are (and where they are listed), and
    a bad item is named with the closest choice instead of the whole list.
    """

    choices: tuple[str, ...]
    #: What the items name, e.g. "fields the consistency check compares (docs/fleet.md)".
    what: str

    @property
    def text(self) -> str:
        return f"naming {self.what}"

    def ok(self, value: object) -> bool:
        return isinstance(value, (list, tuple)) and all(v in self.choices for v in value)

    def unknown(self, value: object) -> list[str]:
        """The items of ``value`` that are not choices."""
        items = value if isinstance(value, (list, tuple)) else ()
        return [v for v in items if isinstance(v, str) and v not in self.choices]

    def why(self, value: object) -> str:
        """``has an unknown name 'tp_sise'``: the first bad item, shortened."""
        bad = self.unknown(value)
        return f"has an unknown name {_short(bad[0], 40)}: not one of the {self.what}" if bad \
            else f"must be a list of strings {self.text}"

    def suggest(self, value: object) -> str | None:
        """The list meant: each unknown item replaced by its closest choice, a lone string put in a list."""
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            return None
        fixed = [v if v in self.choices else _closest(v, self.choices) for v in items]
        return repr(fixed) if all(f is not None for f in fixed) and fixed != value else None


@dataclass(frozen=True)
class CountOrWord:
    """A whole number from ``low`` to ``high``, or ``word`` (``num_examples="all"``: every example)."""

    low: int
    high: int
    word: str

    @property
    def text(self) -> str:
        return f"a whole number from {_num(self.low)} to {_num(self.high)}, or {self.word!r}"

    def ok(self, value: object) -> bool:
        if isinstance(value, str):
            return value == self.word
        return isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high


def _closest(value: object, choices: tuple[str, ...]) -> str | None:
    if not isinstance(value, str) or len(value) > 100:
        return None
    close = difflib.get_close_matches(value, choices, n=1)
    return close[0] if close else None


@dataclass(frozen=True)
class UrlPath:
    """A string keyword that is an HTTP path (``readiness_path="/health"``)."""

    @property
    def text(self) -> str:
        return "starting with /"

    def ok(self, value: object) -> bool:
        return isinstance(value, str) and value.startswith("/") and len(value) <= 2000


Constraint = AtLeast | Above | AtMost | Fraction | OneOf | EachOneOf | CountOrWord | UrlPath


#: Shared keyword types. A threshold of 0 or less checks nothing (or everything): refused.
Threshold = Annotated[float | None, Above(0)]
Count = Annotated[int, AtLeast(1)]
OptionalCount = Annotated[int | None, AtLeast(1)]
Seconds = Annotated[float, Above(0)]


def sglang_choices(flag: str) -> OneOf:
    """The values SGLang itself accepts for ``flag`` (its own flag table, not a copy)."""
    from pytest_sglang.sglang.args import flag_choices

    return OneOf(flag_choices(flag), origin=f"SGLang 0.5.23's {flag} choices")


# ---- one keyword, read from the signature --------------------------------------------------------
class IntList(list[int]):
    """The type of a ``list[int]`` keyword (``context_lens=[1024, 32768]``): a non-empty list of whole numbers."""


_TYPE_TEXT = {bool: "True or False", int: "a whole number", float: "a number", str: "a string",
              list: "a list of strings", IntList: "a non-empty list of whole numbers",
              dict: "a non-empty mapping {context tokens: number}"}


@dataclass(frozen=True)
class Keyword:
    """One marker keyword as its gate declares it."""

    name: str
    types: tuple[type, ...]  # among bool, int, float, str, NoneType
    default: object  # inspect.Parameter.empty when required
    constraints: tuple[Constraint, ...]
    annotation: str  # as shown in --markers: "int | None"

    @property
    def required(self) -> bool:
        return self.default is _EMPTY

    @property
    def optional(self) -> bool:
        return type(None) in self.types

    @property
    def requirement(self) -> str:
        """``a whole number >= 1``, ``one of a, b``: what a valid value is."""
        kinds = [t for t in self.types if t is not type(None)]
        either = next((c for c in self.constraints if isinstance(c, CountOrWord)), None)
        if either is not None:  # int | str: the number or the word, said once
            return either.text
        if kinds == [str] and any(isinstance(c, OneOf) for c in self.constraints):
            return " and ".join(c.text for c in self.constraints)
        text = " or ".join(_TYPE_TEXT[t] for t in kinds if not (t is int and float in kinds))
        low = next((c for c in self.constraints if isinstance(c, (AtLeast, Above))), None)
        high = next((c for c in self.constraints if isinstance(c, AtMost)), None)
        if isinstance(low, AtLeast) and high is not None:  # "from 1 to 10,000,000" reads better
            rest = [c.text for c in self.constraints if c is not low and c is not high]
            return " ".join([text, f"from {_num(low.bound)} to {_num(high.bound)}", *rest])
        return " ".join([text, *(c.text for c in self.constraints)])

    def problem(self, value: object) -> str | None:
        """Why ``value`` is not valid for this keyword (None when it is)."""
        if value is None:
            return None if self.optional else f"must be {self.requirement}, not None"
        if not self._type_ok(value):
            return f"must be {self.requirement}, not {_kind(value)}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be {self.requirement}, not {value}"
        if not all(c.ok(item) for c in self.constraints for item in _items(value)):
            names = [c for c in self.constraints if isinstance(c, EachOneOf)]
            return names[0].why(value) if names else f"must be {self.requirement}"
        return None

    def fix(self, value: object) -> str:
        for constraint in self.constraints:
            if not isinstance(constraint, (Fraction, OneOf, EachOneOf)):
                continue
            suggestion = constraint.suggest(value)
            hint = constraint.hint(value) if isinstance(constraint, Fraction) and suggestion is None else None
            if hint is not None:
                return f"give {self.name} {self.requirement}; {hint}"
            if suggestion is not None:
                closest = " (the closest choice)" if isinstance(constraint, OneOf) else ""
                return f"write {self.name}={suggestion}{closest}"
        leave = ", or leave it out" if self.optional and not self.required else ""
        return f"give {self.name} {self.requirement}{leave}"

    def _type_ok(self, value: object) -> bool:
        if isinstance(value, (list, tuple)):  # a list of strings, or a non-empty list of whole numbers
            if list in self.types and all(isinstance(v, str) for v in value):
                return True
            return IntList in self.types and bool(value) and all(_whole(v) for v in value)
        if isinstance(value, dict):  # {whole number: number}, e.g. a floor per context length
            return dict in self.types and bool(value) and all(
                _whole(k) and k >= 1 and _number(v) for k, v in value.items())
        if isinstance(value, bool):  # bool is an int subclass: True is not a threshold
            return bool in self.types
        if isinstance(value, int):
            return int in self.types or float in self.types
        return isinstance(value, tuple(t for t in self.types if t in (float, str)))

    def text(self) -> str:
        default = "" if self.required else f" = {self.default!r}"
        return f"{self.name}: {self.annotation}{default}"


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _items(value: object) -> list[object]:
    """What a constraint judges: each number of a list or mapping, else the value itself."""
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, (list, tuple)) and all(_whole(v) for v in value):
        return list(value)
    return [value]


def _kind(value: object) -> str:
    if isinstance(value, str):
        return f"the string {_short(value)}"
    return "a bool" if isinstance(value, bool) else type(value).__name__


def _short(value: object, limit: int = 60) -> str:
    try:
        text = repr(value)
    except Exception:  # a user object whose repr fails must not turn into a traceback
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _split(hint: Any) -> tuple[Any, tuple[Constraint, ...]]:
    if get_origin(hint) is Annotated:
        base, *meta = get_args(hint)
        return base, tuple(m for m in meta if isinstance(m, Constraint))
    return hint, ()


def _types(base: Any, name: str) -> tuple[type, ...]:
    members = get_args(base) if get_origin(base) in (Union, types.UnionType) else (base,)
    # ``list[str]``: a list (or tuple) of strings, e.g. sglang_fleet(ignore=[...]); the one container allowed.
    members = tuple(list if get_origin(m) is list and get_args(m) == (str,) else
                    IntList if get_origin(m) is list and get_args(m) == (int,) else
                    dict if get_origin(m) is dict and get_args(m) == (int, float) else m for m in members)
    allowed = (bool, int, float, str, list, IntList, dict, type(None))
    if not all(m in allowed for m in members):
        raise TypeError(f"marker keyword {name!r}: declare it as a union of {allowed} (got {base!r})")
    return tuple(members)


def _annotation_text(kinds: Sequence[type]) -> str:
    shown = {type(None): "None", list: "list[str]", IntList: "list[int]", dict: "dict[int, float]"}
    return " | ".join(shown.get(t, t.__name__) for t in kinds)


def _keyword(param: inspect.Parameter, hint: Any) -> Keyword:
    base, constraints = _split(hint)
    kinds = _types(base, param.name)
    return Keyword(param.name, kinds, param.default, constraints, _annotation_text(kinds))


# ---- relations between keywords ------------------------------------------------------------------
def _truthy(value: object) -> bool:
    return value is not None and value is not False


@dataclass(frozen=True)
class Requires:
    """When ``keyword`` is given (not None/False), every keyword of ``needs`` must be too."""

    keyword: str
    needs: tuple[str, ...]
    why: str
    fix: str

    def problem(self, values: Mapping[str, object]) -> tuple[dict[str, object], str, str] | None:
        missing = [n for n in self.needs if not _truthy(values.get(n))]
        if not _truthy(values.get(self.keyword)) or not missing:
            return None
        shown = {self.keyword: values[self.keyword], **{n: False for n in missing if values.get(n) is False}}
        wanted = [f"{n}=True" if values.get(n) is False else n for n in missing]  # a switch: say its value
        return shown, f"needs {' and '.join(wanted)} ({self.why})", self.fix


@dataclass(frozen=True)
class AnyOf:
    """What a gate checks: at least one of ``keywords`` must check something, or the gate would always pass.

    Every gate declares what it checks, this or :class:`Always` (``tests/gates/test_checks_declared.py``
    holds each gate in the registry to it), so a marker or an ``evaluate_*``/``assert_*`` helper whose
    keywords leave nothing to check is refused before anything is sent. A keyword checks nothing when it
    is None or False, or has its ``vacuous`` value (``max_error_rate=1``: every request may fail).
    """

    keywords: tuple[str, ...]
    vacuous: Mapping[str, object] = field(default_factory=dict)
    #: The fix, when "give at least one of ..." says too little (default: that).
    fix: str = ""

    def checks(self, name: str, value: object) -> bool:
        """Whether ``value`` of keyword ``name`` checks something."""
        return value is not None and value is not False and not (
            name in self.vacuous and value == self.vacuous[name])

    def problem(self, values: Mapping[str, object]) -> tuple[dict[str, object], str, str] | None:
        if any(self.checks(k, values.get(k)) for k in self.keywords):
            return None
        return ({}, "checks nothing, so it would always pass",
                self.fix or f"give at least one of {', '.join(self.keywords)}")


@dataclass(frozen=True)
class Always:
    """What a gate checks whatever its keywords (a prefill-decode fleet's roles): it never checks nothing."""

    what: str

    def problem(self, values: Mapping[str, object]) -> None:
        return None


@dataclass(frozen=True)
class NotBelow:
    """``keyword`` must be >= ``other`` (both numbers, when both are set)."""

    keyword: str
    other: str

    def problem(self, values: Mapping[str, object]) -> tuple[dict[str, object], str, str] | None:
        mine, theirs = values.get(self.keyword), values.get(self.other)
        if not isinstance(mine, (int, float)) or not isinstance(theirs, (int, float)) or mine >= theirs:
            return None
        return ({self.keyword: mine, self.other: theirs}, f"{self.keyword} is below {self.other}",
                f"raise {self.keyword} to at least {theirs}")


@dataclass(frozen=True)
class Excludes:
    """``keyword`` and ``other`` cannot both be given (``concurrency`` or ``request_rate``, not both)."""

    keyword: str
    other: str
    why: str

    def problem(self, values: Mapping[str, object]) -> tuple[dict[str, object], str, str] | None:
        mine, theirs = values.get(self.keyword), values.get(self.other)
        if mine is None or theirs is None:
            return None
        return ({self.keyword: mine, self.other: theirs}, f"gives both ({self.why})",
                f"give {self.keyword} or {self.other}, not both")


@dataclass(frozen=True)
class Below:
    """``keyword`` must be < ``other`` (both numbers, when both are set): a limit ``other`` can reach."""

    keyword: str
    other: str
    why: str

    def problem(self, values: Mapping[str, object]) -> tuple[dict[str, object], str, str] | None:
        mine, theirs = values.get(self.keyword), values.get(self.other)
        if not isinstance(mine, (int, float)) or not isinstance(theirs, (int, float)) or mine < theirs:
            return None
        return ({self.other: theirs, self.keyword: mine}, f"{self.keyword} is not below {self.other} ({self.why})",
                f"lower {self.keyword} below {theirs:g}, or raise {self.other} above {mine:g}")


@dataclass(frozen=True)
class Relation:
    """A relation of a gate's own between its keywords: ``judge(values)`` gives (shown, problem, fix) or None."""

    judge: Callable[[Mapping[str, object]], tuple[dict[str, object], str, str] | None]

    def problem(self, values: Mapping[str, object]) -> tuple[dict[str, object], str, str] | None:
        return self.judge(values)


Rule = Requires | AnyOf | Always | NotBelow | Excludes | Below | Relation
#: The declaration of what a gate checks: every gate has exactly one.
Checks = AnyOf | Always
_RULES: dict[Callable[..., Any], tuple[Rule, ...]] = {}


def rules(*declared_rules: Rule) -> Callable[[F], F]:
    """Declare the relations between a gate's keywords, right above its ``run_marker``."""

    def mark(fn: F) -> F:
        _RULES[fn] = declared_rules
        return fn

    return mark


# ---- the declaration of one gate ------------------------------------------------------------------
@dataclass(frozen=True)
class Declaration:
    keywords: dict[str, Keyword]
    rules: tuple[Rule, ...]
    accepts_any: bool  # ``**kwargs`` in the signature: unknown keywords are the gate's business

    @property
    def checks(self) -> Checks | None:
        """What the gate declared it checks (:class:`AnyOf` or :class:`Always`), None when it did not."""
        return next((r for r in self.rules if isinstance(r, (AnyOf, Always))), None)

    def values(self, given: Mapping[str, object]) -> dict[str, object]:
        """The defaults overlaid with what was given."""
        return {**{k.name: k.default for k in self.keywords.values() if not k.required}, **given}


@functools.cache
def declared(fn: Callable[..., Any]) -> Declaration:
    """The keywords (keyword-only parameters) and rules of a gate function."""
    hints = get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())
    keywords = {p.name: _keyword(p, hints[p.name]) for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    return Declaration(keywords, _RULES.get(fn, ()), accepts_any)


def given() -> dict[str, object]:
    """The keyword-only arguments of the calling function, by name, as they stand now.

    What a gate's body reads of its own keywords (``floors_given(keywords.given())``): the signature's
    keywords only, never a local the body has made by then (as ``locals()`` would hand over).
    """
    frame = inspect.currentframe()
    caller = frame.f_back if frame is not None else None
    if caller is None:  # pragma: no cover - CPython always has the caller's frame
        raise RuntimeError("keywords.given() needs its caller's frame")
    code, values = caller.f_code, caller.f_locals
    names = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    return {name: values[name] for name in names if name in values}


def signature_text(fn: Callable[..., Any]) -> str:
    """``(*, min_total_tokens: int | None = None, ...)``: the keywords as the signature declares them."""
    return "(*, " + ", ".join(k.text() for k in declared(fn).keywords.values()) + ")"


class KeywordError(ConfigError):
    """A keyword with a bad value: names the marker (or helper), the keyword, the value and the fix."""

    def __init__(self, call: str, shown: Mapping[str, object], problem: str, fix: str) -> None:
        text = ", ".join(f"{k}={_short(v)}" for k, v in shown.items())
        self.call, self.keywords = call, tuple(shown)
        self.source, self.value, self.problem, self.fix = f"{call}({text})", dict(shown), problem, fix
        Exception.__init__(self, f"{call}({text}): {problem}. Fix: {fix}")


def check(fn: Callable[..., Any], call: str, given: Mapping[str, object]) -> None:
    """Raise :class:`KeywordError` for the first bad keyword or broken rule in ``given``."""
    declaration = declared(fn)
    for name, value in given.items():
        keyword = declaration.keywords.get(name)
        problem = None if keyword is None else keyword.problem(value)
        if keyword is not None and problem is not None:
            raise KeywordError(call, {name: value}, problem, keyword.fix(value))
    values = declaration.values(given)
    for rule in declaration.rules:
        found = rule.problem(values)
        if found is not None:
            shown, problem, fix = found
            if isinstance(rule, AnyOf):  # name what was given that checks nothing (readiness_path=None)
                shown = {k: given[k] for k in rule.keywords if k in given}
            raise KeywordError(call, shown, problem, fix)


def marker_problem(marker: str, fn: Callable[..., Any], args: Sequence[object],
                   kwargs: Mapping[str, object]) -> str | None:
    """Why ``@pytest.mark.<marker>(*args, **kwargs)`` is not valid for its gate (None when it is)."""
    declaration = declared(fn)
    names = list(declaration.keywords)
    valid = f"valid keywords: {', '.join(names)}"
    if args:
        return (f"@pytest.mark.{marker} takes keyword arguments only, got positional {_short(tuple(args))}; "
                f"write e.g. @pytest.mark.{marker}({names[0] if names else 'name'}=...); {valid}")
    for key in kwargs:
        if key not in declaration.keywords and not declaration.accepts_any:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"@pytest.mark.{marker} has no keyword {key!r}{hint}; {valid}"
    missing = [k.name for k in declaration.keywords.values() if k.required and k.name not in kwargs]
    if missing:
        return f"@pytest.mark.{marker} needs {', '.join(repr(m) for m in missing)}; {valid}"
    try:
        check(fn, f"@pytest.mark.{marker}", kwargs)
    except KeywordError as exc:
        return str(exc)
    return None
