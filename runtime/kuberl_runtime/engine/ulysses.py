"""Ulysses sequence parallelism (DeepSpeed-Ulysses, as verl 0.9.1 runs it), composed around an
unchanged Hugging Face model.

The world is a (dp × sp) mesh of contiguous SP groups. Every rank of an SP group holds the same
rows; each runs the model on its 1/sp slice of every sequence (padded to a multiple of sp). The
attention function registered here (`ULYSSES_ATTENTION`, through transformers'
`AttentionInterface`) turns (all heads, local tokens) into (heads / sp, all tokens) with one
all-to-all, runs attention over the whole sequence, and turns the result back with a second
all-to-all. KV heads fewer than sp are replicated first, as verl does. Over the whole sequence:
packed rows run the kernel the model was built with when that kernel splits packed sequences at
their restarting position ids (flash-attn 2, torch's flash varlen on CUDA, the dry run's fake
varlen), given the gathered position ids, as verl runs flash-attn varlen after its all-to-all;
otherwise (SDPA or eager: CPU runs, padded rows) SDPA with a mask built from the gathered
position ids (packed) or the gathered attention mask (padded).
Everything outside attention is per-token, so the rest of the model runs on the slice as it is.
A vision-language model (Qwen2.5-VL) is split after its image merge instead: every rank of an SP
group runs the vision encoder on all the rows' images and embeds the whole sequences, and its
language model runs on this rank's slice of the merged embeddings (`split_after_image_merge`,
a forward pre-hook: the model's own code is unchanged).

Per-token outputs (log-probs, entropy, values) are gathered back to whole sequences with
`gather_sequence`, whose backward keeps the rank's own slice of the gradient times sp: FSDP
averages gradients over all dp·sp ranks, while the ranks of one SP group hold parts of one
replica's gradient that must add up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, AttentionInterface

from kuberl_api.plan.model_files import check_heads  # the rule validation applies too

logger = logging.getLogger(__name__)

ULYSSES_ATTENTION = "kuberl_ulysses"
DENSE_KERNELS = ("sdpa", "eager")  # kernels that see a packed row as one sequence


@dataclass(frozen=True)
class UlyssesGroup:
    """This rank's sequence-parallel group: `size` contiguous ranks, this one at `rank`."""

    group: dist.ProcessGroup | None
    size: int
    rank: int


NO_SP = UlyssesGroup(group=None, size=1, rank=0)


