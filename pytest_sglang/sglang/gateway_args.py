"""SGLang's gateways' launch flags, recorded (smg 1.13.0, sglang-router 0.3.2): typos and secrets.

``data/smg_1_13_0_flags.txt`` and ``data/sglang_router_0_3_2_flags.txt`` are the argparse parsers of the
installed gateways, recorded by ``scripts/gateway/record_flags.py``. Both gateways use argparse with
its prefix abbreviations, so gateway args are read here by an argparse built from the table
(:func:`read_gateway_args`), the way the gateway will read them:

* a misspelt flag (``--polcy``) is refused before any worker starts (:func:`check_gateway_flags`);
  an unknown flag not close to a known one (a newer gateway) is only reported;
* every credential-bearing flag (:data:`SECRET_DESTS`) is masked in every spelling the gateway
  accepts (``--api-key K``, ``--api-k=K``, ``--oracle-pass P``) wherever the command line is shown or kept.

The gateway that will run is known only once its command is resolved (``smg --version``); before that
(the option check at pytest start-up) an argv is read by both tables, and only what both refuse is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal
from urllib.parse import urlsplit

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.sglang.flags import Flag, load_table
from pytest_sglang.sglang.tokens import ArgToken, RecordingParser, Rejected, add_recorded, align, run
from pytest_sglang.sglang.typos import Typo, check_flags

__all__ = ["GATEWAYS", "SECRET_DESTS", "RecordedGateway", "check_gateway_flags", "display_gateway_argv",
           "gateway_secrets", "gateway_values", "read_gateway_args", "register_gateway_secrets"]

Flavor = Literal["smg", "sglang-router"]

#: Gateway fields whose values carry a credential (found in the recorded help; see tests/sglang):
#: keys (``--api-key``, smg's ``TENANT_ID:KEY`` and ``id:name:role:key`` lists), the Oracle password and
#: connect descriptor (an EZConnect string may hold ``user/password@``), database URLs
#: (``postgres://user:password@``, ``redis://:password@``) and smg's mesh private key.
SECRET_DESTS = frozenset({"api_key", "tenant_api_key", "control_plane_api_keys", "oracle_password",
                          "oracle_connect_descriptor", "postgres_db_url", "redis_url", "mesh_tls_key"})


@dataclass(frozen=True)
class RecordedGateway:
    """One gateway release whose flags are recorded."""

    flavor: Flavor
    version: str
    table: str

    @property
    def flags(self) -> tuple[Flag, ...]:
        return load_table(self.table)

    @property
    def options(self) -> frozenset[str]:
        return frozenset(option for flag in self.flags for option in flag.options)

    def describe(self) -> str:
        return f"{self.flavor} {self.version}"


GATEWAYS: dict[Flavor, RecordedGateway] = {
    "smg": RecordedGateway("smg", "1.13.0", "smg_1_13_0_flags.txt"),
    "sglang-router": RecordedGateway("sglang-router", "0.3.2", "sglang_router_0_3_2_flags.txt"),
}


@cache
def _parser(flavor: Flavor) -> RecordingParser:
    parser = RecordingParser()
    group = parser.add_argument_group(flavor)
    for flag in GATEWAYS[flavor].flags:
        add_recorded(group, flag, dest=flag.dest, default=None, shown=True)
    return parser


@dataclass(frozen=True)
class GatewayArgs:
    """Gateway args as one gateway reads them: each token with the field it feeds, and the leftovers."""

    gateway: RecordedGateway
    tokens: tuple[ArgToken, ...]
    unknown: tuple[str, ...]


def read_gateway_args(argv: Sequence[str], flavor: Flavor) -> GatewayArgs:
    """Read ``argv`` with ``flavor``'s recorded parser; raises :class:`Rejected` for what it would refuse."""
    _, extras, uses = run(_parser(flavor), list(argv))
    tokens = align(argv, uses, extras) or tuple(ArgToken(text) for text in argv)
    return GatewayArgs(GATEWAYS[flavor], tokens, tuple(extras))


def gateway_values(argv: Sequence[str], dest: str, flavor: Flavor = "smg") -> list[str]:
    """Every value ``flavor`` reads for field ``dest`` (``api_key``), in argv order, in any spelling it accepts.

    ``--api-k K`` and ``--api-key=K`` both give ``["K"]``; an argv the gateway would refuse gives [].
    """
    try:
        tokens = read_gateway_args(argv, flavor).tokens
    except Rejected:
        return []
    return [t.value for t in tokens if t.dest == dest and t.value is not None]


# ---- secrets ----------------------------------------------------------------------------------------------
def _secret_options() -> tuple[str, ...]:
    return tuple(o for g in GATEWAYS.values() for f in g.flags if f.dest in SECRET_DESTS for o in f.options)


