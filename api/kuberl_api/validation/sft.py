"""Validating an SFT config: the same steps as a PPO backend_config, against SFT's schema.

Where an SFT config sits: a bare file whose top level is verl's SFT tree (``model`` and no
``actor_rollout_ref``), or the ``backend_config`` of a ModelArts envelope with that shape
(``backend_config/sft.py: looks_like_sft``). Hydra ``_target_`` keys are dropped,
interpolations resolved by OmegaConf, nulls the schema cannot hold dropped, each key held
against its fate (``keys/sft.py``), then the schema. The result carries the effective
``SFTConfig``; ``plan/sft.py`` turns it into the run's plan.
"""

import posixpath
from typing import Any

from pydantic import ValidationError

from kuberl_api.backend_config.sft import SFTConfig, looks_like_sft
from kuberl_api.effective import VERL_DEFAULT_GPUS_PER_NODE
from kuberl_api.keys import MESSAGE
from kuberl_api.keys.sft import check_sft_key_fates
from kuberl_api.validation.documents import Document, DocumentKind
from kuberl_api.validation.interpolation import resolve_interpolations
from kuberl_api.validation.nulls import drop_unset_in
from kuberl_api.validation.problems import Problem, join_path
from kuberl_api.validation.rules_switches import HYDRA_TARGET, strip_hydra_targets
from kuberl_api.validation.schema_errors import problems_from_validation_error


def validate_sft_tree(
    raw: dict[str, Any], prefix: str, *, allow_env: bool = False
) -> tuple[SFTConfig | None, list[Problem], list[str]]:
    """The effective SFT config (None on errors), every problem, and keys set without effect."""
    tree, has_targets = strip_hydra_targets(raw)
    resolved, problems = resolve_interpolations(tree, prefix, allow_env=allow_env)
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
    _fill_placement(parsed)
    problems += _check_batches(parsed, prefix)
    if any(p.is_error for p in problems):
        return None, problems, not_honoured
    return parsed, problems, not_honoured


def _fill_placement(cfg: SFTConfig) -> None:
    """As for RL (``effective.py``): one node of verl's default 8 devices unless written."""
    cfg.trainer.nnodes = cfg.trainer.nnodes or 1
    cfg.trainer.n_gpus_per_node = cfg.trainer.n_gpus_per_node or VERL_DEFAULT_GPUS_PER_NODE


def _check_batches(cfg: SFTConfig, prefix: str) -> list[Problem]:
    """verl's rule: the global batch splits evenly over the data-parallel ranks."""
    trainer = cfg.trainer
    assert trainer.nnodes and trainer.n_gpus_per_node
    world = trainer.nnodes * trainer.n_gpus_per_node
    batch = cfg.data.train_batch_size
    if batch % world == 0:
        return []
    path = join_path(prefix, "data", "train_batch_size")
    fix = f"use a multiple of the {world} ranks (nnodes x n_gpus_per_node)"
    return [Problem(path, "does not split evenly over the ranks", fix, batch)]


def sft_tree_of(doc: Document) -> tuple[dict[str, Any], str] | None:
    """The SFT config a document holds and its path, or None when it holds none."""
    if doc.kind is DocumentKind.SFT:
        return doc.body, doc.prefix
    backend = doc.body.get("backend_config")
    if doc.kind in (DocumentKind.MODELARTS, DocumentKind.MANIFEST) and looks_like_sft(backend):
        return backend, join_path(doc.prefix, "backend_config")
    return None


def validate_sft_document(
    doc: Document, allow_env: bool
) -> tuple[SFTConfig | None, str | None, list[Problem], list[str]]:
    """(effective config, af_output_dir, problems, keys without effect) of an SFT document."""
    found = sft_tree_of(doc)
    assert found is not None, "not an SFT document"
    tree, prefix = found
    if doc.kind is DocumentKind.MANIFEST:
        problem = Problem(
            prefix,
            "an SFT config cannot run as an RLTrainingJob yet",
            "run it with `kuberl train FILE` (a bare SFT config or a ModelArts envelope)",
        )
        return None, None, [problem], []
    problems: list[Problem] = []
    af_output_dir = doc.body.get("af_output_dir") if doc.kind is DocumentKind.MODELARTS else None
    if doc.kind is DocumentKind.MODELARTS:
        problems += _check_envelope(doc.body)
    cfg, tree_problems, not_honoured = validate_sft_tree(tree, prefix, allow_env=allow_env)
    problems += tree_problems
    if cfg is not None and af_output_dir:
        cfg.trainer.default_local_dir = posixpath.join(
            af_output_dir, cfg.trainer.default_local_dir or "checkpoints"
        )
    if any(p.is_error for p in problems):
        cfg = None
    return cfg, af_output_dir, problems, not_honoured


def _check_envelope(body: dict[str, Any]) -> list[Problem]:
    out = body.get("af_output_dir")
    problems = []
    if not isinstance(out, str) or not out.startswith("/") or len(out) < 2:
        problems.append(Problem("af_output_dir", "must be an absolute path", "write /...", out))
    for key in sorted(set(body) - {"af_output_dir", "backend_config"}):
        problems.append(Problem(key, "not used by an SFT job", "remove it", body[key]))
    return problems
