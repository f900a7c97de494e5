"""The sandboxed Python tool refuses network access, a fork bomb, a 10 GB allocation and a 60 s
loop; each comes back to the policy as the tool's failure and the next call still runs; nothing
(process, network namespace, directory) is left behind. Both isolations run: the namespaces
(``unshare``) and the audit hook a pod without user namespaces falls back to."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from kuberl_runtime.rollout.tool_calls import CallResult, ToolCall, ToolSession
from kuberl_runtime.tools import ToolError, load_tools
from kuberl_runtime.tools.sandbox import NOBODY

ISOLATIONS = ["namespace", "audit"]
# A worker running as root drops to uid 65534, which cannot execute an interpreter under /root.
PYTHON = "/usr/bin/python3" if os.geteuid() == 0 else sys.executable
SANDBOX_UID = NOBODY if os.geteuid() == 0 else os.getuid()


def tool_config(tmp_path: Path, isolation: str, **limits: object) -> str:
    config = {"python": PYTHON, "network_isolation": isolation, "timeout_s": 30, "cpu_s": 1}
    config |= {"memory_mb": 512, **limits}
    lines = "".join(f"      {key}: {value!r}\n" for key, value in config.items())
    path = tmp_path / "tools.yaml"
    path.write_text(
        "tools:\n  - class_name: kuberl.tools.python_sandbox\n    config:\n"
        + lines.replace("'", '"')
        + "    tool_schema:\n      type: function\n      function:\n"
        "        name: code_interpreter\n        description: run python\n"
        "        parameters: {type: object, properties: {code: {type: string}}}\n"
    )
    return str(path)


def call(tmp_path: Path, isolation: str, code: str, **limits: object) -> list[CallResult]:
    """``code``, then a good program, through one trajectory's tool session."""
    session = ToolSession(load_tools(tool_config(tmp_path, isolation, **limits), None))

    async def both() -> list[CallResult]:
        first = await session.call(ToolCall("code_interpreter", {"code": code}), 60)
        then = await session.call(ToolCall("code_interpreter", {"code": "print(6 * 7)"}), 60)
        return [first, then]

    return asyncio.run(both())


def assert_failed_then_goes_on(results: list[CallResult], reason: str) -> None:
    failed, then = results
    assert failed.failed, failed
    assert failed.output.text.startswith("Error executing tool 'code_interpreter'")
    assert reason in failed.output.text, failed.output.text
    assert not then.failed and then.output.text == "42\n", then


def sandbox_leftovers() -> tuple[list[int], set[str], list[str]]:
    """Processes of the sandbox's uid (other than ours), their network namespaces, and
    the sandbox's directories."""
    pids, namespaces = [], set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (
                entry.stat().st_uid != SANDBOX_UID
                or Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
            ):
                continue
            namespaces.add(os.readlink(Path(entry.path, "ns", "net")))
        except OSError:
            continue
        pids.append(int(entry.name))
    dirs = [p.name for p in Path(tempfile.gettempdir()).glob("kuberl-sandbox-*")]
    return pids, namespaces, dirs


@pytest.fixture
def nothing_left_behind():
    before = sandbox_leftovers()
    yield
    pids, namespaces, dirs = sandbox_leftovers()
    assert set(pids) <= set(before[0]), f"sandbox processes left: {set(pids) - set(before[0])}"
    assert namespaces <= before[1], f"network namespaces left: {namespaces - before[1]}"
    assert set(dirs) <= set(before[2]), f"directories left: {set(dirs) - set(before[2])}"


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_network_access_is_refused(tmp_path, isolation, nothing_left_behind):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        results = call(tmp_path, isolation, code)
        server.settimeout(0.1)
        with pytest.raises(TimeoutError):
            server.accept()  # nothing reached the host's loopback
    assert_failed_then_goes_on(results, "network access refused")


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_fork_bomb_is_refused(tmp_path, isolation, nothing_left_behind):
    code = "import os\nwhile True:\n    os.fork()\n"
    reason = "process limit exceeded" if isolation == "namespace" else "os.fork is not permitted"
    assert_failed_then_goes_on(call(tmp_path, isolation, code, max_processes=8), reason)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_10_gb_allocation_is_refused(tmp_path, isolation, nothing_left_behind):
    code = "block = bytearray(10 * 2**30)\nprint(len(block))\n"
    assert_failed_then_goes_on(call(tmp_path, isolation, code), "memory limit of 512 MB exceeded")


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_60_s_loop_is_stopped_by_the_cpu_limit(tmp_path, isolation, nothing_left_behind):
    code = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    pass\n"
    assert_failed_then_goes_on(call(tmp_path, isolation, code), "CPU limit of 1s exceeded")


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_60_s_sleep_is_stopped_by_the_wall_clock(tmp_path, isolation, nothing_left_behind):
    code = "import time\nfor _ in range(60):\n    time.sleep(1)\n"
    results = call(tmp_path, isolation, code, timeout_s=2)
    assert_failed_then_goes_on(results, "wall-clock limit of 2s exceeded")