def _could_name_a_secret(text: str) -> bool:
    head = text.split("=", 1)[0].strip()
    return len(head) > 2 and head.startswith("--") and any(o.startswith(head) for o in _secret_options())


def _secret_positions(argv: Sequence[str], flavor: Flavor) -> set[int]:
    """Indexes of the tokens that carry a secret as ``flavor`` reads ``argv`` (cautiously if it would refuse it)."""
    try:
        tokens = read_gateway_args(argv, flavor).tokens
    except Rejected:
        tokens = tuple(ArgToken(text) for text in argv)
    out: set[int] = set()
    after_secret_flag = False
    for i, token in enumerate(tokens):
        if token.role in ("value", "inline") and token.dest in SECRET_DESTS:
            out.add(i)
        elif token.role == "unknown":  # not placed by the parser: an abbreviation of a secret flag is enough
            if after_secret_flag and not token.text.startswith("--"):
                out.add(i)
            elif _could_name_a_secret(token.text) and "=" in token.text:
                out.add(i)
        after_secret_flag = token.role == "unknown" and _could_name_a_secret(token.text) and "=" not in token.text
    return out


def _positions(argv: Sequence[str]) -> set[int]:
    return _secret_positions(argv, "smg") | _secret_positions(argv, "sglang-router")


def display_gateway_argv(argv: Sequence[str]) -> list[str]:
    """A gateway command line or its args, every credential masked as either gateway would read it."""
    hidden = _positions(argv)
    shown = []
    for i, text in enumerate(argv):
        if i not in hidden:
            shown.append(redaction.scrub(text))
        elif text.startswith("--") and "=" in text:
            shown.append(text.split("=", 1)[0] + "=" + redaction.MASK)
        else:
            shown.append(redaction.MASK)
    return shown


def _parts(value: str) -> list[str]:
    """A credential value and the key inside it: ``TENANT:KEY``, ``id:name:role:key``, ``scheme://u:P@h``."""
    parts = [value]
    if "://" in value:
        try:
            password = urlsplit(value).password
        except ValueError:
            password = None
        parts.append(password or "")
    elif ":" in value:
        parts.append(value.rsplit(":", 1)[1])
    if "/" in value and "@" in value and "://" not in value:  # Oracle EZConnect: user/password@host
        parts.append(value.split("@", 1)[0].split("/", 1)[-1])
    return [p for p in parts if p]


def gateway_secrets(argv: Sequence[str]) -> tuple[str, ...]:
    """Every credential in gateway args (whole values and the keys inside them), to register for scrubbing."""
    out: list[str] = []
    for i in sorted(_positions(argv)):
        text = argv[i]
        value = text.split("=", 1)[1] if text.startswith("--") and "=" in text else text
        out += _parts(value)
    return tuple(out)


def register_gateway_secrets(argv: Sequence[str]) -> None:
    """Register the credentials of gateway args, so that no writer shows them."""
    redaction.register(*gateway_secrets(argv))


# ---- typos ------------------------------------------------------------------------------------------------
def check_gateway_flags(argv: Sequence[str], *, source: str = "--sglang-gateway", flavor: Flavor | None = None,
                        installed_version: str | None = None) -> list[str]:
    """Refuse what the gateway would refuse, before any worker starts; return a line per flag it may not know.

    ``flavor`` None (the gateway is not resolved yet): refused only what both recorded gateways refuse.
    With ``flavor`` and the installed version equal to the recorded one, everything the recorded
    parser refuses (an unknown flag, a bad choice) is refused: that gateway would exit at once.
    """
    flavors: list[Flavor] = [flavor] if flavor is not None else list(GATEWAYS)
    problems: dict[str, list[str]] = {}  # problem -> the gateways that have it
    for name in flavors:
        gateway = GATEWAYS[name]
        try:
            others = check_flags(read_gateway_args(argv, name).unknown, gateway.options)
        except Rejected as exc:
            problems.setdefault(f"the gateway would reject them ({redaction.scrub(str(exc))})", []).append(
                gateway.describe())
            continue
        except Typo as exc:
            for typo in exc.typos:
                problems.setdefault(f"{typo.flag} is not a known flag, did you mean {typo.close[0]}?", []).append(
                    gateway.describe())
            continue
        if others and installed_version == gateway.version:
            problems.setdefault(f"{', '.join(o.flag for o in others)}: not a flag of the installed gateway",
                                []).append(gateway.describe())
            continue
        return [f"{o.flag} is not a flag of {gateway.describe()} (the recorded table): passed on unchanged, "
                "for a newer gateway that has it" for o in others]
    shown = " ".join(display_gateway_argv(argv))
    problem = "; ".join(f"{text} ({' and '.join(names)}, recorded)" for text, names in problems.items())
    raise ConfigError(source, shown, f"{problem}; checked before anything starts",
                      "correct the flag; smg launch --help (or python -m sglang_router.launch_router --help) "
                      "lists them")
