"""Validating an SFT config: the same steps as a PPO backend_config, against SFT's schema.

Where an SFT config sits (``sft_tree_of``, the one place that decides): a bare file whose top
level is verl's SFT tree (``model`` and no ``actor_rollout_ref``), the ``backend_config`` of a
ModelArts envelope with that shape (``backend_config/sft.py: looks_like_sft``), or an
RLTrainingJob's ``spec.sft_config`` (a manifest names it, as it names ``spec.roll_config``: the
CRD types ``backend_config`` as the PPO tree). Hydra ``_target_`` keys are dropped,
interpolations resolved by OmegaConf, nulls the schema cannot hold dropped, each key held
against its fate (``keys/sft.py``), then the schema; a manifest's placement follows its worker
pools. The result carries the effective ``SFTConfig``; ``plan/sft.py`` turns it into the plan.
"""

import posixpath
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from kuberl_api.backend_config.sft import SFTConfig, looks_like_sft
from kuberl_api.effective import VERL_DEFAULT_GPUS_PER_NODE, place_on_pools
from kuberl_api.job import RLTrainingJobSpec
from kuberl_api.keys import MESSAGE
from kuberl_api.keys.sft import check_sft_key_fates
from kuberl_api.platform import WorkerPool
from kuberl_api.storage import is_url, output_location
from kuberl_api.validation.deprecations import SFT_DEPRECATED_KEYS, check_deprecated_keys
from kuberl_api.validation.documents import Document, DocumentKind
from kuberl_api.validation.interpolation import resolve_interpolations
from kuberl_api.validation.nulls import drop_unset_in
from kuberl_api.validation.problems import Problem, join_path
from kuberl_api.validation.rules_placement import check_checkpoint_dir, check_pools
from kuberl_api.validation.rules_start import check_fsdp_size, check_lora_adapter
from kuberl_api.validation.rules_storage import check_sft_credentials, check_sft_urls
from kuberl_api.validation.rules_switches import HYDRA_TARGET, strip_hydra_targets
from kuberl_api.validation.schema_errors import problems_from_validation_error

SFT_CONFIG_KEY = "sft_config"
_OTHER_CONFIG_KEYS = ("backend_config", "roll_config")


@dataclass
class SFTValidation:
    config: SFTConfig | None = None
    """The effective SFT config; None when any problem is an error."""
    spec: RLTrainingJobSpec | None = None
    """A manifest's spec, its ``sft_config`` the effective config."""
    output: str | None = None
    """af_output_dir (a ModelArts envelope or a manifest)."""
    problems: list[Problem] = field(default_factory=list)
    not_honoured: list[str] = field(default_factory=list)


def validate_sft_tree(
    raw: dict[str, Any],
    prefix: str,
    *,
    allow_env: bool = False,
    pools: list[WorkerPool] | None = None,
) -> tuple[SFTConfig | None, list[Problem], list[str]]:
    """The effective SFT config (None on errors), every problem, and keys set without effect."""
    tree, has_targets = strip_hydra_targets(raw)
    resolved, problems = resolve_interpolations(tree, prefix, allow_env=allow_env)
    problems += check_deprecated_keys(resolved, prefix, SFT_DEPRECATED_KEYS)
    resolved = drop_unset_in(resolved, SFTConfig)
    keys = check_sft_key_fates(resolved)
    not_honoured = list(keys.not_honoured)
    if has_targets:
        not_honoured.append(f"{HYDRA_TARGET} (Hydra class names)")
    problems += [
        Problem(join_path(prefix, *r.key.split(".")), MESSAGE, r.fix, r.value) for r in keys.refused
    ]
    try:
        parsed = SFTConfig.model_validate(resolved)
    except ValidationError as err:
        return None, problems + problems_from_validation_error(err, SFTConfig, prefix), []
    _fill_placement(parsed, pools)
    problems += check_sft_urls(parsed, prefix)
    problems += _check_batches(parsed, prefix)
    problems += check_lora_adapter(parsed.model, join_path(prefix, "model"))
    world = (parsed.trainer.nnodes or 1) * (parsed.trainer.n_gpus_per_node or 1)
    problems += check_fsdp_size(parsed.engine.fsdp_size, world, join_path(prefix, "engine"))
    if any(p.is_error for p in problems):
        return None, problems, not_honoured
    return parsed, problems, not_honoured


def _fill_placement(cfg: SFTConfig, pools: list[WorkerPool] | None) -> None:
    """As for RL (``effective.py``): what the pools give, else one node of verl's default 8
    devices, unless written."""
    if pools:
        place_on_pools(cfg.trainer, pools)
    cfg.trainer.nnodes = cfg.trainer.nnodes or 1
    cfg.trainer.n_gpus_per_node = cfg.trainer.n_gpus_per_node or VERL_DEFAULT_GPUS_PER_NODE


