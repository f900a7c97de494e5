"""verl's other spellings of keys kuberl reads, folded into kuberl's spelling before the schema.

* ``reward.*``: verl's reward tree since v0.7.1 (the current spelling in verl 0.9.1) beside the
  older ``reward_model.*``, ``custom_reward_function.*`` and ``sandbox_fusion.*``. verl 0.9.1
  moves the older keys into the new tree, key for key (``REWARD_SPELLINGS``); kuberl folds the
  new keys into the older ones, which its schema and plan read. A new-spelling key at verl's
  default asks for nothing (verl's generated config writes the whole tree); one set to anything
  else while its older spelling holds another value is an error naming both keys (verl would
  silently let the older one win).
* ``trainer.logger: tracking``: verl 0.9.1's deprecated name for ``wandb`` (its tracker starts
  wandb for either name); a warning, and the logger list says ``wandb``.
* ``reward_model.model.fsdp_config.min_num_params``: verl's docs and its reward model worker up to
  v0.4 read the wrap policy from the reward model's ``fsdp_config`` itself; it is
  ``wrap_policy.min_num_params`` of that ``fsdp_config`` (same fate).
* ``actor_rollout_ref.actor.policy_loss.tau_pos``/``tau_neg``: verl v0.9.0's SAPO examples add
  SAPO's gate temperatures under ``policy_loss`` (``+...policy_loss.tau_pos``), where verl 0.9.1's
  PolicyLossConfig has no such field; its SAPO loss reads ``actor.tau_pos``/``tau_neg``. They
  are that key (a warning; both spellings set differently is an error).
* ``<owner>.fsdp_config.ulysses_sequence_parallel_size`` (actor, ref, critic's model): verl 0.9's
  own spelling of the Ulysses degree (its engine reads it; the owner-level key is deprecated and,
  when above 1, overwrites it). It is the owner-level key kuberl reads when that one is 1 or
  unset; both above 1 and different is an error (verl would silently take the owner's).
* ``actor_rollout_ref.rollout.cudagraph_capture_sizes``: verl's vLLM server passes it as vLLM's
  ``compilation_config.cudagraph_capture_sizes``; it is that key of ``engine_kwargs.vllm`` (the
  rest of a compilation_config written there, a mapping or a JSON string, is kept; the rollout
  key wins for the sizes, as in verl).

``fold_spellings`` returns where each folded key came from, so problems found later on the
folded key name the key the user wrote (``point_at_written``).
"""

import copy
import json
from dataclasses import replace
from typing import Any

from kuberl_api.keys.verl_defaults import verl_defaults
from kuberl_api.validation.documents import ABSENT, lookup_dotted, same_value, set_dotted
from kuberl_api.validation.problems import Problem, Severity, join_path

# (key under reward.*, the older spelling kuberl reads); the longest matching prefix wins.
REWARD_SPELLINGS: list[tuple[str, str]] = [
    ("num_workers", "reward_model.num_workers"),
    ("reward_manager.name", "reward_model.reward_manager"),
    ("reward_manager.source", "reward_model.reward_loop_source"),
    ("reward_manager.module.path", "reward_model.reward_loop_module_path"),
    ("reward_manager.module.name", "reward_model.reward_loop_class_name"),
    ("custom_reward_function", "custom_reward_function"),
    ("reward_model.model_path", "reward_model.model.path"),
    ("reward_model.enable", "reward_model.enable"),
    ("reward_model.enable_resource_pool", "reward_model.enable_resource_pool"),
    ("reward_model.n_gpus_per_node", "reward_model.n_gpus_per_node"),
    ("reward_model.nnodes", "reward_model.nnodes"),
    ("reward_model.rollout", "reward_model.rollout"),
    ("reward_kwargs", "reward_model.reward_kwargs"),
    ("sandbox_fusion", "sandbox_fusion"),
]
TRACKING, WANDB = "tracking", "wandb"
SP_KEY = "ulysses_sequence_parallel_size"
ROLLOUT, CUDAGRAPH = "actor_rollout_ref.rollout", "cudagraph_capture_sizes"
# (the engine's fsdp_config, the owner whose deprecated SP key kuberl reads)
ENGINE_SP: list[tuple[str, str]] = [
    ("actor_rollout_ref.actor.fsdp_config", "actor_rollout_ref.actor"),
    ("actor_rollout_ref.ref.fsdp_config", "actor_rollout_ref.ref"),
    ("critic.model.fsdp_config", "critic"),
]
RM_FSDP = "reward_model.model.fsdp_config"
# (a key's other spelling, the key kuberl reads, what the warning says)
MOVED: list[tuple[str, str, str]] = [
    (
        RM_FSDP + ".min_num_params",
        RM_FSDP + ".wrap_policy.min_num_params",
        "verl's docs write it here; write fsdp_config.wrap_policy.min_num_params instead",
    ),
    *[
        (
            f"actor_rollout_ref.actor.policy_loss.{tau}",
            f"actor_rollout_ref.actor.{tau}",
            f"verl's SAPO examples write it here, but verl 0.9.1 reads actor.{tau}; write that",
        )
        for tau in ("tau_pos", "tau_neg")
    ],
]


