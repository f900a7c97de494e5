"""A real node beside the kwok pools: containerd + runc + a kubelet, for pods that ask for it.

Pods land there only with the label selector `kuberl.io/real-node: "true"` and a toleration of
the taint `kuberl.io/real-node=true:NoSchedule`. Needs root, overlayfs and cgroups (see
`unsupported_reason`); hack/README.md has the recipe and what it leaves on the host.
"""

from realnode.node import (
    REAL_NODE_LABEL,
    RealNode,
    import_images,
    leftovers,
    load_real_node,
    start_real_node,
    stop_real_node,
    store_in_use_reason,
    unsupported_reason,
)
from realnode.relays import relay_port

__all__ = [
    "REAL_NODE_LABEL",
    "RealNode",
    "import_images",
    "leftovers",
    "load_real_node",
    "relay_port",
    "start_real_node",
    "stop_real_node",
    "store_in_use_reason",
    "unsupported_reason",
]
