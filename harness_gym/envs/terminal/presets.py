"""Terminal harness presets (filled in by the coding-harness presets)."""

from __future__ import annotations

from harness_gym.core.harness import Harness

TERMINAL_PRESETS: dict[str, Harness] = {}
