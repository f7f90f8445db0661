"""A whole load: the asyncio engine, client processes, trace replay, multi-turn sessions, the result.

May import ``client`` and everything below it; never ``ray`` or ``soak``.
"""
