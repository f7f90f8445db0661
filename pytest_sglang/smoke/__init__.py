"""The smoke suite: a first look at an SGLang server with zero code, and a baseline for next time.

Run it against a server (or a launch, or the simulator)::

    pytest --pyargs pytest_sglang.smoke --sglang-url http://127.0.0.1:30000
    pytest --pyargs pytest_sglang.smoke --sglang-simulate

Five checks: readiness, identity, capacity, one short load and the API shape. Every floor comes from
the server's own figures (``/server_info``, and what the load measures one request at a time), never
from a number written here. The run's JSON report is the baseline for the next run: without
``--sglang-report`` it goes to ``sglang-smoke-baseline.json`` in the directory pytest was started
from (see docs/first-run.md).
"""
