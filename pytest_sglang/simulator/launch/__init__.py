"""Start-up: what a launch is and what it prints before it serves.

The simulator's flags (cli), the start-up lines and phases, ranks and nodes, a launch's plan, launch-time
jitter, host allocation, the 0.5.23 payloads (server_info, model_info).

May import config, failures/, images/, scheduling/ and logs; never front/, disagg/, model/ or state.
"""
