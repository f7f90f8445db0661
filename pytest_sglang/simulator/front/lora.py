"""LoRA adapters a request names, judged as SGLang 0.5.23 judges them (the simulator serves none).

OpenAI routes name one in ``model`` as ``<served model>:<adapter>`` (``serving_base._parse_model_parameter``;
a plain unknown model name is served anyway), the native ``/generate`` in ``lora_path``. Without
``--enable-lora`` (or ``--lora-paths``, which turns it on) any adapter is refused; with it, an adapter
that was never loaded is (``tokenizer_manager._validate_and_resolve_lora``). A loaded one is served as
the base model: the simulator has no adapter weights to tell them apart.
"""

from __future__ import annotations

from typing import Any

from pytest_sglang.sglang.args import LaunchArgs


def from_model(model: object, served_model_name: str) -> str | None:
    """The adapter named in an OpenAI ``model`` field, or None."""
    if not isinstance(model, str) or ":" not in model or model == served_model_name:
        return None
    rest = model[len(served_model_name) + 1:] if model.startswith(f"{served_model_name}:") else model.split(":", 1)[1]
    return rest.strip() or None


def from_native(body: dict[str, Any]) -> str | None:
    """The first adapter named in a native request's ``lora_path`` (a name, or one per prompt)."""
    value = body.get("lora_path")
    if isinstance(value, list):
        value = next((v for v in value if v), None)
    return value if isinstance(value, str) and value else None


def refusal(args: LaunchArgs, adapter: str | None) -> str | None:
    """SGLang's error message for a request naming ``adapter``; None when it would be served."""
    if adapter is None:
        return None
    flags = args.passthrough
    loaded = _loaded(flags.get("lora_paths"))
    if not (flags.get("enable_lora") or loaded):
        return (f"LoRA adapter '{adapter}' was requested, but LoRA is not enabled. Please launch the server "
                "with --enable-lora flag and preload adapters using --lora-paths or /load_lora_adapter endpoint.")
    if adapter not in loaded:
        names = ", ".join(repr(name) for name in loaded)
        return f"Got LoRA adapter that has never been loaded: {adapter}\nAll loaded adapters: dict_keys([{names}])."
    return None


def _loaded(lora_paths: object) -> list[str]:
    """Adapter names of ``--lora-paths`` (``name=path`` or a bare path, which is its own name)."""
    items = lora_paths if isinstance(lora_paths, (list, tuple)) else [lora_paths] if lora_paths else []
    return [str(item).split("=", 1)[0] for item in items]
