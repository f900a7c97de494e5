"""Validate one document: schema, interpolations, deprecations and verl's cross-field rules.

Every problem is reported at once; the effective config is returned only when none is an error.
"""

from dataclasses import dataclass, field

from pydantic import BaseModel, ValidationError

from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.sft import SFTConfig
from kuberl_api.effective import build_effective_backend_config
from kuberl_api.job import ModelArtsConfig, RLTrainingJobSpec
from kuberl_api.keys import MESSAGE, KeyReport, check_key_fates
from kuberl_api.roll.document import point_at_roll_keys, translate_roll_document
from kuberl_api.validation.boolean_keys import normalise_boolean_keys
from kuberl_api.validation.deprecations import check_deprecated_keys, convert_renamed_keys
from kuberl_api.validation.documents import Document, DocumentKind
from kuberl_api.validation.interpolation import resolve_interpolations
from kuberl_api.validation.nulls import drop_unset
from kuberl_api.validation.problems import Problem, SpecInvalid, join_path
from kuberl_api.validation.rules_algorithm import check_algorithm
from kuberl_api.validation.rules_batch import check_batch_sizes
from kuberl_api.validation.rules_filter_groups import check_filter_groups
from kuberl_api.validation.rules_multi_turn import check_multi_turn
from kuberl_api.validation.rules_placement import (
    check_checkpoint_dir,
    check_parallelism,
    check_pools,
)
from kuberl_api.validation.rules_reward import check_reward
from kuberl_api.validation.rules_rollout_correction import check_rollout_correction
from kuberl_api.validation.rules_start import check_start
from kuberl_api.validation.rules_storage import check_storage
from kuberl_api.validation.rules_switches import check_switches, strip_hydra_targets
from kuberl_api.validation.schema_errors import problems_from_validation_error
from kuberl_api.validation.sft import sft_tree_of, validate_sft_document
from kuberl_api.validation.spellings import fold_spellings, point_at_written

_MODEL_BY_KIND: dict[DocumentKind, type[BaseModel]] = {
    DocumentKind.MANIFEST: RLTrainingJobSpec,
    DocumentKind.MODELARTS: ModelArtsConfig,
    DocumentKind.BACKEND_CONFIG: BackendConfig,
}


@dataclass
class ValidationResult:
    document: Document
    problems: list[Problem] = field(default_factory=list)
    spec: RLTrainingJobSpec | None = None
    """The parsed job spec, for manifests."""
    backend_config: BackendConfig | None = None
    """The effective backend_config (placement derived, deprecated keys converted)."""
    af_output_dir: str | None = None
    not_honoured: list[str] = field(default_factory=list)
    """Keys set to something other than verl's default that kuberl accepts without effect (see
    ``kuberl keys``)."""
    at_verl_default: list[str] = field(default_factory=list)
    """No-effect keys set to verl's own default (a config copied from verl's): nothing lost."""
    sft_config: SFTConfig | None = None
    """The effective SFT config, for an SFT document (``validation/sft.py``)."""

    @property
    def effective_config(self) -> BackendConfig | SFTConfig | None:
        """What the job trains from: the effective backend_config, or the SFT config."""
        return self.sft_config or self.backend_config

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.is_error]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if not p.is_error]

    @property
    def ok(self) -> bool:
        return not self.errors

    def raise_for_errors(self) -> None:
        if self.errors:
            raise SpecInvalid(self.errors)


def validate_document(
    doc: Document, *, allow_env: bool = False, read_models: bool = True
) -> ValidationResult:
    """Every problem of ``doc``; ``allow_env`` lets ``${oc.env:...}`` read this process's
    environment (the runtime on the job's own pods; never the operator). ``read_models`` lets
    the model rules read a model's config.json from this machine (``rules_model.py``); the
    operator turns it off: a job's paths are on the job's pods, and its verdict is then a
    function of the document alone."""
    result = ValidationResult(doc)
    if sft_tree_of(doc) is not None:
        sft = validate_sft_document(doc, allow_env)
        result.sft_config, result.spec, result.af_output_dir = sft.config, sft.spec, sft.output
        result.problems, result.not_honoured = sft.problems, sft.not_honoured
        return result
    translated = translate_roll_document(doc)
    if translated is None:
        _validate(doc, result, allow_env, read_models)
        return result
    # A ROLL config is checked as the verl config it becomes, problems pointing at ROLL's keys.
    result.problems += translated.problems
    if translated.document is not None:
        later = ValidationResult(translated.document)
        _validate(translated.document, later, allow_env, read_models)
        result.problems += point_at_roll_keys(
            later.problems, translated.backend_path, translated.origins
        )
        result.spec, result.af_output_dir = later.spec, later.af_output_dir
        result.not_honoured, result.at_verl_default = later.not_honoured, later.at_verl_default
        result.backend_config = later.backend_config if result.ok else None
    return result


