"""What can be known of a model before any rank starts: its ``config.json``.

Validation reads it where it already is on this machine: a local model directory (or a
``file://`` URL's), or a Hugging Face hub id's copy in the local hub cache. A remote URL
(``s3://``, ``gs://``, ...) and a hub id not yet downloaded are not read here; the runtime's
driver reads the first before any rank starts (``kuberl_runtime/trainer/start_checks.py``) and
the ranks' component build checks the second. ``ModelFacts`` is the part the start rules use
(``model_rules.py``): whether the model is vision-language and its attention heads.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kuberl_api.storage import is_url, scheme_of, strip_protocol

CONFIG_FILE = "config.json"
VL_MODEL_TYPES = frozenset({"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"})
"""Model types whose transformers config has a vision encoder even when config.json leaves
``vision_config`` out (their config class fills it in)."""


@dataclass(frozen=True)
class ModelFacts:
    source: str
    """Where config.json was read."""
    model_type: str
    vision: bool
    """A vision-language model: the runtime loads its processor and trains on image prompts."""
    num_attention_heads: int | None
    num_key_value_heads: int | None
    """The language model's heads (a VL model's ``text_config``), None when not stated."""


def model_facts(config: dict[str, Any], source: str) -> ModelFacts:
    """The facts the start rules need, from a parsed config.json."""
    model_type = str(config.get("model_type") or "")
    text = config.get("text_config") or config
    heads = text.get("num_attention_heads")
    return ModelFacts(
        source=source,
        model_type=model_type,
        vision=config.get("vision_config") is not None or model_type in VL_MODEL_TYPES,
        num_attention_heads=heads,
        num_key_value_heads=text.get("num_key_value_heads", heads),
    )


def local_model_facts(path: str) -> ModelFacts | None:
    """The model's facts when its config.json is on this machine, else None (not read yet)."""
    found = local_config_file(path)
    if found is None:
        return None
    try:
        config = json.loads(found.read_text())
    except (OSError, ValueError):
        return None  # unreadable here: the runtime reads it where it runs
    return model_facts(config, str(found)) if isinstance(config, dict) else None


def local_config_file(path: str) -> Path | None:
    """``path``'s config.json in a local directory, or its hub cache copy; None otherwise."""
    if not path:
        return None
    if is_url(path):
        if scheme_of(path) != "file":
            return None
        path = strip_protocol(path)
    local = Path(path).expanduser() / CONFIG_FILE
    if local.is_file():
        return local
    return hub_cached_config(path)


def hub_cached_config(repo_id: str) -> Path | None:
    """A hub id's config.json in the local Hugging Face cache (its ``main`` revision)."""
    parts = repo_id.split("/")
    if not 1 <= len(parts) <= 2 or not all(parts) or repo_id.startswith((".", "~")):
        return None
    repo = hub_cache_dir() / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / "main"
    if not ref.is_file():
        return None
    config = repo / "snapshots" / ref.read_text().strip() / CONFIG_FILE
    return config if config.is_file() else None


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps downloads (its own environment variables, in its order)."""
    env = os.environ
    explicit = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    home = env.get("HF_HOME") or os.path.join(xdg, "huggingface")
    return Path(home).expanduser() / "hub"


def check_heads(num_attention_heads: int, num_key_value_heads: int, sp_size: int) -> str | None:
    """Why Ulysses SP of `sp_size` cannot split these heads, or None. KV heads fewer than sp are
    replicated (verl's rule), which needs sp to be a multiple of them."""
    if num_attention_heads % sp_size:
        return f"num_attention_heads={num_attention_heads} is not divisible by it"
    if num_key_value_heads % sp_size and sp_size % num_key_value_heads:
        return f"num_key_value_heads={num_key_value_heads} neither divides nor is divisible by it"
    return None
