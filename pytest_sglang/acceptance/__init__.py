"""The acceptance suite: ready-made correctness checks of an SGLang server, with zero code.

Run it against a server (or a launch, or the simulator)::

    pytest --pyargs pytest_sglang.acceptance --sglang-url http://127.0.0.1:30000
    pytest --pyargs pytest_sglang.acceptance --sglang-simulate -k "usage or tool_calls"

One test per check with a stable id (``test_usage[chat-stream]``). A check the server cannot take
(no ``--tool-call-parser``, no ``--reasoning-parser``, no grammar backend, no ``--enable-metrics``)
is skipped with that reason. The checks themselves live in :mod:`pytest_sglang.correctness`.
"""
