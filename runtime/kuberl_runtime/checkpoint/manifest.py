"""The manifest of an uploaded checkpoint: every shard with the rank that wrote it, size, digest.

It is the last object written for a step, so a step counts as complete on the object store only
when its manifest exists and every shard it lists is there with the listed size. Each rank uploads
what it owns (its DCP shard files ``__<rank>_<n>.distcp``, its ``extra_state_rank_<rank>.pt``);
rank 0 uploads the rest (DCP ``.metadata``, data, config, contents, the HF config and tokenizer).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

MANIFEST_FILE = "kuberl-manifest.json"
MANIFEST_VERSION = 1
_DCP_SHARD = re.compile(r"^__(\d+)_\d+\.distcp$")
_EXTRA = re.compile(r"^extra_state_rank_(\d+)\.pt$")
_CHUNK = 1 << 20


class ManifestError(ValueError):
    """A manifest that cannot be read as this release writes one."""


@dataclass(frozen=True)
class Shard:
    path: str
    """Relative to the step directory, '/'-separated."""
    rank: int
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    step: int
    world_size: int
    shards: tuple[Shard, ...]

    def to_json(self) -> str:
        record = {
            "version": MANIFEST_VERSION,
            "step": self.step,
            "world_size": self.world_size,
            "shards": [asdict(s) for s in self.shards],
        }
        return json.dumps(record, indent=1, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Manifest:
        try:
            record = json.loads(text)
            if record.get("version") != MANIFEST_VERSION:
                raise ManifestError(f"manifest version {record.get('version')!r}")
            shards = tuple(Shard(**s) for s in record["shards"])
            return Manifest(int(record["step"]), int(record["world_size"]), shards)
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ManifestError(f"unreadable manifest: {err}") from err


def owner(relative: str) -> int:
    """The rank that uploads ``relative`` (a path inside a step directory)."""
    name = relative.rsplit("/", 1)[-1]
    match = _DCP_SHARD.match(name) or _EXTRA.match(name)
    return int(match.group(1)) if match else 0


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def owned_shards(step_dir: Path, rank: int) -> list[Shard]:
    """The files of ``step_dir`` that ``rank`` uploads, with their sizes and digests."""
    shards = []
    for path in sorted(p for p in step_dir.rglob("*") if p.is_file()):
        relative = path.relative_to(step_dir).as_posix()
        if relative != MANIFEST_FILE and owner(relative) == rank:
            shards.append(Shard(relative, rank, path.stat().st_size, sha256_of(path)))
    return shards


def check_copied_step(step_dir: Path, url: str) -> None:
    """A step copied from ``url`` (trainer.resume_from_path) is complete: its manifest is there
    and every file it lists has the listed size and digest. Raises ManifestError naming the
    URL and what to give instead."""
    fix = "give the URL of a global_step_N whose upload finished (it holds " + MANIFEST_FILE + ")"
    try:
        manifest = Manifest.from_json((step_dir / MANIFEST_FILE).read_text())
    except FileNotFoundError:
        raise ManifestError(
            f"trainer.resume_from_path {url}: no {MANIFEST_FILE}, so its upload never finished "
            f"(or kuberl did not upload it); {fix}"
        ) from None
    for shard in manifest.shards:
        path = step_dir / shard.path
        if (
            not path.is_file()
            or path.stat().st_size != shard.size
            or sha256_of(path) != shard.sha256
        ):
            raise ManifestError(
                f"trainer.resume_from_path {url}: {shard.path} is missing or differs from the "
                f"manifest (size {shard.size}, sha256 {shard.sha256[:12]}...); {fix}"
            )