def fold_spellings(tree: dict, bc: str) -> tuple[dict, list[Problem], dict[str, str]]:
    """A copy of ``tree`` in kuberl's spelling, the problems found, and folded key -> the key
    the user wrote (dotted, relative to the backend_config)."""
    out = copy.deepcopy(tree)
    problems: list[Problem] = []
    origins: dict[str, str] = {}
    _fold_reward_tree(out, bc, problems, origins)
    problems += _fold_tracking(out, bc)
    for flat, nested, hint in MOVED:
        _fold_moved(out, bc, (flat, nested, hint), problems, origins)
    for engine, owner in ENGINE_SP:
        _fold_engine_sp(out, bc, (engine, owner), problems, origins)
    problems += _fold_cudagraph_sizes(out, bc, origins)
    return out, problems, origins


def point_at_written(problems: list[Problem], bc: str, origins: dict[str, str]) -> list[Problem]:
    """A problem at a folded key is reported at the key the user wrote."""
    if not origins:
        return problems
    out = []
    for problem in problems:
        key = problem.path.removeprefix(bc).lstrip(".") if bc else problem.path
        folded = [(k, o) for k, o in origins.items() if key == k or key.startswith(k + ".")]
        if not folded:
            out.append(problem)
            continue
        k, origin = folded[0]
        path = join_path(bc, *(origin + key[len(k) :]).split("."))
        out.append(replace(problem, path=path, message=f"{problem.message} (read as {key})"))
    return out


def _fold_reward_tree(
    tree: dict, bc: str, problems: list[Problem], origins: dict[str, str]
) -> None:
    reward = tree.pop("reward", None)
    if not isinstance(reward, dict):
        if reward is not None:
            tree["reward"] = reward  # not a mapping: the schema reports it
        return
    defaults = verl_defaults().values.get("reward", {})
    for key, value in _leaves(reward):
        if value is None or same_value(value, lookup_dotted(defaults, key)):
            continue  # unset, or verl's default: nothing asked
        older = _older_spelling(key)
        new_key = "reward." + key
        if older is None:
            problems.append(_unknown(bc, new_key, value))
            continue
        current = lookup_dotted(tree, older)
        if current is not ABSENT and current is not None and not same_value(current, value):
            problems.append(_conflict(bc, new_key, older, value, current))
            continue
        set_dotted(tree, older, copy.deepcopy(value))
        origins[older] = new_key


def _older_spelling(key: str) -> str | None:
    matches = [
        (new, old) for new, old in REWARD_SPELLINGS if key == new or key.startswith(new + ".")
    ]
    if not matches:
        return None
    new, old = max(matches, key=lambda m: len(m[0]))
    return old + key[len(new) :]


def _fold_tracking(tree: dict, bc: str) -> list[Problem]:
    trainer = tree.get("trainer")
    if not isinstance(trainer, dict):
        return []
    logger = trainer.get("logger")
    names = logger if isinstance(logger, list) else [logger]
    if TRACKING not in names:
        return []
    folded = list(dict.fromkeys(WANDB if name == TRACKING else name for name in names))
    trainer["logger"] = folded if isinstance(logger, list) else folded[0]
    path = join_path(bc, "trainer", "logger")
    hint = "verl's deprecated name for wandb (kuberl logs to wandb); write wandb instead"
    return [Problem(path, "deprecated logger name", hint, logger, severity=Severity.WARNING)]


