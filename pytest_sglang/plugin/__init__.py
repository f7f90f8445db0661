"""The pytest layer: the only package that imports pytest.

Hooks, options, fixtures, markers, the server pool and the report session live here; everything else
in ``pytest_sglang`` is plain Python usable without pytest.
"""
