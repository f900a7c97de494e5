"""Remote paths and where outputs survive a lost node.

* ``trainer.default_hdfs_dir`` (verl's checkpoint copy) is a URL whose scheme kuberl reads
  (``kuberl_api.storage.SCHEMES``), or a local path as verl allows (absolute or ``~/``: a
  warning, the copy stays on the saving pod's disk unless that path is mounted).
  ``trainer.resume_from_path`` is a local step directory or the URL of an uploaded one
  (``<url>/global_step_N``, holding the manifest the mirror writes): the initializer copies it
  like a model, and the run resumes from the copy only when the manifest lists every file.
* Model and data paths (``model.path``, ``data.train_files``/``val_files``, ``data.tokenizer``,
  the critic's and reward model's paths) may be URLs of those schemes too: the runtime
  downloads them into the input cache before the ranks load anything (``plan/remote_inputs``).
* In an RLTrainingJob, a URL of a scheme that needs credentials needs them named:
  ``spec.storage.credentials.secretRef`` (the Secret's keys become the ranks' environment).
* ``af_output_dir`` may be a URL too: the ranks write to a local staging directory
  (``kuberl_api.storage.output_location``) and upload checkpoints, logs and the merged model.
* A job on more than one node needs its checkpoints where every node and every later attempt
  finds them: a PersistentVolumeClaim as the output volume, or a ``default_hdfs_dir`` or
  ``af_output_dir`` URL.
  Otherwise each attempt would silently start again from step 0.
"""

from __future__ import annotations

from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.sft import SFTConfig
from kuberl_api.job import RLTrainingJobSpec
from kuberl_api.storage import SCHEMES, is_local_path, is_remote, is_url, scheme_of, url_problem
from kuberl_api.validation.problems import Problem, Severity, join_path

URL_FORMS = "s3://bucket/prefix, obs://bucket/prefix, gs://bucket/prefix, hdfs://host/path or file:///absolute/path"


def check_storage(
    cfg: BackendConfig,
    bc: str,
    spec: RLTrainingJobSpec | None,
    prefix: str,
    af_output_dir: str | None = None,
) -> list[Problem]:
    trainer = cfg.trainer
    problems = check_output_dir(af_output_dir or "", spec, prefix)
    mirror = trainer.default_hdfs_dir or ""
    mirror_key = join_path(bc, "trainer", "default_hdfs_dir")
    if mirror:
        problems += url_problems(mirror, mirror_key, required=True)
    inputs = [(k, v) for k, v in input_paths(cfg, bc) if is_url(v)]
    inputs += _resume_url(trainer.resume_mode, trainer.resume_from_path, bc)
    problems += check_input_urls(inputs)
    if spec is not None:
        urls = [(mirror_key, mirror)] if is_url(mirror) else []
        urls += inputs
        problems += credentials_named(spec, prefix, urls)
        nodes = sum(pool.nodes for pool in spec.worker_pools)
        uploaded = is_url(mirror) or is_remote(spec.af_output_dir)
        problems += _multi_node_outputs(spec, prefix, uploaded, nodes)
    return problems


def check_output_dir(
    af_output_dir: str, spec: RLTrainingJobSpec | None, prefix: str
) -> list[Problem]:
    """af_output_dir as a URL: a scheme kuberl reads, and its credentials named in a job."""
    if not is_url(af_output_dir):
        return []
    key = join_path(prefix, "af_output_dir")
    problems = url_problems(af_output_dir, key, required=True)
    if spec is not None and not problems:
        problems += credentials_named(spec, prefix, [(key, af_output_dir)])
    return problems


def check_sft_urls(cfg: SFTConfig, sft: str) -> list[Problem]:
    """As ``check_storage`` for an SFT config: its mirror and its model and data URLs."""
    mirror = cfg.trainer.default_hdfs_dir or ""
    mirror_key = join_path(sft, "trainer", "default_hdfs_dir")
    problems = url_problems(mirror, mirror_key, required=True) if mirror else []
    return problems + check_input_urls(sft_input_paths(cfg, sft))


def _resume_url(mode: str, value: str | None, prefix: str) -> list[tuple[str, str]]:
    """trainer.resume_from_path when it is a URL the run reads (resume_mode: resume_path)."""
    if mode != "resume_path" or not value or not is_url(value):
        return []
    return [(join_path(prefix, "trainer", "resume_from_path"), value)]


def check_sft_credentials(
    cfg: SFTConfig, sft: str, spec: RLTrainingJobSpec, prefix: str
) -> list[Problem]:
    mirror = cfg.trainer.default_hdfs_dir or ""
    urls = [(join_path(sft, "trainer", "default_hdfs_dir"), mirror)] if is_url(mirror) else []
    problems = check_output_dir(spec.af_output_dir, spec, prefix)
    return problems + credentials_named(spec, prefix, urls + sft_input_paths(cfg, sft))