def _validate(doc: Document, result: ValidationResult, allow_env: bool, read_models: bool) -> None:
    origins: dict[str, str] = {}
    bc = _checked(doc, result, allow_env, origins, read_models)
    # A problem at a key folded from another spelling names the key the user wrote.
    result.problems = point_at_written(result.problems, bc, origins)


def _checked(
    doc: Document, result: ValidationResult, allow_env: bool, origins: dict, read_models: bool
) -> str:
    is_bare = doc.kind is DocumentKind.BACKEND_CONFIG
    bc = doc.prefix if is_bare else join_path(doc.prefix, "backend_config")
    body = dict(doc.body)
    raw_backend = body if is_bare else body.get("backend_config")
    keys = KeyReport()
    if isinstance(raw_backend, dict):
        raw_backend, alias_problems = normalise_boolean_keys(raw_backend, bc)
        written = raw_backend
        raw_backend, _ = strip_hydra_targets(raw_backend)
        result.problems += alias_problems
        resolved, interpolation_problems = resolve_interpolations(
            raw_backend, bc, allow_env=allow_env
        )
        resolved = drop_unset(resolved)
        resolved, spelling_problems, folded = fold_spellings(resolved, bc)
        origins.update(folded)
        result.problems += interpolation_problems + spelling_problems
        result.problems += check_deprecated_keys(resolved, bc)
        resolved = convert_renamed_keys(resolved)
        body = resolved if is_bare else {**body, "backend_config": resolved}
        result.problems += check_switches(resolved, bc)
        keys = check_key_fates(resolved, written)
    if result.errors:
        return bc
    # Values kuberl refuses are reported beside schema errors, not instead of them.
    result.not_honoured, result.at_verl_default = keys.not_honoured, keys.at_verl_default
    result.problems += [
        Problem(join_path(bc, *r.key.split(".")), MESSAGE, r.fix, r.value) for r in keys.refused
    ]
    if doc.kind is DocumentKind.MANIFEST and "backend_config" not in body:
        fix = "add backend_config (verl PPO/GRPO), roll_config (ROLL) or sft_config (verl SFT)"
        result.problems.append(Problem(bc, "required key is missing", fix))
        return bc
    model = _MODEL_BY_KIND[doc.kind]
    try:
        parsed = model.model_validate(body)
    except ValidationError as err:
        result.problems += problems_from_validation_error(err, model, doc.prefix)
        return bc
    _check_semantics(result, parsed, bc, read_models)
    return bc


def _check_semantics(
    result: ValidationResult, parsed: BaseModel, bc: str, read_models: bool
) -> None:
    if isinstance(parsed, BackendConfig):
        effective = build_effective_backend_config(parsed)
    else:
        assert isinstance(parsed, RLTrainingJobSpec | ModelArtsConfig)
        result.af_output_dir = parsed.af_output_dir
        pools = parsed.worker_pools if isinstance(parsed, RLTrainingJobSpec) else None
        effective = build_effective_backend_config(
            parsed.backend_config,
            af_output_dir=parsed.af_output_dir,
            pools=pools,
            engine_kwargs=parsed.engine_kwargs,
        )
        result.problems += check_checkpoint_dir(effective, bc, parsed.af_output_dir)
    if isinstance(parsed, RLTrainingJobSpec):
        result.spec = parsed
        result.problems += check_pools(parsed, result.document.prefix)
    result.problems += check_batch_sizes(effective, bc)
    result.problems += check_parallelism(effective, bc)
    result.problems += check_algorithm(effective, bc)
    result.problems += check_filter_groups(effective, bc)
    result.problems += check_reward(effective, bc)
    result.problems += check_rollout_correction(effective, bc)
    result.problems += check_multi_turn(effective, bc)
    result.problems += check_start(effective, bc, read_models)
    spec = parsed if isinstance(parsed, RLTrainingJobSpec) else None
    output = None if isinstance(parsed, BackendConfig) else parsed.af_output_dir
    result.problems += check_storage(effective, bc, spec, result.document.prefix, output)
    if not result.errors:
        result.backend_config = effective
