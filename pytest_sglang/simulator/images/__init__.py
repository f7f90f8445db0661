"""Images and vision.

The image reader (decode, bounds, refusals), the multimodal preparation, the vision processor chosen by
the launch.

May import the tokenizer and pytest_sglang.sglang; nothing else of the simulator.
"""
