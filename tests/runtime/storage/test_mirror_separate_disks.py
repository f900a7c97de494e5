"""Two nodes that do not share default_local_dir (each pod its own disk), checkpoints kept by the
mirror: each node publishes its own ranks' shards, every rank uploads what it owns, the manifest
lists both ranks, and two fresh disks resume from the mirror with the saved weights restored.
Two gloo processes, each rank 0 of its own node (LOCAL_RANK 0), a file:// mirror."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

from kuberl_api.storage import mirror_url
from kuberl_runtime.checkpoint.manager import TRACKER_FILE, TrainState
from kuberl_runtime.checkpoint.mirrored import MirroredCheckpointManager
from kuberl_runtime.distributed import RankInfo
from kuberl_runtime.testing.train_state import tiny_actor
from support.warm_python import script_env, warm_python


def _state(seed: int) -> TrainState:
    return TrainState({"actor": tiny_actor(seed)}, {"seed": seed}, {"epoch": seed})


def _rank(rank: int, store: str, disks: str, mirror: str) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store, 2), rank=rank, world_size=2)
    ranks = RankInfo(rank=rank, world_size=2, local_rank=0)  # one rank per node
    first = MirroredCheckpointManager(Path(disks) / f"node{rank}-a", ranks, mirror)
    first.remove_partial_writes()
    saved = first.save(2, _state(rank + 1))
    first.finish()  # the upload overlaps training (checkpoint/uploads.py): the run's end waits
    published = sorted(p.relative_to(saved).as_posix() for p in saved.rglob("*") if p.is_file())
    fresh = MirroredCheckpointManager(Path(disks) / f"node{rank}-b", ranks, mirror)
    fresh.remove_partial_writes()
    step = fresh.latest_step()
    restored = _state(rank + 10)
    assert step is not None
    fresh.load(fresh.step_dir(step), restored)
    model = restored.modules["actor"][0]
    print(json.dumps({
        "rank": rank, "step": step, "published": published, "extra": restored.extra,
        "weight": model.weight.tolist(), "expected": _state(1).modules["actor"][0].weight.tolist(),
    }))  # fmt: skip
    dist.destroy_process_group()


def test_nodes_with_their_own_disks_mirror_and_resume_every_rank(tmp_path):
    mirror = mirror_url(str(tmp_path / "store"))
    procs = [
        warm_python().start(
            [__file__, str(rank), str(tmp_path / "pg"), str(tmp_path), mirror],
            script_env(),
        )
        for rank in range(2)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err[-3000:] for _, err in outputs]
    zero, one = (json.loads(out.strip().splitlines()[-1]) for out, _ in outputs)
    # Each node published its own copy: rank 1's disk holds rank 1's extra state, not rank 0's.
    assert "extra_state_rank_1.pt" in one["published"]
    assert "extra_state_rank_0.pt" not in one["published"]
    assert {"extra_state_rank_0.pt", "data.pt", "actor/.metadata"} <= set(zero["published"])
    assert (tmp_path / "node1-a" / TRACKER_FILE).read_text().strip() == "2"
    manifest = json.loads(
        (tmp_path / "store" / "global_step_2" / "kuberl-manifest.json").read_text()
    )
    assert {s["rank"] for s in manifest["shards"]} == {0, 1}
    # Fresh disks on both nodes: the step came from the mirror, with each rank's own extras and
    # the saved (rank 0's, replicated) weights.
    assert zero["step"] == one["step"] == 2
    assert zero["extra"] == {"seed": 1} and one["extra"] == {"seed": 2}
    assert zero["weight"] == one["weight"] == zero["expected"]
    assert (tmp_path / "node1-b" / "global_step_2" / "extra_state_rank_0.pt").is_file()


if __name__ == "__main__":
    _rank(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4])
