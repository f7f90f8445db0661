"""What a load sends: prompts per dataset, request bodies per API, the prompt tokens the server counted.

May import ``shape``, ``workloads`` and ``measure``; never ``client``, ``run``, ``ray`` or ``soak``.
"""
