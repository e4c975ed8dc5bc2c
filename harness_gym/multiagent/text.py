"""Text observations that PettingZoo's AEC checks accept.

PettingZoo's ``api_test`` compares every observation's ``dtype`` with its space's, and a
plain ``str`` has none. A :class:`TextObservation` is a ``str`` (it works wherever text does:
``json.dumps``, prompts, ``==``) that also says what it is to NumPy: a Python object. Its
space, :class:`ObjectText`, is :class:`~harness_gym.core.text_space.UnicodeText` with that dtype;
the multi-agent envs use it for actions too, and it can be iterated as a batch of texts (what
SuperSuit's vector envs do with a batch of actions).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector.utils import iterate

from harness_gym.core.text_space import UnicodeText


class TextObservation(str):
    """An observation text carrying ``dtype == np.dtype(object)``."""

    __slots__ = ()
    dtype = np.dtype(object)

    def __reduce__(self) -> tuple[Any, ...]:
        return (TextObservation, (str(self),))


class ObjectText(UnicodeText):
    """Any ``str`` up to ``max_length`` characters, declared as NumPy ``object`` dtype."""

    def __init__(self, max_length: int = 65536, min_length: int = 0, seed: Any = None) -> None:
        super().__init__(max_length, min_length, seed)
        self.dtype = np.dtype(object)

    def __repr__(self) -> str:
        return f"ObjectText(max_length={self.max_length})"


def text_observation(text: str) -> TextObservation:
    return text if isinstance(text, TextObservation) else TextObservation(text)


@iterate.register(ObjectText)
def _iterate(space: ObjectText, items: Any) -> Any:
    """A batch of texts (one per env) iterates text by text."""
    if isinstance(items, str):
        raise TypeError("a batch of texts is a sequence of str, one per env, not one str")
    return iter(items)
