"""The weight stream into the vLLM engine: LoRA merged into the base, the tied head added,
tensors cast to the rollout dtype a bucket at a time."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

TIED_HEAD = "lm_head.weight"


def with_tied_head(
    named_tensors: Iterable[tuple[str, torch.Tensor]],
) -> Iterator[tuple[str, torch.Tensor]]:
    """The stream, plus `lm_head.weight` from the input embeddings when the sender left it out
    (HF `named_parameters()` lists a tied weight once; vLLM's CPU head is a separate copy)."""
    sent_head = False
    embedding = None
    for name, tensor in named_tensors:
        sent_head = sent_head or name == TIED_HEAD
        if name.endswith("embed_tokens.weight") and "visual" not in name:
            embedding = tensor
        yield name, tensor
    if not sent_head and embedding is not None:
        yield TIED_HEAD, embedding


def merge_lora(
    named_tensors: Iterable[tuple[str, torch.Tensor]], scaling: float
) -> Iterator[tuple[str, torch.Tensor]]:
    """PEFT state-dict entries -> plain HF names with W = W_base + scaling * B @ A.

    A module's `base_layer.weight`, `lora_A.*.weight` and `lora_B.*.weight` arrive next to each
    other (module order); only one module's tensors are held at a time.
    """
    pending: dict[str, dict[str, torch.Tensor]] = {}
    for name, tensor in named_tensors:
        name = name.removeprefix("base_model.model.")
        if ".base_layer." in name and not name.endswith(".weight"):
            yield name.replace(".base_layer.", "."), tensor  # bias: LoRA leaves it alone
            continue
        part = _lora_part(name)
        if part is None:
            yield name, tensor
            continue
        module, role = part
        parts = pending.setdefault(module, {})
        parts[role] = tensor
        if parts.keys() == {"base", "A", "B"}:
            del pending[module]
            delta = (parts["B"].float() @ parts["A"].float()) * scaling
            yield f"{module}.weight", (parts["base"].float() + delta).to(parts["base"].dtype)
    assert not pending, f"LoRA modules without all of base/A/B: {sorted(pending)}"


def _lora_part(name: str) -> tuple[str, str] | None:
    for marker, role in ((".base_layer.", "base"), (".lora_A.", "A"), (".lora_B.", "B")):
        if marker in name:
            return name.split(marker)[0], role
    return None


def buckets(
    named_tensors: Iterable[tuple[str, torch.Tensor]],
    bucket_bytes: int,
    dtype: torch.dtype,
    device: torch.device,
) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """Groups of tensors (cast, on `device`) of at most `bucket_bytes`; a bigger one goes alone."""
    bucket: list[tuple[str, torch.Tensor]] = []
    size = 0
    for name, tensor in named_tensors:
        cast = tensor.detach().to(
            device=device, dtype=dtype if tensor.is_floating_point() else None
        )
        nbytes = cast.numel() * cast.element_size()
        if bucket and size + nbytes > bucket_bytes:
            yield bucket
            bucket, size = [], 0
        bucket.append((name, cast))
        size += nbytes
    if bucket:
        yield bucket
