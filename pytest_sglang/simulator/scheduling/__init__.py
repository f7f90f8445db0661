"""The engine: how requests are scheduled, cached and timed.

The scheduler, the request and its sink, the radix cache and the storage tier, speculation, hardware
profiles (timing), statistics, trace, Prometheus text.

May import the tokenizer and logs only: every other folder sits above it.
"""
