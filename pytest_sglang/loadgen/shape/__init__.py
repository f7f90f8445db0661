"""What load to generate: :class:`~.spec.LoadSpec` and the requests a cancellation storm cancels.

May import ``workloads`` (the dataset forms it checks), ``pytest_sglang.errors`` and below; nothing else of
the load generator.
"""