def _fold_moved(
    tree: dict,
    bc: str,
    moved: tuple[str, str, str],
    problems: list[Problem],
    origins: dict[str, str],
) -> None:
    flat, nested, hint = moved
    parent_key, _, leaf = flat.rpartition(".")
    parent = lookup_dotted(tree, parent_key)
    if not isinstance(parent, dict) or leaf not in parent:
        return
    value = parent.pop(leaf)
    current = lookup_dotted(tree, nested)
    if value is None:
        return
    if current is not ABSENT and current is not None and not same_value(current, value):
        problems.append(_conflict(bc, flat, nested, value, current))
        return
    set_dotted(tree, nested, copy.deepcopy(value))
    origins[nested] = flat
    path = join_path(bc, *flat.split("."))
    problems.append(Problem(path, "older spelling", hint, severity=Severity.WARNING))


def _fold_engine_sp(
    tree: dict,
    bc: str,
    nodes: tuple[str, str],
    problems: list[Problem],
    origins: dict[str, str],
) -> None:
    """verl 0.9's engine SP degree onto the owner's key; 1 (verl's default) asks for nothing."""
    engine, owner = nodes
    node = lookup_dotted(tree, engine)
    if not isinstance(node, dict) or SP_KEY not in node:
        return
    value = node.pop(SP_KEY)
    if value is None or same_value(value, 1):
        return
    flat, target = f"{engine}.{SP_KEY}", f"{owner}.{SP_KEY}"
    current = lookup_dotted(tree, target)
    if current not in (ABSENT, None, 1) and not same_value(current, value):
        problems.append(_conflict(bc, flat, target, value, current))
        return
    set_dotted(tree, target, copy.deepcopy(value))
    origins[target] = flat


def _fold_cudagraph_sizes(tree: dict, bc: str, origins: dict[str, str]) -> list[Problem]:
    rollout = lookup_dotted(tree, ROLLOUT)
    if not isinstance(rollout, dict) or not rollout.get(CUDAGRAPH):
        return []
    sizes = rollout.pop(CUDAGRAPH)
    vllm = rollout.setdefault("engine_kwargs", {}).setdefault("vllm", {})
    if not isinstance(vllm, dict):
        return []  # not a mapping: the schema reports it
    compilation = vllm.get("compilation_config") or {}
    if isinstance(compilation, str):
        try:
            compilation = json.loads(compilation)
        except json.JSONDecodeError as err:
            path = join_path(bc, *f"{ROLLOUT}.engine_kwargs.vllm.compilation_config".split("."))
            fix = "write vLLM's compilation_config as a mapping or a JSON object"
            return [Problem(path, f"not JSON ({err})", fix, compilation)]
    if not isinstance(compilation, dict):
        return []  # the schema or vLLM reports it
    vllm["compilation_config"] = {**compilation, CUDAGRAPH: copy.deepcopy(sizes)}
    origins[f"{ROLLOUT}.engine_kwargs.vllm.compilation_config.{CUDAGRAPH}"] = (
        f"{ROLLOUT}.{CUDAGRAPH}"
    )
    return []


def _conflict(bc: str, new: str, older: str, value: Any, current: Any) -> Problem:
    return Problem(
        join_path(bc, *new.split(".")),
        f"both {new} and {older} are set, to different values ({older}: {current!r})",
        f"keep one of them: {new} is verl's current spelling, {older} the older one",
        value,
    )


def _unknown(bc: str, key: str, value: Any) -> Problem:
    known = ", ".join(f"reward.{new}" for new, _ in REWARD_SPELLINGS)
    return Problem(join_path(bc, *key.split(".")), "unknown key", f"valid keys: {known}", value)


def _leaves(node: dict, prefix: str = "") -> list[tuple[str, Any]]:
    """Dotted leaves of ``node``; an empty mapping is a leaf."""
    out: list[tuple[str, Any]] = []
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out += _leaves(value, dotted + ".")
        else:
            out.append((dotted, value))
    return out
