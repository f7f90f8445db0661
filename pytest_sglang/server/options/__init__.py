"""The runners' option leaves: Docker and Ray settings parsed and checked without their SDKs.

What lives here: pure parsers and dataclasses (``docker``: sizes, volumes, GPU requests, the default
image; ``ray``: :class:`RayOptions`, addresses, strategies). They may import only ``pytest_sglang.errors``,
``defaults`` and ``redaction``: ``server.config`` and the runners under ``server/docker`` and
``server/ray`` import them, never the other way round (no circle inside the server).
"""
