"""What the simulated model writes.

Answers, arithmetic, grammars (JSON schema, regex, EBNF), tool calls, reasoning, logprobs, the parsers a
launch serves, and the token streams.

May import state, config, failures/, images/, scheduling/, tokenizer; never front/, disagg/ or launch/.
"""
