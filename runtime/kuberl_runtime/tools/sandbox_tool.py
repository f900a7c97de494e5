"""The built-in sandboxed Python tool (``kuberl.tools.python_sandbox``).

Each call runs the policy's ``code`` in a restricted subprocess (``sandbox.run_code``): what it
prints is the tool's response. A program that fails, or that a limit or refusal stops (no
network, a fork bomb, too much memory, too long), raises ``SandboxFailure``: the rollout reports
it to the policy as the tool's failure and goes on.

verl tool config::

    tools:
      - class_name: kuberl.tools.python_sandbox
        config: {timeout_s: 10, cpu_s: 5, memory_mb: 1024, max_processes: 16}
        tool_schema: {type: function, function: {name: code_interpreter, ...}}
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kuberl_runtime.tools.base import ToolError, tool_name
from kuberl_runtime.tools.sandbox import SandboxLimits, run_code

CLASS_NAME = "kuberl.tools.python_sandbox"
logger = logging.getLogger(__name__)
MAX_CODE_CHARS = 20_000
PYTHON_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "code_interpreter",
        "description": "Run Python code in a sandbox (no network) and read what it prints.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "a Python program"}},
            "required": ["code"],
        },
    },
}


class SandboxFailure(RuntimeError):
    """The program did not succeed; the message is what the policy reads."""


class PythonSandboxTool:
    """Stateless: every call is a fresh process in a fresh directory."""

    def __init__(self, config: dict[str, Any] | None = None, tool_schema: Any = None) -> None:
        self.schema = dict(tool_schema or PYTHON_SCHEMA)
        self.name = tool_name(self.schema, "python sandbox tool")
        self.limits = SandboxLimits.from_config(dict(config or {}), f"tool {self.name!r}")
        self.isolation = probe(self.limits, self.name)

    def create(self, instance_id: str | None = None, **kwargs: Any) -> str:
        return instance_id or uuid.uuid4().hex

    def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> Any:
        code = parameters.get("code")
        if not isinstance(code, str) or not code.strip():
            raise SandboxFailure(f"'code' must be a non-empty string, got {code!r}")
        if len(code) > MAX_CODE_CHARS:
            raise SandboxFailure(f"'code' is longer than {MAX_CODE_CHARS} characters")
        result = run_code(code, self.limits)
        output = result.stdout + result.stderr
        if result.failure is not None:
            raise SandboxFailure(f"{result.failure}\n{output}".rstrip())
        return output, 0.0, {"isolation": result.isolation}

    def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    def release(self, instance_id: str, **kwargs: Any) -> None:
        return None


def probe(limits: SandboxLimits, name: str) -> str:
    """The isolation a trivial program gets; a sandbox that cannot run one is a config error."""
    where = f"tool {name!r} ({CLASS_NAME})"
    try:
        result = run_code("print('ok')", limits)
    except OSError as err:
        raise ToolError(
            f"{where}: config.python={limits.python!r} cannot start as the sandbox's uid ({err}); "
            "point config.python at an interpreter every user may execute, e.g. /usr/bin/python3"
        ) from err
    if result.failure is not None or result.stdout != "ok\n":
        raise ToolError(
            f"{where}: a trivial program fails in the sandbox ({result.failure}: "
            f"{result.stderr.strip()[-300:]}); with config.network_isolation="
            f"{limits.network_isolation!r}, try 'auto' or 'audit' where the pod may not unshare"
        )
    logger.info("tool %r: sandboxed with network isolation %s", name, result.isolation)
    return result.isolation
