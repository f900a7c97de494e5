"""Read the history rows of an offline wandb run file (``run-<id>.wandb``).

The file is a 7-byte header (``:W&B``, two magic bytes, a version) followed by 32 KiB blocks of
records, each a 7-byte header (CRC32, little-endian length, type: full / first / middle / last)
and a serialized ``wandb_internal_pb2.Record``; a block's tail shorter than a header is padding.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2

_HEADER, _BLOCK, _RECORD_HEADER = 7, 32 * 1024, 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _payloads(data: bytes) -> list[bytes]:
    assert data[:4] == b":W&B", "not a wandb run file"
    out: list[bytes] = []
    pending = b""
    pos = _HEADER
    while pos + _RECORD_HEADER <= len(data):
        left_in_block = _BLOCK - pos % _BLOCK
        if left_in_block < _RECORD_HEADER:
            pos += left_in_block
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += _RECORD_HEADER + length
        if kind == _FULL:
            out.append(chunk)
        elif kind in (_FIRST, _MIDDLE):
            pending += chunk
        elif kind == _LAST:
            out.append(pending + chunk)
            pending = b""
    return out


def history_rows(run_file: Path) -> list[dict[str, Any]]:
    """Each ``wandb.log`` call as {key: value} (wandb's own ``_step``/``_runtime`` keys dropped)."""
    rows = []
    for payload in _payloads(run_file.read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        if record.WhichOneof("record_type") != "history":
            continue
        row = {
            item.key or "/".join(item.nested_key): json.loads(item.value_json)
            for item in record.history.item
        }
        rows.append({k: v for k, v in row.items() if not k.startswith("_")})
    return rows
