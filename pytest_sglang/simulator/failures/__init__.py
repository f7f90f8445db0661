"""Injected faults (--fault).

Their kinds and parsing; the production, registration and PD faults.

May import scheduling/ (the storage tier's fault kinds) and nothing else of the simulator.
"""
