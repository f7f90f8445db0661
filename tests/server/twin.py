"""A foreign SGLang twin as its own process: ``python twin.py PORT MODEL`` answers /health and a /server_info
that claims ``--port PORT --model-path MODEL`` (it prints ``listening`` once bound)."""

from __future__ import annotations

import sys

from fakehttp import fake_server, sglang_twin


def main() -> None:
    port, model = int(sys.argv[1]), sys.argv[2]
    with fake_server(sglang_twin(port, model), port=port):
        print("listening", flush=True)
        sys.stdin.read()  # until the test closes our stdin


if __name__ == "__main__":
    main()
