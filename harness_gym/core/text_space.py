"""A Gymnasium space of arbitrary Unicode strings.

Gymnasium's ``spaces.Text`` only contains strings over a fixed charset (alphanumeric by
default), which rejects JSON, Markdown and any agent output with punctuation. ``UnicodeText``
contains every ``str`` up to ``max_length`` characters, samples printable text, and registers
itself with Gymnasium's vector utilities so ``gymnasium.make_vec(..., "async")`` works with
shared memory.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium.spaces import Space
from gymnasium.vector.utils import (
    create_empty_array,
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

_SAMPLE_ALPHABET = np.array(
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 {}[]():,.\"'<>=_-\n")
    + ["é", "ß", "中", "ж", "→"]
)


class UnicodeText(Space[str]):
    """Any Python ``str`` of length ``min_length`` to ``max_length``."""

    def __init__(self, max_length: int = 65536, min_length: int = 0, seed: Any = None) -> None:
        if not 0 <= min_length <= max_length:
            raise ValueError(f"need 0 <= min_length <= max_length, got {min_length}, {max_length}")
        self.max_length = int(max_length)
        self.min_length = int(min_length)
        super().__init__(dtype=str, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            raise NotImplementedError("UnicodeText.sample does not take a mask or probability")
        high = min(self.max_length, max(self.min_length, 64))
        length = int(self.np_random.integers(self.min_length, high + 1))
        return "".join(self.np_random.choice(_SAMPLE_ALPHABET, size=length))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.max_length == other.max_length
            and self.min_length == other.min_length
        )

    def __hash__(self) -> int:
        return hash((UnicodeText, self.min_length, self.max_length))


# -- Gymnasium vector utilities: one row of max_length + 1 int32 per env (length, code points).


@create_shared_memory.register(UnicodeText)
def _create_shared(space: UnicodeText, n: int = 1, ctx: ModuleType = mp) -> Any:
    return ctx.Array(np.dtype(np.int32).char, n * (space.max_length + 1))


class SharedTextView(Sequence[str]):
    """A live, read-only view of the strings in a shared-memory buffer.

    ``AsyncVectorEnv`` reads its observation buffer once and then hands out
    ``deepcopy(view)``; decoding on access keeps the view current, and ``deepcopy`` gives a
    plain tuple of strings, which is what users receive.
    """

    def __init__(self, space: UnicodeText, shared_memory: Any, n: int) -> None:
        self._rows = np.frombuffer(shared_memory.get_obj(), dtype=np.int32).reshape(n, space.max_length + 1)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self)[index]
        row = self._rows[index]
        return row[1 : 1 + row[0]].astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: Any) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, Sequence) else NotImplemented

    def __repr__(self) -> str:
        return f"SharedTextView({tuple(self)!r})"


@read_from_shared_memory.register(UnicodeText)
def _read_shared(space: UnicodeText, shared_memory: Any, n: int = 1) -> SharedTextView:
    return SharedTextView(space, shared_memory, n)


@write_to_shared_memory.register(UnicodeText)
def _write_shared(space: UnicodeText, index: int, values: str, shared_memory: Any) -> None:
    size = space.max_length + 1
    codes = np.frombuffer(values.encode("utf-32-le", "surrogatepass"), dtype=np.int32)
    destination = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)
    destination[index * size] = len(codes)
    destination[index * size + 1 : index * size + 1 + len(codes)] = codes


@create_empty_array.register(UnicodeText)
def _create_empty(space: UnicodeText, n: int = 1, fn: Any = np.zeros) -> tuple[str, ...]:
    return tuple("" for _ in range(n))
