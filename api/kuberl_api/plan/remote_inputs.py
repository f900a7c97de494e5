"""Remote models and data: each URL of a run and the local path its copy is read from.

Decided here, once, for the RL and the SFT plan. The cache sits under the output directory
(``<af_output_dir>/cache/inputs``): shared by every node when the output volume is (a
ReadWriteMany PersistentVolumeClaim), per node otherwise, and kept across attempts either way.
A URL's copy keeps the URL's layout (``s3://bucket/models/qwen`` is read from
``<cache>/s3/bucket/models/qwen``); a ``file://`` URL is a mounted path, read where it is.
"""

import posixpath
from collections.abc import Iterable

from kuberl_api.plan.sections import PathsPlan, RemoteInputPlan
from kuberl_api.storage import is_url, scheme_of, strip_protocol

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


def paths_section(checkpoint_dir: str, output_dir: str, inputs: Iterable[str]) -> PathsPlan:
    cache = input_cache_dir(output_dir)
    return PathsPlan(
        output_dir=output_dir,
        checkpoint_dir=checkpoint_dir,
        logs_dir=posixpath.join(output_dir, "logs"),
        hf_export_dir=posixpath.join(output_dir, "huggingface"),
        input_cache_dir=cache,
        remote_inputs=remote_inputs(inputs, cache),
    )
