"""Measurements of a load: per-request records, bench_serving's statistics, intervals, launch noise.

Plain Python, no I/O: may import only each other and the layers below the load generator.
"""
