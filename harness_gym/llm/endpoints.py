"""Several base URLs that serve one model: load balancing and failover for one agent.

An agent written ``openai:MODEL@URL1,URL2`` is one agent (one name, one identity, one cache)
reached through two servers. Each request attempt goes to the endpoint that is up and has the
fewest requests in flight (ties: the one that was given work least recently). An endpoint
whose attempt fails in transport (connection refused, timeout, 429, 5xx) is set aside for a
cool-down (``Retry-After`` when the server sent one, else 1 s doubling per failure in a row,
at most 30 s) and the retry goes to another endpoint at once; after its cool-down it gets
work again, and one success makes it healthy. When every endpoint is set aside, the one whose
cool-down ends first is tried. A single router URL (a load balancer in front of many servers)
is simply one endpoint.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: First cool-down of a failing endpoint (seconds); it doubles per failure in a row.
COOLDOWN = 1.0
#: Longest cool-down.
MAX_COOLDOWN = 30.0


def split_urls(base_url: str | Sequence[str]) -> list[str]:
    """``"URL1,URL2"`` or a list: the base URLs, without trailing slashes (at least one)."""
    urls = base_url.split(",") if isinstance(base_url, str) else list(base_url)
    urls = [u.strip().rstrip("/") for u in urls if u and u.strip()]
    if not urls:
        raise ValueError("no base URL given")
    bad = [u for u in urls if not u.startswith(("http://", "https://"))]
    if bad:
        raise ValueError(f"base URLs must start with http:// or https://, got {bad}")
    if len(set(urls)) != len(urls):
        raise ValueError(f"a base URL is listed twice: {urls}")
    return urls


@dataclass
class Endpoint:
    """One base URL and what the pool knows about it."""

    url: str
    client: Any
    in_flight: int = 0
    #: Attempts it answered (any HTTP answer) and attempts that failed in transport.
    answered: int = 0
    failed: int = 0
    failures_in_row: int = 0
    down_until: float = 0.0
    last_given: int = field(default=-1)


class EndpointPool:
    """The endpoints of one backend; thread-safe."""

    def __init__(
        self,
        urls: Sequence[str],
        make_client: Callable[[str], Any],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoints = [Endpoint(url, make_client(url)) for url in urls]
        self._clock = clock
        self._lock = threading.Lock()
        self._given = 0

    def __len__(self) -> int:
        return len(self.endpoints)

    def acquire(self, avoid: Endpoint | None = None) -> Endpoint:
        """The endpoint for the next attempt (counted in flight until :meth:`release`)."""
        with self._lock:
            now = self._clock()
            up = [e for e in self.endpoints if e.down_until <= now]
            if avoid is not None and len(up) > 1:
                up = [e for e in up if e is not avoid] or up
            if up:
                chosen = min(up, key=lambda e: (e.in_flight, e.last_given))
            else:
                chosen = min(self.endpoints, key=lambda e: (e.down_until, e.in_flight))
            chosen.in_flight += 1
            chosen.last_given = self._given
            self._given += 1
            return chosen

    def release(self, endpoint: Endpoint, failed: bool, retry_after: float | None = None) -> None:
        """The attempt on ``endpoint`` ended; a transport failure sets it aside for a while."""
        with self._lock:
            endpoint.in_flight -= 1
            if not failed:
                endpoint.answered += 1
                endpoint.failures_in_row = 0
                endpoint.down_until = 0.0
                return
            endpoint.failed += 1
            endpoint.failures_in_row += 1
            wait = retry_after if retry_after is not None else COOLDOWN * 2 ** (endpoint.failures_in_row - 1)
            endpoint.down_until = self._clock() + min(MAX_COOLDOWN, wait)

    def other_up(self, endpoint: Endpoint) -> bool:
        """Whether an endpoint besides ``endpoint`` is up (a retry can go there at once)."""
        with self._lock:
            now = self._clock()
            return any(e is not endpoint and e.down_until <= now for e in self.endpoints)

    def counts(self) -> dict[str, dict[str, int]]:
        """Per URL: attempts answered and attempts that failed in transport."""
        with self._lock:
            return {e.url: {"answered": e.answered, "failed": e.failed} for e in self.endpoints}

    def close(self) -> None:
        for endpoint in self.endpoints:
            endpoint.client.close()
