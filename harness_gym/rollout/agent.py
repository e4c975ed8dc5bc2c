"""The agent protocol every runner in harness-gym accepts.

An agent is anything with ``reset(seed)`` and ``act(observation, info) -> str`` (the text it
sends to ``env.step``). A batched agent may also have a static ``act_batch(agents,
observations, infos)`` that :func:`~harness_gym.rollout.batched.run_batched` calls for all
waiting episodes at once; a streaming agent has ``submit(observation, info) -> Future`` and
``receive(result) -> str``, and each of its episodes goes on as soon as its own reply is back.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Agent(Protocol):
    """The agent protocol every runner in harness-gym accepts."""

    def reset(self, seed: int | None = None) -> None: ...

    def act(self, observation: str, info: dict[str, Any]) -> str: ...
