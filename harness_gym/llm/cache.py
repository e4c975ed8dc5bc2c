"""A completion cache on disk: an interrupted sweep resumes without re-querying, a rerun is free.

Keyed by :meth:`ChatRequest.key` (backend, model, messages, tools, sampling parameters,
seed, grammar). One JSON file per completion, written atomically, so several processes can
share a cache folder. Failed requests (transport errors) are never cached.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from harness_gym.llm.types import ChatRequest, Completion


def default_cache_dir() -> Path:
    """``$HARNESS_GYM_CACHE/completions`` (default ``~/.cache/harness-gym/completions``)."""
    root = os.environ.get("HARNESS_GYM_CACHE") or Path.home() / ".cache" / "harness-gym"
    return Path(root) / "completions"


class CompletionCache:
    """Completions stored by request key under ``root``."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, request: ChatRequest, backend: str, model: str) -> Completion | None:
        path = self._path(request.key(backend, model))
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        completion = Completion.from_dict(data)
        completion.cached = True
        return completion

    def put(self, request: ChatRequest, backend: str, model: str, completion: Completion) -> None:
        if completion.failed:
            return
        path = self._path(request.key(backend, model))
        path.parent.mkdir(parents=True, exist_ok=True)
        data = completion.to_dict()
        data["cached"] = False
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, ensure_ascii=False)
        os.replace(tmp, path)
