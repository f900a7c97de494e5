"""Tool calls in a policy's turn: hermes parsing, running them with a timeout, truncation.

Hermes format (Qwen's): each call is ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
in the assistant's text. A block that is not such JSON is not a call. Each call runs in its
trajectory's tool instance (made at the trajectory's first call of that tool, released when the
trajectory ends); an unknown tool, bad arguments, an exception or a timeout come back to the
policy as the tool's response text and count as a failure.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kuberl_runtime.tools.base import Tool, ToolOutput, as_output, resolved

logger = logging.getLogger(__name__)

TruncateSide = Literal["left", "right", "middle"]
_HERMES = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Any


def parse_hermes(text: str) -> list[ToolCall]:
    calls = []
    for block in _HERMES.findall(text):
        try:
            decoded = json.loads(block)
            calls.append(ToolCall(str(decoded["name"]), decoded.get("arguments", {})))
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            logger.debug("not a tool call %r: %s", block, err)
    return calls


def truncate_response(text: str, max_length: int, side: TruncateSide) -> str:
    """verl's character truncation of a tool response longer than ``max_length``."""
    if len(text) <= max_length:
        return text
    if side == "left":
        return "(truncated)..." + text[-max_length:]
    if side == "right":
        return text[:max_length] + "...(truncated)"
    half = max_length // 2
    return text[:half] + "...(truncated)..." + text[-half:]


@dataclass(frozen=True)
class CallResult:
    name: str
    output: ToolOutput
    failed: bool
    latency_s: float


@dataclass
class ToolSession:
    """One trajectory's tool instances. ``tools_kwargs``: the row's ``extra_info.tools_kwargs``
    (per tool: ``create_kwargs``, ``execute_kwargs``, ``calc_reward_kwargs``,
    ``release_kwargs``)."""

    tools: dict[str, Tool]
    tools_kwargs: dict[str, Any] = field(default_factory=dict)
    instances: dict[str, str] = field(default_factory=dict)
    step_rewards: list[float] = field(default_factory=list)
    results: list[CallResult] = field(default_factory=list)

    def kwargs(self, name: str, stage: str) -> dict[str, Any]:
        return dict((self.tools_kwargs.get(name) or {}).get(stage) or {})

    async def call(self, call: ToolCall, timeout_s: float) -> CallResult:
        start = time.perf_counter()
        try:
            output = await asyncio.wait_for(self._execute(call), timeout_s)
            failed = False
        except TimeoutError:
            output, failed = (
                ToolOutput(f"Error: tool {call.name!r} timed out after {timeout_s}s"),
                True,
            )
        except ToolCallError as err:
            output, failed = ToolOutput(f"Error: {err}"), True
        except Exception as err:  # a tool's own bug is the policy's observation, not a crash
            logger.warning("tool %r failed: %r", call.name, err)
            output, failed = ToolOutput(f"Error executing tool {call.name!r}: {err}"), True
        self.step_rewards.append(output.reward)
        return CallResult(call.name, output, failed, time.perf_counter() - start)

    async def _execute(self, call: ToolCall) -> ToolOutput:
        tool = self.tools.get(call.name)
        if tool is None:
            raise ToolCallError(f"unknown tool {call.name!r}; available: {sorted(self.tools)}")
        arguments = call.arguments
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as err:
                raise ToolCallError(f"arguments of {call.name!r} are not JSON: {err}") from err
        if not isinstance(arguments, dict):
            raise ToolCallError(f"arguments of {call.name!r} must be an object, got {arguments!r}")
        if call.name not in self.instances:
            created = await _run(tool.create, create_kwargs=self.kwargs(call.name, "create_kwargs"))
            self.instances[call.name] = created[0] if isinstance(created, tuple) else created
        returned = await _run(
            tool.execute,
            self.instances[call.name],
            arguments,
            **self.kwargs(call.name, "execute_kwargs"),
        )
        return as_output(returned)

    async def finish(self) -> dict[str, float]:
        """Each tool's ``calc_reward`` of this trajectory, then every instance released."""
        rewards: dict[str, float] = {}
        for name, instance in self.instances.items():
            tool = self.tools[name]
            reward = await _run(
                tool.calc_reward, instance, **self.kwargs(name, "calc_reward_kwargs")
            )
            rewards[name] = float(reward or 0.0)
            await _run(tool.release, instance, **self.kwargs(name, "release_kwargs"))
        self.instances.clear()
        return rewards


class ToolCallError(ValueError):
    """A call the policy got wrong (unknown tool, bad arguments): reported back to it."""


async def _run(method: Any, *args: Any, **kwargs: Any) -> Any:
    """A tool method, async or sync; a sync one runs in a daemon thread, so a timeout fires and
    a tool that never returns neither blocks the next turn nor the process's exit."""
    if asyncio.iscoroutinefunction(method):
        return await method(*args, **kwargs)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def target() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (method(*args, **kwargs), None)
        except Exception as err:
            outcome = (None, err)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the turn ended (timed out) and its event loop is closed
            logger.debug("tool %r returned after its turn ended", method)

    threading.Thread(target=target, daemon=True).start()
    return await resolved(await future)


def run_calls(
    work: Sequence[tuple[ToolSession, Sequence[ToolCall]]], timeout_s: float
) -> list[list[CallResult]]:
    """Every row's calls at once (rows and calls in parallel); results in call order."""

    async def all_rows() -> list[list[CallResult]]:
        rows = [asyncio.gather(*(s.call(c, timeout_s) for c in calls)) for s, calls in work]
        return [list(r) for r in await asyncio.gather(*rows)]

    return asyncio.run(all_rows())


def finish_sessions(sessions: Sequence[ToolSession]) -> list[dict[str, float]]:
    async def all_rows() -> list[dict[str, float]]:
        return list(await asyncio.gather(*(s.finish() for s in sessions)))

    return asyncio.run(all_rows())