def build_ulysses_group(sp_size: int, device_type: str) -> UlyssesGroup:
    """The (dp, sp) device mesh over the world; SP groups are runs of `sp_size` contiguous ranks."""
    world = dist.get_world_size()
    if sp_size == 1:
        return NO_SP
    assert world % sp_size == 0, "validated: the world is a multiple of sp"
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device_type, (world // sp_size, sp_size), mesh_dim_names=("dp", "sp"))
    if dist.get_rank() == 0:
        logger.info(
            "Ulysses sequence parallelism: %d ranks = dp %d x sp %d (each sequence split %d ways)",
            world,
            world // sp_size,
            sp_size,
            sp_size,
        )
    return UlyssesGroup(
        group=mesh["sp"].get_group(), size=sp_size, rank=mesh["sp"].get_local_rank()
    )


def ulysses_model(
    sp: UlyssesGroup, key: str, build: Callable[..., nn.Module], *args: Any
) -> nn.Module:
    """`build(*args)`, running the Ulysses attention when sp > 1. Heads `sp` cannot split are an
    error naming `key`, the config key that set the degree, its value and the fix."""
    model = build(*args)
    if sp.size > 1:
        config = getattr(model.config, "text_config", model.config)  # VL: the language model's
        why = check_heads(config.num_attention_heads, config.num_key_value_heads, sp.size)
        if why:
            raise ValueError(
                f"{key}={sp.size}: {why}; use a divisor of the model's attention heads"
            )
        use_ulysses_attention(model)
    return model


def use_ulysses_attention(model: nn.Module) -> None:
    """Register the Ulysses attention function and make `model` (all its sub-models) use it.

    A model built with a varlen kernel keeps it for its packed rows, under a name of its own
    (no "flash" in it: transformers would take the name for a flash-attn request).
    A vision-language model: only its language model runs the Ulysses attention (the vision
    encoder keeps its kernel and runs whole images), and it is split after the image merge
    (`split_after_image_merge`)."""
    inner = model.config.get_text_config()._attn_implementation
    if inner in DENSE_KERNELS:
        name, packed_kernel = ULYSSES_ATTENTION, None
    else:
        name, packed_kernel = f"{ULYSSES_ATTENTION}_over_{inner.replace('flash', 'fa')}", inner
    AttentionInterface.register(name, partial(ulysses_attention, packed_kernel=packed_kernel))
    if not is_vision_language(model):
        model.set_attn_implementation(name)
        return
    model.set_attn_implementation({"": name, "text_config": name})
    model.get_decoder().register_forward_pre_hook(split_after_image_merge, with_kwargs=True)


# ---- vision-language models ---------------------------------------------------------------------

WHOLE_SEQUENCE = "ulysses_whole_sequence"
"""Forward keyword: the inputs are whole (padded) sequences, split after the image merge."""


def is_vision_language(model: nn.Module) -> bool:
    """A model with a vision encoder feeding a language model (Qwen2.5-VL)."""
    return "vision_config" in model.config.sub_configs


def split_after_image_merge(
    module: nn.Module, args: tuple, kwargs: dict[str, object]
) -> tuple[tuple, dict[str, object]] | None:
    """Forward pre-hook of a VL model's language model (registered by `use_ulysses_attention`).

    Called with `ulysses_whole_sequence=True`, the VL model has embedded the whole (padded)
    sequences and merged every image's features in at its image tokens, and the vision encoder
    has run on whole images; this rank's language model then runs on its slice of the merged
    embeddings and of the positions (mrope: (3 or 4, rows, S)), as a text model runs on its
    slice of the ids. The embeddings' gradient is this rank's slice only: the vision encoder's
    gradients add up over the SP group like every other weight's (module doc).

    Without grad (log-probs), the slice is taken of the embeddings detached: gradient
    checkpointing marks them as requiring grad (transformers' `enable_input_require_grads`), and
    a view of such a tensor taken without grad requires grad with no grad function, which
    autograd hooks on the language model's inputs cannot follow (torch's module tracker, under
    the dry run's memory tracker and FLOP counter: "Expected gradient function to be set")."""
    if not kwargs.pop(WHOLE_SEQUENCE, False):
        return None
    embeds = kwargs["inputs_embeds"]
    if not torch.is_grad_enabled():
        embeds = embeds.detach()
    span = local_span(embeds.shape[1], kwargs["ulysses_group"])
    kwargs["inputs_embeds"] = embeds[:, span]
    kwargs["position_ids"] = kwargs["position_ids"][..., span]
    return args, kwargs


# ---- attention ----------------------------------------------------------------------------------


def _attention_mask(position_ids: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
    """(rows, 1, S, S) bool from the whole sequence's positions (and, padded, its valid tokens)."""
    length = position_ids.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool, device=position_ids.device).tril()
    if key_mask is None:
        # A packed row restarts its positions at every sequence (as transformers detects).
        first = position_ids[:, :1] - 1
        segment = (torch.diff(position_ids, prepend=first, dim=-1) != 1).cumsum(-1)
        allowed = causal & (segment[:, :, None] == segment[:, None, :])
    else:
        # Every query also sees itself: padding queries get a finite (unused) output.
        diagonal = torch.eye(length, dtype=torch.bool, device=position_ids.device)
        allowed = (causal & key_mask[:, None, :]) | diagonal
    return allowed[:, None]


def ulysses_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    *,
    position_ids: torch.Tensor,
    ulysses_group: UlyssesGroup,
    ulysses_key_mask: torch.Tensor | None = None,
    packed_kernel: str | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """(rows, heads, S/sp, D) in, (rows, S/sp, heads, D) out, attention over the whole sequence.

    The model passes its forward's keyword arguments down to here: `position_ids` (this rank's
    slice), `ulysses_group` and, for a padded batch, `ulysses_key_mask` (this rank's slice of the
    attention mask); the whole-sequence ones are gathered, as gradient-checkpointing recomputation
    needs them too. `packed_kernel`: the varlen kernel packed rows run over the whole sequence.
    """
    group = ulysses_group
    if key.shape[1] % group.size:  # fewer KV heads than sp: replicate them (verl's rule)
        key = key.repeat_interleave(group.size // key.shape[1], dim=1)
        value = value.repeat_interleave(group.size // value.shape[1], dim=1)
    # heads scattered, sequence gathered: (rows, heads/sp, S, D)
    q, k, v = (all_to_all(t, group, scatter_dim=1, gather_dim=2) for t in (query, key, value))
    positions = _gather(position_ids.expand(query.shape[0], -1), group)
    if packed_kernel is not None and ulysses_key_mask is None:
        # (rows, S, heads/sp, D); varlen kernels take grouped KV heads as they are
        kernel = ALL_ATTENTION_FUNCTIONS[packed_kernel]
        out = kernel(module, q, k, v, None, dropout, scaling, position_ids=positions)[0]
    else:
        if k.shape[1] != q.shape[1]:
            k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
            v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
        key_mask = None if ulysses_key_mask is None else _gather(ulysses_key_mask, group).bool()
        mask = _attention_mask(positions, key_mask)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout, scale=scaling
        ).transpose(1, 2)
    # sequence scattered, heads gathered: (rows, S/sp, heads, D)
    return all_to_all(out, group, scatter_dim=1, gather_dim=2), None


def _gather(local: torch.Tensor, group: UlyssesGroup) -> torch.Tensor:
    """(rows, S/sp) → (rows, S), no gradient."""
    parts = [torch.empty_like(local) for _ in range(group.size)]
    dist.all_gather(parts, local.contiguous(), group=group.group)
    return torch.cat(parts, dim=1)


# ---- collectives with autograd ------------------------------------------------------------------


class _AllToAll(torch.autograd.Function):
    """Split `x` into sp chunks along `scatter_dim`, send chunk j to rank j, and concatenate the
    chunks received (in rank order) along `gather_dim`. Backward is the inverse exchange."""

    @staticmethod
    def forward(ctx, x, group: UlyssesGroup, scatter_dim: int, gather_dim: int):  # type: ignore[override]
        ctx.args = (group, scatter_dim, gather_dim)
        return _exchange(x, group, scatter_dim, gather_dim)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        group, scatter_dim, gather_dim = ctx.args
        return _exchange(grad, group, gather_dim, scatter_dim), None, None, None


def _exchange(x: torch.Tensor, group: UlyssesGroup, scatter_dim: int, gather_dim: int):
    send = torch.stack(x.chunk(group.size, dim=scatter_dim)).contiguous()
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send, group=group.group)
    return torch.cat(received.unbind(0), dim=gather_dim)


def all_to_all(x: torch.Tensor, group: UlyssesGroup, *, scatter_dim: int, gather_dim: int):
    return _AllToAll.apply(x, group, scatter_dim, gather_dim)


class _GatherSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group: UlyssesGroup):  # type: ignore[override]
        ctx.group = group
        parts = [torch.empty_like(x) for _ in range(group.size)]
        dist.all_gather(parts, x.contiguous(), group=group.group)
        return torch.cat(parts, dim=1)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        group = ctx.group
        mine = grad.chunk(group.size, dim=1)[group.rank]
        return mine * group.size, None


def gather_sequence(local: torch.Tensor, group: UlyssesGroup) -> torch.Tensor:
    """(rows, S/sp, ...) slices of the SP group → (rows, S, ...) on every rank (see module doc)."""
    return _GatherSequence.apply(local, group)


# ---- slicing ------------------------------------------------------------------------------------


def padded_length(length: int, group: UlyssesGroup) -> int:
    return -(-length // group.size) * group.size


def pad_sequence(x: torch.Tensor, length: int, value: int | bool = 0) -> torch.Tensor:
    """(rows, S) padded on the right to `length`."""
    return F.pad(x, (0, length - x.shape[1]), value=value)


def local_span(length: int, group: UlyssesGroup) -> slice:
    """This rank's slice of a (padded) sequence of `length` tokens."""
    part = length // group.size
    return slice(group.rank * part, (group.rank + 1) * part)
