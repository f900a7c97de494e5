"""Relays of other host ports into the real node's network namespace (the apiserver's is started
with the node): a service bound to the host's loopback only, such as a test's S3 server, is then
reached by the node's hostNetwork pods at 127.0.0.1:PORT. Each relay is a recorded process of the
node, stopped with it (`stop_real_node`)."""

from __future__ import annotations

import sys
from pathlib import Path

from testcluster.processes import is_running, start_process

from realnode import netns
from realnode.node import RELAY_PREFIX, load_real_node, save_real_node


def relay_port(state_dir: Path, port: int) -> None:
    """Relay the node namespace's 127.0.0.1:`port` to the host's (a test's S3 server, bound to
    the host's loopback only), until the node stops; a port already relayed is left as it is."""
    node = load_real_node(state_dir)
    if node is None:
        raise RuntimeError(f"no real node recorded in {state_dir}")
    name = f"{RELAY_PREFIX}{port}"
    if any(p.name == name and is_running(p) for p in node.processes):
        return
    # A relay that died is forgotten: a node with a dead recorded process counts as stopped.
    node.processes = [
        p for p in node.processes if not p.name.startswith(RELAY_PREFIX) or is_running(p)
    ]
    argv = [sys.executable, str(netns.RELAY), "--netns", node.netns, "--port", str(port)]
    node.processes.append(start_process(name, argv, state_dir / "logs" / f"{name}.log"))
    save_real_node(state_dir, node)
