"""One request on the wire (HTTP, SSE stream readers, receive clock) and the server read during a load.

May import ``prompts``, ``shape``, ``workloads`` and ``measure``; never ``run``, ``ray`` or ``soak``.
"""
