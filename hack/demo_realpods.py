"""`make demo`'s GRPO stage in real pods: the real node beside the kwok pools (hack/realnode),
the inputs on a read-only PersistentVolume, af_output_dir on a writable one, and the evidence
that training ran inside the RayCluster's worker pod.

The job is hack/realnode/jobs.py's `real_pod_job`: the runtime-cpu image built from images/
(imported into the node's containerd, never pulled), hostNetwork Ray with its own port block, a
head and one worker pod on the real node. The operator finds the head from the RayCluster's pods
and the runtime reports progress with the job's own ServiceAccount token, as in production.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import localcluster
from realnode.jobs import RUNTIME_UID, real_pod_job
from realnode.ranks import find_rank

Kubectl = Callable[..., str]
# The images the pods run: the operator runs on the host in the demo, so not its image.
IMAGES = ("pause", "runtime-cpu")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours its log lines


class RealPods:
    def __init__(self, demo_dir: Path, kubectl: Kubectl) -> None:
        self.inputs = demo_dir / "inputs"
        self.kubectl = kubectl
        self.node: Any = None
        self.api_port = 0
        self.rank: dict[str, Any] | None = None
        self.evidence: list[str] = []

    def start(self, state: Any) -> None:
        """The images (built once per source change, hack/realimages.sh) and the real node."""
        self.api_port = urlparse(state.server).port or 443
        started = time.monotonic()
        self.node = localcluster.start_real_node(state, names=IMAGES)
        ready = self.node.seconds_to_ready or 0.0
        print(f"images {', '.join(IMAGES)} from images/ (hack/realimages.sh, rebuilt when their "
              f"sources changed) in {time.monotonic() - started - ready:.0f}s; real node "
              f"{self.node.address} Ready in {ready:.0f}s (kubelet + containerd, "
              f"images imported when new)")  # fmt: skip

    def stage_inputs(self, data: dict[str, Path], model: Path) -> tuple[dict[str, Path], Path]:
        """Copy the model and the RL data under DEMO_DIR/inputs, the pods' read-only volume."""
        shutil.rmtree(self.inputs, ignore_errors=True)
        staged = {
            key: self.inputs / "data" / key / path.name
            for key, path in data.items()
            if key.startswith("rl_")
        }
        for key, path in staged.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(data[key], path)
        shutil.copytree(model, self.inputs / "model")
        for path in (self.inputs, *self.inputs.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        return staged, self.inputs / "model"

    def job(self, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        """`manifest` turned into a real-pod job, after the volumes it needs (apply in order).
        af_output_dir is emptied and given to the runtime image's user."""
        output = Path(manifest["spec"]["af_output_dir"])
        shutil.rmtree(output, ignore_errors=True)
        output.mkdir(parents=True)
        os.chown(output, RUNTIME_UID, RUNTIME_UID)
        job, volumes = real_pod_job(manifest, self.api_port, str(self.inputs))
        return [*volumes, job]

    def observe(self, namespace: str, job: str) -> None:
        """Once a rank runs: print the pod it runs in, seen from inside that pod."""
        if self.rank is not None:
            return
        cluster = f"{job}-a1"
        self.rank = find_rank(self.kubectl, namespace, cluster)
        if self.rank is None:
            return
        pod, env = self.rank["pod"], self.rank["env"]
        name, node = pod["metadata"]["name"], pod["status"].get("hostIP", "?")
        print(f"\n== training runs in {self.rank['role']} pod {name} (kubectl exec: its processes)")
        print(self.kubectl("get", "pods", "-n", namespace, "-l", f"ray.io/cluster={cluster}",
                           "-o", "wide").rstrip())  # fmt: skip
        self.evidence = [
            f"rank 0 ran as pid {env['rank-pid']} in pod {name} on node {node} "
            f"(KUBERL_JOB_NAME={env.get('KUBERL_JOB_NAME')}, image {_image(pod)})",
        ]
        heads = f"ray.io/cluster={cluster},ray.io/node-type=head"
        for ref in self.kubectl("get", "pods", "-n", namespace, "-l", heads, "-o", "name").split():
            started = [line for line in self.kubectl("logs", "-n", namespace, ref, check=False)
                       .splitlines() if "Ray runtime started" in line]  # fmt: skip
            if started:
                line = ANSI_ESCAPE.sub("", started[0]).strip()
                self.evidence.append(f"{ref.split('/')[-1]} log: {line}")
        print("\n".join(self.evidence), flush=True)

    def metrics_url(self) -> str:
        """Rank 0's /metrics: the node's address, the worker group's own port (hostNetwork)."""
        if self.rank is None:
            return ""
        return f"http://{self.node.address}:{self.rank['env']['KUBERL_METRICS_PORT']}/metrics"

    def report(self, outputs: Path) -> None:
        print("pods            " + ("\n                ".join(self.evidence) or "(no rank seen)"))
        driver = outputs / "logs" / "attempt-1" / "driver.log"
        launched = [line for line in _lines(driver) if "ray launcher:" in line]
        print(f"driver log      {driver}")
        if launched:
            print(f"                {launched[0].split('ray launcher:', 1)[1].strip()}")


def _image(pod: dict[str, Any]) -> str:
    return str(pod["spec"]["containers"][0]["image"])


def _lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines() if path.exists() else []
