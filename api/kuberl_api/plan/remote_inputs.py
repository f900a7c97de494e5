"""Remote models and data: each URL of a run and the local path its copy is read from.

Decided here, once, for the RL and the SFT plan. The cache sits under the output directory
(``<af_output_dir>/cache/inputs``): shared by every node when the output volume is (a
ReadWriteMany PersistentVolumeClaim), per node otherwise, and kept across attempts either way.
A URL's copy keeps the URL's layout (``s3://bucket/models/qwen`` is read from
``<cache>/s3/bucket/models/qwen``); a ``file://`` URL is a mounted path, read where it is.
``trainer.resume_from_path`` given as the URL of an uploaded ``global_step_N`` is one more input:
copied the same way, it is resumed from once its manifest checks (runtime ``step_loop``).
"""

import posixpath
from collections.abc import Iterable

from kuberl_api.plan.sections import PathsPlan, RemoteInputPlan
from kuberl_api.storage import is_url, mirror_url, scheme_of, strip_protocol

CACHE_SUBDIR = "cache/inputs"


def input_cache_dir(output_dir: str) -> str:
    return posixpath.join(output_dir, CACHE_SUBDIR)


def cache_path(url: str, cache_dir: str) -> str:
    """Where ``url``'s copy lives; ``.`` and ``..`` segments never leave the cache."""
    scheme = scheme_of(url)
    segments = [s for s in strip_protocol(url).split("/") if s not in ("", ".", "..")]
    if scheme == "file":
        return "/" + "/".join(segments)
    return posixpath.join(cache_dir, scheme, *segments)


def remote_inputs(values: Iterable[str], cache_dir: str) -> list[RemoteInputPlan]:
    """One entry per distinct URL among ``values`` (local paths and hub ids are left out)."""
    urls = dict.fromkeys(v for v in values if v and is_url(v))
    return [RemoteInputPlan(url=u, local_path=cache_path(u, cache_dir)) for u in urls]


def checkpoint_mirror(default_hdfs_dir: str | None, paths: PathsPlan) -> str:
    """Where checkpoints are uploaded: trainer.default_hdfs_dir (verl's key, when set), else the
    af_output_dir URL with the checkpoint directory's place under the output directory
    (``s3://b/run`` -> ``s3://b/run/checkpoints``); "" when neither."""
    if default_hdfs_dir:
        return mirror_url(default_hdfs_dir)
    if not paths.output_url:
        return ""
    relative = posixpath.relpath(paths.checkpoint_dir, paths.output_dir)
    return paths.output_url if relative == "." else f"{paths.output_url}/{relative}"


def resume_input(resume_mode: str, resume_from_path: str | None) -> str:
    """The checkpoint URL a run resumes from, as an input to copy ("" when there is none)."""
    if resume_mode != "resume_path" or not resume_from_path or not is_url(resume_from_path):
        return ""
    return resume_from_path


def paths_section(
    checkpoint_dir: str, output_dir: str, inputs: Iterable[str], output_url: str = ""
) -> PathsPlan:
    cache = input_cache_dir(output_dir)
    return PathsPlan(
        output_dir=output_dir,
        output_url=output_url,
        checkpoint_dir=checkpoint_dir,
        logs_dir=posixpath.join(output_dir, "logs"),
        hf_export_dir=posixpath.join(output_dir, "huggingface"),
        input_cache_dir=cache,
        remote_inputs=remote_inputs(inputs, cache),
    )
