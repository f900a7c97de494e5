"""Remote paths: the URL schemes a job's paths may use, and where their credentials come from.

One table for validation (a URL's scheme is known, its credentials named) and the runtime (which
fsspec filesystem reads and writes it). A path without ``://`` is a local (mounted) path.

Credentials never travel in the spec: an RLTrainingJob names a Secret
(``spec.storage.credentials.secretRef``) whose keys become the ranks' environment variables; the
runtime reads them from there (``credential_env``) and the Secret's name
(``CREDENTIALS_SECRET_ENV``) only to name it in an error.
"""

from __future__ import annotations

from dataclasses import dataclass

CREDENTIALS_SECRET_ENV = "KUBERL_STORAGE_SECRET"
"""The Secret's name (never its values), set by the operator for error messages."""


@dataclass(frozen=True)
class Scheme:
    protocol: str
    """The fsspec protocol that serves it."""
    package: str
    """The Python package that provides that protocol."""
    credential_env: tuple[str, ...]
    """Environment variables (keys of the credentials Secret) the filesystem reads."""
    needs_credentials: bool


_S3_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION")

SCHEMES: dict[str, Scheme] = {
    "s3": Scheme("s3", "s3fs", _S3_ENV, True),
    # Huawei OBS through its S3-compatible endpoint (AWS_ENDPOINT_URL=https://obs.<region>...).
    "obs": Scheme("s3", "s3fs", _S3_ENV, True),
    "gs": Scheme("gcs", "gcsfs", ("GOOGLE_APPLICATION_CREDENTIALS",), True),
    "hdfs": Scheme("hdfs", "pyarrow", ("HADOOP_CONF_DIR", "KRB5CCNAME"), False),
    "file": Scheme("file", "fsspec", (), False),
}


def is_url(path: str) -> bool:
    return "://" in path


def scheme_of(url: str) -> str:
    return url.split("://", 1)[0].lower()


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be used as a remote path (None: it can)."""
    scheme = scheme_of(url)
    if scheme not in SCHEMES:
        return f"scheme {scheme}:// is not one kuberl reads; use one of " + ", ".join(
            f"{s}://" for s in SCHEMES
        )
    rest = url.split("://", 1)[1]
    if scheme != "file" and not rest.split("/", 1)[0]:
        return f"{url!r} names no bucket or host after {scheme}://"
    if scheme == "file" and not rest.startswith("/"):
        return f"{url!r} is not absolute: write file:///absolute/path"
    return None


def is_local_path(path: str) -> bool:
    """An absolute or home-relative path of the machine that runs the code (no scheme)."""
    return not is_url(path) and path.startswith(("/", "~/"))


def mirror_url(path: str) -> str:
    """verl's ``default_hdfs_dir`` as a URL: verl copies to a local path as well as to HDFS, so
    a local path (absolute, or ``~/`` of the saving process) becomes ``file://<path>``."""
    path = path.rstrip("/")
    return path if is_url(path) else f"file://{path}"


def strip_protocol(url: str) -> str:
    """The path part fsspec expects: ``bucket/key`` for s3://bucket/key, ``/a/b`` for file."""
    return url.split("://", 1)[1] if is_url(url) else url


STAGING_ROOT = "/tmp/kuberl-output"
"""Where the ranks write an ``af_output_dir`` given as a URL before it is uploaded.

``/tmp`` because it is writable in every image and pod (the operator mounts an emptyDir there for
the read-only root filesystem, and ``kuberl train`` runs as any user), and nothing there needs to
outlive the pod: every checkpoint, the logs and the merged model go to the URL, and a new
attempt resumes from the URL. A job that also names ``spec.storage.output`` gets that volume
mounted here instead, so the input cache and the local steps survive attempts on it. The URL's
own path follows (``/tmp/kuberl-output/s3/bucket/runs/grpo``): two runs on one machine never
share a directory."""


def is_remote(path: str) -> bool:
    """A URL the run uploads to or downloads from (``file://`` is a mounted path)."""
    return is_url(path) and scheme_of(path) != "file"


def output_location(af_output_dir: str) -> str:
    """The local directory a run writes ``af_output_dir`` to: the path itself, the path of a
    ``file://`` URL, or the staging directory of a remote URL (``STAGING_ROOT``)."""
    if not is_url(af_output_dir):
        return af_output_dir
    segments = [s for s in strip_protocol(af_output_dir).split("/") if s not in ("", ".", "..")]
    if scheme_of(af_output_dir) == "file":
        return "/" + "/".join(segments)
    return "/".join([STAGING_ROOT, scheme_of(af_output_dir), *segments])


def output_url(af_output_dir: str | None) -> str:
    """``af_output_dir`` when the run uploads its outputs there ("" when it is a mounted path)."""
    return af_output_dir.rstrip("/") if af_output_dir and is_remote(af_output_dir) else ""
