"""The real node's configuration files: containerd's config.toml, a loopback-only CNI list, and
the KubeletConfiguration. Every path lives under the node's work dir."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

PAUSE_IMAGE = "kuberl.local/pause:3.10"


def containerd_config(work: Path, root: Path) -> str:
    """containerd 1.6 config (version 2). `restrict_oom_score_adj`: root here may lack
    CAP_SYS_RESOURCE, and runc cannot lower a sandbox's oom_score_adj without it. `root` (the
    image store) outlives the node, so unchanged images are not imported again."""
    return f"""version = 2
root = "{root}"
state = "{work}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{work}/containerd/containerd.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "{work}/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  restrict_oom_score_adj = true

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{work}/runc"

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{work}/cni/net.d"
"""


def cni_conflist() -> str:
    """Only loopback: pods run with hostNetwork, but the CRI needs a network config to report
    NetworkReady (without it the node never turns Ready)."""
    return json.dumps(
        {"cniVersion": "1.0.0", "name": "kuberl-loopback", "plugins": [{"type": "loopback"}]},
        indent=2,
    )


def kubelet_config(
    work: Path, cgroup_root: str, address: str, port: int, healthz_port: int, dns_address: str
) -> str:
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "containerRuntimeEndpoint": f"unix://{work}/containerd/containerd.sock",
        "address": address,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        # The apiserver has no kubelet client certificate; the address lives in the node's own
        # network namespace, which only this host routes to (netns.py).
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "failCgroupV1": False,
        "failSwapOn": False,
        "podLogsDir": f"{work}/pod-logs",
        "volumePluginDir": f"{work}/volume-plugins",
        "staticPodPath": "",
        # Imported images cannot be pulled again: never garbage-collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "registerWithTaints": [
            {"key": "kuberl.io/real-node", "value": "true", "effect": "NoSchedule"}
        ],
        # Otherwise the kubelet writes KUBE-* chains into the host's iptables.
        "makeIPTablesUtilChains": False,
        "maxPods": 20,
        "serializeImagePulls": False,
        "resolvConf": "/etc/resolv.conf",
        # hack/realnode/dns.py: Service names resolve to their endpoints (no kube-proxy here).
        "clusterDNS": [dns_address],
        "clusterDomain": "cluster.local",
    }
    return yaml.safe_dump(config, sort_keys=False)