def check_input_urls(inputs: list[tuple[str, str]]) -> list[Problem]:
    """Model and data URLs (keys with their values) whose scheme kuberl reads."""
    problems = []
    for key, url in inputs:
        why = url_problem(url) if is_url(url) else None
        if why is not None:
            fix = f"write {URL_FORMS}, a mounted path or a hub id"
            problems.append(Problem(key, why, fix, url))
    return problems


def sft_input_paths(cfg: SFTConfig, prefix: str) -> list[tuple[str, str]]:
    """An SFT config's model and data keys that may name a URL, with their values."""
    found = [(join_path(prefix, "model", "path"), cfg.model.path)]
    if cfg.model.tokenizer_path:
        found.append((join_path(prefix, "model", "tokenizer_path"), cfg.model.tokenizer_path))
    found += _files(cfg.data.train_files, join_path(prefix, "data", "train_files"))
    found += _files(cfg.data.val_files, join_path(prefix, "data", "val_files"))
    found += _resume_url(cfg.trainer.resume_mode, cfg.trainer.resume_from_path, prefix)
    return [(k, v) for k, v in found if is_url(v)]


def _files(files: str | list[str] | None, key: str) -> list[tuple[str, str]]:
    if isinstance(files, str):
        return [(key, files)]
    return [(f"{key}[{i}]", value) for i, value in enumerate(files or [])]


def input_paths(cfg: BackendConfig, bc: str) -> list[tuple[str, str]]:
    """The model and data keys that may name a URL (downloaded before the ranks start), with
    their values; data.tokenizer only when it is not the model path it defaults to."""
    arr, data, rm = cfg.actor_rollout_ref, cfg.data, cfg.reward_model
    found = [(join_path(bc, "actor_rollout_ref", "model", "path"), arr.model.path)]
    if data.tokenizer and data.tokenizer != arr.model.path:
        found.append((join_path(bc, "data", "tokenizer"), data.tokenizer))
    found += _files(data.train_files, join_path(bc, "data", "train_files"))
    found += _files(data.val_files, join_path(bc, "data", "val_files"))
    found.append((join_path(bc, "critic", "model", "path"), cfg.critic.model.path or ""))
    found.append((join_path(bc, "reward_model", "model", "path"), rm.model.path or ""))
    found.append(
        (join_path(bc, "reward_model", "model", "input_tokenizer"), rm.model.input_tokenizer or "")
    )
    return found


def url_problems(value: str, key: str, required: bool) -> list[Problem]:
    if not is_url(value):
        if not required:
            return []
        if is_local_path(value):  # verl copies to a local path too
            return [
                Problem(
                    key,
                    "is a local path: every checkpoint is copied there, on the disk of the "
                    "process that saves it, as verl does (lost with the pod unless mounted)",
                    f"to keep checkpoints beyond the pod write {URL_FORMS}",
                    value,
                    Severity.WARNING,
                )
            ]
        return [
            Problem(
                key,
                "must be a URL or an absolute path: kuberl copies every checkpoint there and "
                "resumes from it",
                f"write {URL_FORMS}, or set null to keep checkpoints in default_local_dir only",
                value,
            )
        ]
    why = url_problem(value)
    if why is None:
        return []
    return [Problem(key, why, f"write {URL_FORMS}", value)]


def credentials_named(
    spec: RLTrainingJobSpec, prefix: str, urls: list[tuple[str, str]]
) -> list[Problem]:
    credentials = spec.storage.credentials
    if credentials is not None:
        return []
    problems = []
    seen: set[str] = set()
    for key, url in urls:
        scheme = SCHEMES.get(scheme_of(url))
        if scheme is None or not scheme.needs_credentials or url in seen:
            continue
        seen.add(url)
        names = ", ".join(scheme.credential_env)
        problems.append(
            Problem(
                key,
                f"{scheme_of(url)}:// needs credentials, and the job names none",
                f"create a Secret with the keys {names} and set "
                f"{join_path(prefix, 'storage', 'credentials', 'secretRef', 'name')} to its name",
                url,
            )
        )
    return problems


def _multi_node_outputs(
    spec: RLTrainingJobSpec, prefix: str, mirrored: bool, nnodes: int
) -> list[Problem]:
    output = spec.storage.output
    shared = output is not None and bool(output.claim_name)
    if nnodes <= 1 or shared or mirrored:
        return []
    return [
        Problem(
            join_path(prefix, "storage", "output"),
            f"a job on {nnodes} nodes needs its checkpoints on shared or object storage: "
            "without it each node writes its own disk and every retry starts again at step 0",
            "set storage.output.claimName to a ReadWriteMany PersistentVolumeClaim, or "
            "backend_config.trainer.default_hdfs_dir (or af_output_dir) to an s3:// (or gs://, "
            "hdfs://, obs://) URL",
        )
    ]
