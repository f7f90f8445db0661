"""Dataset forms and their data: traces, image sets, multi-turn shapes, prefix-reuse workloads.

Plain parsing and generation, no LoadSpec: may import only each other and the layers below the load
generator (``errors``, ``images``, ``redaction``...).
"""
