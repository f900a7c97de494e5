"""The decoder layers of a model config: how many, whether they are all alike, and the same
config at another depth (the depth extrapolation of `dryrun/depth.py`).

Only the text (language-model) layers are counted and truncated: a vision-language model's
`text_config`, else the config itself. A vision tower keeps its own depth.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from kuberl_runtime.engine.model_builder import VISION_TOWER_NAMES

LAYERS_KEY = "num_hidden_layers"
# Attributes that name a layer's position, not its kind: they differ between identical layers.
_POSITION_ATTRIBUTES = ("layer_idx", "layer_id", "layer_index", "layer_number")


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's config: a VL model's `text_config`, else the config itself."""
    return config.get("text_config") or config


def num_layers(config: dict[str, Any]) -> int | None:
    value = text_config(config).get(LAYERS_KEY)
    return int(value) if value is not None else None


def per_layer_lists(config: dict[str, Any]) -> dict[str, list[Any]]:
    """The text config's lists with one entry per decoder layer (`layer_types`, ...)."""
    layers = num_layers(config)
    return {
        key: value
        for key, value in text_config(config).items()
        if isinstance(value, list) and len(value) == layers
    }


def config_difference(config: dict[str, Any]) -> str | None:
    """Why the config's decoder layers are not all alike, or None when its per-layer lists say
    every layer is the same kind (hybrid or sliding-window `layer_types` differ)."""
    for key, values in per_layer_lists(config).items():
        kinds = sorted({repr(v) for v in values})
        if len(kinds) > 1:
            return f"the layers differ in {key} ({', '.join(kinds)})"
    return None


def at_depth(config: dict[str, Any], depth: int) -> dict[str, Any]:
    """The same config with `depth` text decoder layers: per-layer lists cut to `depth` entries
    (they are uniform: `config_difference`), `max_window_layers` clamped to it."""
    text = dict(text_config(config))
    lists = per_layer_lists(config)
    text[LAYERS_KEY] = depth
    for key, values in lists.items():
        text[key] = values[:depth]
    if isinstance(text.get("max_window_layers"), int):
        text["max_window_layers"] = min(text["max_window_layers"], depth)
    if config.get("text_config"):
        out = {**config, "text_config": text}
        if LAYERS_KEY in config:  # some VL configs repeat the text depth at the top level
            out[LAYERS_KEY] = depth
        return out
    return text


def decoder_layer_list(model: nn.Module, layers: int) -> nn.ModuleList | None:
    """The text model's decoder layers: the `...layers` list of `layers` blocks outside the
    vision tower."""
    for name, module in model.named_modules():
        parts = name.split(".")
        if any(part in VISION_TOWER_NAMES for part in parts):
            continue
        if isinstance(module, nn.ModuleList) and parts[-1] == "layers" and len(module) == layers:
            return module
    return None


def layer_signature(layer: nn.Module) -> tuple[Any, ...]:
    """What makes two decoder layers compute alike: module classes, parameter names, shapes and
    dtypes, and every plain attribute (a sliding window, an attention or MLP kind) but the ones
    naming the layer's position."""
    modules = []
    for name, module in layer.named_modules():
        attributes = sorted(
            (key, repr(value))
            for key, value in vars(module).items()
            if not key.startswith("_")
            and key not in _POSITION_ATTRIBUTES
            and isinstance(value, (bool, int, float, str, tuple, type(None)))
        )
        modules.append((name, type(module).__name__, tuple(attributes)))
    parameters = tuple(
        (name, tuple(p.shape), str(p.dtype), p.requires_grad)
        for name, p in layer.named_parameters()
    )
    return tuple(modules), parameters


def model_difference(model: nn.Module, layers: int) -> str | None:
    """Why the built model's decoder layers are not all alike (MoE every k layers, another
    attention kind), or None when every layer has the first one's signature."""
    found = decoder_layer_list(model, layers)
    if found is None:
        return f"no list of {layers} decoder layers found in {type(model).__name__}"
    first = layer_signature(found[0])
    for index, layer in enumerate(found):
        if layer_signature(layer) != first:
            return f"decoder layer {index} differs from layer 0 ({type(layer).__name__})"
    return None
