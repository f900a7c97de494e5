"""Relay TCP connections from the real node's network namespace to the host's loopback.

    python hack/realnode/relay.py --netns DIR/realnode/netns --port 6443

Listens on 127.0.0.1:PORT inside the namespace and connects each accepted connection to
127.0.0.1:PORT on the host: the kubelet and the node's pods reach the apiserver (bound to the
host's 127.0.0.1 only) at the address their kubeconfig and KUBERNETES_SERVICE_HOST name, and
TLS checks the name the serving certificate holds. Both legs are loopback (netns.py says why).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from realnode.netns import LOOPBACK, listen_inside

log = logging.getLogger("realnode-relay")
CHUNK = 1 << 16


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF, then pass the EOF on (the other direction may still be talking)."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.transport.abort()


async def relay(port: int, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
    try:
        upstream_r, upstream_w = await asyncio.open_connection(LOOPBACK, port)
    except OSError as err:
        log.warning("cannot reach %s:%d on the host: %s", LOOPBACK, port, err)
        client_w.transport.abort()
        return
    try:
        await asyncio.gather(pipe(client_r, upstream_w), pipe(upstream_r, client_w))
    finally:
        for writer in (client_w, upstream_w):
            writer.close()


def listener(netns: str, port: int) -> socket.socket:
    def make() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((LOOPBACK, port))
        sock.listen(128)
        return sock

    return listen_inside(netns, make)


async def serve(netns: str, port: int) -> None:
    server = await asyncio.start_server(lambda r, w: relay(port, r, w), sock=listener(netns, port))
    log.info("relaying %s:%d in %s to the host's %s:%d", LOOPBACK, port, netns, LOOPBACK, port)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--netns", required=True, help="the namespace's bind mount")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="realnode-relay: %(message)s")
    asyncio.run(serve(args.netns, args.port))


if __name__ == "__main__":
    main()
