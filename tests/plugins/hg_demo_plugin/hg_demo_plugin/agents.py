"""The first-legal agent: always sends the first legal action the harness lists."""

from __future__ import annotations

from typing import Any


class FirstLegalAgent:
    name = "first-legal"

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, observation: str, info: dict[str, Any]) -> str:
        legal = info.get("legal_actions") or [""]
        return legal[0]
