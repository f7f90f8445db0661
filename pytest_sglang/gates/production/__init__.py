"""What production does to a server: probes under load, soaks, speculation, storage restarts.

May import ``load`` and the top gates modules; never ``fleet``, ``facts`` or ``correctness``.
"""
