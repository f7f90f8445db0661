"""Launch and gateway args read as their programs read them: typos and quoted groups refused.

A leaf of the plugin: the option parsers (``plugin/values.py``), the header and the A/B launches use it,
and it imports nothing of the plugin (import-linter holds the plugin acyclic).
"""

from __future__ import annotations

from pytest_sglang.errors import ConfigError

__all__ = ["check_gateway", "check_launch", "refuse_quoted_flags"]


def refuse_quoted_flags(argv: list[str]) -> None:
    """Refuse one argument holding a flag and more (``"--model-path M"``): quotes in an ini value did that.

    ``sglang_launch = "--model-path M"`` is one argument after shlex-splitting, which SGLang reads as an
    unknown flag named ``--model-path M``. A flag's name never holds a space (its ``=value`` may).
    """
    for arg in argv:
        if arg.startswith("--") and any(c.isspace() for c in arg.split("=", 1)[0]):
            raise ConfigError("", arg, f"{arg!r} is one argument (the quotes around it group its words), so its "
                              "program would read it as one unknown flag",
                              "drop the quotes around the whole value (write sglang_launch = --model-path M in an "
                              "ini file); quote only a value that holds spaces, e.g. --chat-template 'a b'")


def check_launch(argv: list[str]) -> list[str]:
    """Launch args as given to any runner (process, docker, simulator): read as SGLang reads them, typos refused.

    Returns the lines about flags the recorded 0.5.23 table does not know (a newer SGLang), for the header.
    """
    from pytest_sglang.sglang.args import check_launch_flags, option_strings, parse_launch_args
    from pytest_sglang.simulator.launch.cli import build_parser

    refuse_quoted_flags(argv)
    # The simulator runner takes its own --sim-* flags besides SGLang's.
    return check_launch_flags(parse_launch_args(argv), also_known=option_strings(build_parser()))


def check_gateway(argv: list[str]) -> list[str]:
    """Gateway args: credentials registered for masking, typos refused (either recorded gateway)."""
    from pytest_sglang.sglang.gateway_args import check_gateway_flags, register_gateway_secrets

    register_gateway_secrets(argv)
    refuse_quoted_flags(argv)
    return check_gateway_flags(argv)
