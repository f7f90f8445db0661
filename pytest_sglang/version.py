"""This package's version and the SGLang release it is tested against (bottom layer: anyone may read them)."""

__version__ = "0.1.0"

#: Tested SGLang release (schemas, simulator fidelity, default docker image).
SGLANG_VERSION = "0.5.23"
