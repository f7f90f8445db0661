"""The HTTP front of the simulator.

The aiohttp app, its routes and handlers, the native and OpenAI bodies, responses, /metrics, /v1/loads,
weights and profiler routes.

May import every other folder of the simulator and its root modules (state, config, logs, tokenizer); only
server.py and __main__ import it.
"""