def test_children_that_leave_the_process_group_die_with_the_call(tmp_path, nothing_left_behind):
    # A child in its own session escapes a process-group kill; the PID namespace's init ends it.
    code = (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\ntime.sleep(60)\n"
    )
    results = call(tmp_path, "namespace", code, timeout_s=2)
    assert_failed_then_goes_on(results, "wall-clock limit of 2s exceeded")


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_each_call_runs_non_root_in_a_fresh_directory(tmp_path, isolation, nothing_left_behind):
    tools = load_tools(tool_config(tmp_path, isolation), None)
    code = (
        "import os\nprint(os.getuid(), os.geteuid(), os.getcwd(), sorted(os.listdir('.')))\n"
        "open('mark', 'w').write('x')\n"
    )
    session = ToolSession(tools)

    async def twice() -> list[CallResult]:
        calls = [session.call(ToolCall("code_interpreter", {"code": code}), 60) for _ in range(2)]
        return list(await asyncio.gather(*calls))

    first, second = (r.output.text.split(" ", 3) for r in asyncio.run(twice()))
    assert first[:2] == second[:2] == [str(SANDBOX_UID)] * 2 and SANDBOX_UID != 0
    assert first[2] != second[2]
    assert first[3] == second[3] == "['main.py']\n"  # no 'mark' from the other call


def test_bad_configs_name_the_key_and_the_fix(tmp_path):
    with pytest.raises(ToolError, match=r"config.network_isolation='none'.*'namespace'"):
        load_tools(tool_config(tmp_path, "none"), None)
    with pytest.raises(ToolError, match=r"config.uid/gid=0 \(root\)"):
        load_tools(tool_config(tmp_path, "audit", uid=0), None)
    with pytest.raises(ToolError, match=r"config keys \['memory'\] unknown"):
        load_tools(tool_config(tmp_path, "audit", memory=1), None)
    with pytest.raises(ToolError, match=r"config.python='/no/python'"):
        load_tools(tool_config(tmp_path, "audit", python="/no/python"), None)


def test_a_rollout_reads_the_failure_and_goes_on(tmp_path, nothing_left_behind):
    """The multi-turn rollout (scripted policy, real loop and tokenizer): a fork bomb's failure
    is the tool's response in the trajectory, counted as a failure, and the next turn runs."""
    from transformers import AutoTokenizer

    from tests.runtime.rollout.test_multi_turn import TOKENIZER_DIR, ScriptedPolicy, _run

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    tools = load_tools(tool_config(tmp_path, "namespace", max_processes=8), None)

    def run(code: str) -> str:
        arguments = json.dumps({"name": "code_interpreter", "arguments": {"code": code}})
        return f"<tool_call>{arguments}</tool_call>"

    turns = [run("import os\nwhile True:\n    os.fork()\n"), run("print(2 * 3)"), "#### 6"]
    policy = ScriptedPolicy(tokenizer, {"bomb": turns})
    batch, metrics = _run(tokenizer, policy, ["bomb?"], response_length=900, tools=tools)
    text = tokenizer.decode(batch["responses"][0][batch["attention_mask"][0, -900:].bool()])
    assert "Error executing tool 'code_interpreter': process limit exceeded" in text
    assert "<|im_start|>tool\n6\n<|im_end|>" in text and text.rstrip().endswith("#### 6<|im_end|>")
    assert metrics["tool/code_interpreter/calls"] == 2
    assert metrics["tool/code_interpreter/failures"] == 1
    assert len(policy.contexts) == 3