def _check_batches(cfg: SFTConfig, prefix: str) -> list[Problem]:
    """The world splits into SP groups, and the global batch evenly over the data-parallel
    ranks (verl's rule; a rank's rows are its whole SP group's)."""
    trainer = cfg.trainer
    assert trainer.nnodes and trainer.n_gpus_per_node
    world = trainer.nnodes * trainer.n_gpus_per_node
    sp = cfg.engine.ulysses_sequence_parallel_size
    if world % sp:
        path = join_path(prefix, "engine", "ulysses_sequence_parallel_size")
        fix = "use a divisor of nnodes x n_gpus_per_node"
        return [Problem(path, f"world size {world} is not a multiple of {sp}", fix, sp)]
    batch, dp = cfg.data.train_batch_size, world // sp
    if batch % dp == 0:
        return []
    path = join_path(prefix, "data", "train_batch_size")
    fix = (
        f"use a multiple of the {dp} ranks that hold distinct rows (data parallelism: nnodes x "
        "n_gpus_per_node / engine.ulysses_sequence_parallel_size)"
    )
    return [Problem(path, "does not split evenly over the data-parallel ranks", fix, batch)]


def sft_tree_of(doc: Document) -> tuple[Any, str] | None:
    """The SFT config a document holds and its path, or None when it holds none."""
    if doc.kind is DocumentKind.SFT:
        return doc.body, doc.prefix
    if doc.kind is DocumentKind.MANIFEST and SFT_CONFIG_KEY in doc.body:
        return doc.body[SFT_CONFIG_KEY], join_path(doc.prefix, SFT_CONFIG_KEY)
    backend = doc.body.get("backend_config")
    if doc.kind in (DocumentKind.MODELARTS, DocumentKind.MANIFEST) and looks_like_sft(backend):
        return backend, join_path(doc.prefix, "backend_config")
    return None


def validate_sft_document(doc: Document, allow_env: bool) -> SFTValidation:
    found = sft_tree_of(doc)
    assert found is not None, "not an SFT document"
    tree, prefix = found
    if doc.kind is DocumentKind.MANIFEST:
        return _validate_manifest(doc, tree, prefix, allow_env)
    out = SFTValidation()
    if doc.kind is DocumentKind.MODELARTS:
        out.output = doc.body.get("af_output_dir")
        out.problems += _check_envelope(doc.body)
    cfg, tree_problems, out.not_honoured = validate_sft_tree(tree, prefix, allow_env=allow_env)
    out.problems += tree_problems
    if cfg is not None and out.output:
        _place_checkpoints(cfg, out.output)
    if not any(p.is_error for p in out.problems):
        out.config = cfg
    return out


def _validate_manifest(doc: Document, tree: Any, prefix: str, allow_env: bool) -> SFTValidation:
    """``spec.sft_config`` beside the platform part of the spec (pools, storage, run policy)."""
    out = SFTValidation()
    if prefix != join_path(doc.prefix, SFT_CONFIG_KEY):
        why = "an SFT config (top-level model, no actor_rollout_ref) goes under spec.sft_config"
        out.problems.append(Problem(prefix, why, "rename backend_config to sft_config"))
        return out
    others = [key for key in _OTHER_CONFIG_KEYS if key in doc.body]
    if others:
        why = "a spec holds one of backend_config, roll_config and sft_config"
        out.problems.append(Problem(prefix, why, f"remove {' and '.join(others)}"))
        return out
    if not isinstance(tree, dict):
        fix = "write verl's SFT config under it (data, model, optim, trainer, ...)"
        out.problems.append(Problem(prefix, "must be a mapping", fix, tree))
        return out
    platform = {k: v for k, v in doc.body.items() if k != SFT_CONFIG_KEY}
    spec = None
    try:
        spec = RLTrainingJobSpec.model_validate(platform)
    except ValidationError as err:
        out.problems += problems_from_validation_error(err, RLTrainingJobSpec, doc.prefix)
    pools = spec.worker_pools if spec else None
    cfg, tree_problems, out.not_honoured = validate_sft_tree(
        tree, prefix, allow_env=allow_env, pools=pools
    )
    out.problems += tree_problems
    if spec is not None and spec.engine_kwargs.vllm:
        where = join_path(doc.prefix, "engine_kwargs")
        out.problems.append(Problem(where, "not used by an SFT job (no rollout)", "remove it"))
    if spec is not None and cfg is not None:
        _place_checkpoints(cfg, spec.af_output_dir)
        spec.sft_config = cfg
        out.problems += check_checkpoint_dir(cfg, prefix, spec.af_output_dir)
        out.problems += check_pools(spec, doc.prefix)
        out.problems += check_sft_credentials(cfg, prefix, spec, doc.prefix)
    if not any(p.is_error for p in out.problems):
        out.config, out.spec, out.output = cfg, spec, spec.af_output_dir if spec else None
    return out


def _place_checkpoints(cfg: SFTConfig, af_output_dir: str) -> None:
    """Checkpoints under af_output_dir (``checkpoints/`` unless written), as for RL."""
    cfg.trainer.default_local_dir = posixpath.join(
        output_location(af_output_dir), cfg.trainer.default_local_dir or "checkpoints"
    )


def _check_envelope(body: dict[str, Any]) -> list[Problem]:
    out = body.get("af_output_dir")
    problems = []
    if not isinstance(out, str) or (not out.startswith("/") and not is_url(out)) or len(out) < 2:
        problems.append(
            Problem("af_output_dir", "must be an absolute path or a URL", "write /...", out)
        )
    for key in sorted(set(body) - {"af_output_dir", "backend_config"}):
        problems.append(Problem(key, "not used by an SFT job", "remove it", body[key]))
    return problems
