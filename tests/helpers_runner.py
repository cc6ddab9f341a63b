"""Driving the SDK's real tool runner against the loopback Messages API stand-in."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic

from gitmem.demo.scripted_api import STAND_IN_MODEL, ScriptedAPI


def run_sync(
    api: ScriptedAPI, tool: Any, prompt: str, *, threaded: bool = True, stream: bool = False
) -> anthropic.types.beta.BetaMessage:
    """One conversation through ``client.beta.messages.tool_runner``; its final message.

    ``threaded=False`` makes the runner send the whole history each turn (``thread=False``).
    """
    extra: dict[str, Any] = {} if threaded else {"thread": False}
    with api.client() as client:
        runner = client.beta.messages.tool_runner(
            model=STAND_IN_MODEL,
            max_tokens=256,
            messages=[{"role": "user", "content": prompt}],
            tools=[tool],
            stream=stream,
            **extra,
        )
        if stream:
            for reply in runner:
                for _event in reply:
                    pass
        return runner.until_done()


def run_async(api: ScriptedAPI, tool: Any, prompt: str, *, threaded: bool = True) -> Any:
    """As :func:`run_sync`, through the async client and the async tool runner."""
    extra: dict[str, Any] = {} if threaded else {"thread": False}

    async def main() -> Any:
        async with api.async_client() as client:
            runner = client.beta.messages.tool_runner(
                model=STAND_IN_MODEL,
                max_tokens=256,
                messages=[{"role": "user", "content": prompt}],
                tools=[tool],
                **extra,
            )
            return await runner.until_done()

    return asyncio.run(main())
