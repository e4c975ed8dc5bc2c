"""DiscreteActions: a ``Discrete(K)`` menu over the legal actions as the harness writes them.

Index ``i`` sends the ``i``-th text of ``info["legal_actions"]`` to the wrapped env, so the
harness still parses it, exactly as it would parse a language model's output. Slots beyond the
current legal actions are padding. :meth:`DiscreteActions.action_masks` marks the real slots,
in sb3-contrib's MaskablePPO convention (a boolean array, ``True`` = allowed).

An index with no legal action behind it (a masked slot, or out of ``0 .. K-1``) never raises:
the wrapper sends the empty string, which every harness rejects as an ``empty`` action, so the
harness's invalid-action policy (``feedback``, ``end`` or ``ignore``) applies as it would to a
language model that replied with nothing. ``info["action_index"]`` and
``info["action_index_valid"]`` record what happened.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np

#: Default menu size: larger than any built-in task's legal action count.
DEFAULT_MAX_ACTIONS = 32
#: What a menu index with no legal action behind it sends: the harness rejects it as ``empty``.
INVALID_ACTION_TEXT = ""


class DiscreteActions(gym.ActionWrapper, gym.utils.RecordConstructorArgs):
    """Turn a text-action env into ``Discrete(max_actions)`` over its written legal actions.

    Args:
        env: an env whose ``info`` carries ``legal_actions`` (a HarnessEnv, possibly wrapped).
        max_actions: the menu size ``K``. Legal actions past the ``K``-th are unreachable
            (a warning says so once); ``info["legal_actions_dropped"]`` counts them.
    """

    def __init__(self, env: gym.Env, max_actions: int = DEFAULT_MAX_ACTIONS) -> None:
        if not isinstance(max_actions, int) or max_actions < 1:
            raise ValueError(f"max_actions must be a positive integer, got {max_actions!r}")
        gym.utils.RecordConstructorArgs.__init__(self, max_actions=max_actions)
        gym.ActionWrapper.__init__(self, env)
        self.max_actions = max_actions
        self.action_space = gym.spaces.Discrete(max_actions)
        self._legal: list[str] = []
        self._warned = False

    # -- Gymnasium API ---------------------------------------------------------------------

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        self._remember(info)
        return observation, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        index = _as_index(action)
        valid = 0 <= index < min(len(self._legal), self.max_actions)
        observation, reward, terminated, truncated, info = self.env.step(self.action(index))
        info["action_index"] = index
        info["action_index_valid"] = valid
        self._remember(info)
        return observation, reward, terminated, truncated, info

    def action(self, action: Any) -> str:
        """The text that menu index ``action`` sends (the empty string for an empty slot)."""
        index = _as_index(action)
        if 0 <= index < min(len(self._legal), self.max_actions):
            return self._legal[index]
        return INVALID_ACTION_TEXT

    # -- masks and menu --------------------------------------------------------------------

    def action_masks(self) -> np.ndarray:
        """Boolean mask of the menu slots that hold a legal action (MaskablePPO convention).

        When the env offers no legal action (only after the episode ended), every slot is
        allowed, so a masked softmax never divides by zero; any index then takes the harness's
        invalid-action route.
        """
        return legal_mask(len(self._legal), self.max_actions)

    def legal_action_texts(self) -> list[str]:
        """The menu: the current legal actions as the harness writes them (at most ``K``)."""
        return self._legal[: self.max_actions]

    def _remember(self, info: dict[str, Any]) -> None:
        legal = info.get("legal_actions")
        if legal is None:
            raise KeyError(
                "DiscreteActions needs info['legal_actions']; wrap a HarnessEnv "
                "(gym.make('harness_gym/...') or harness_gym.make_env)"
            )
        self._legal = list(legal)
        dropped = max(0, len(self._legal) - self.max_actions)
        info["legal_actions_dropped"] = dropped
        if dropped and not self._warned:
            self._warned = True
            warnings.warn(
                f"{len(self._legal)} legal actions exceed max_actions={self.max_actions}; the last "
                f"{dropped} are unreachable. Pass a larger max_actions.",
                RuntimeWarning,
                stacklevel=3,
            )


def legal_mask(n_legal: int, max_actions: int) -> np.ndarray:
    """The action mask for ``n_legal`` legal actions in a menu of ``max_actions`` slots."""
    if n_legal <= 0:
        return np.ones(max_actions, dtype=bool)
    mask = np.zeros(max_actions, dtype=bool)
    mask[: min(n_legal, max_actions)] = True
    return mask


def _as_index(action: Any) -> int:
    """An integer menu index from an int, a numpy integer or a one-element array."""
    if isinstance(action, (bool, np.bool_)) or isinstance(action, str):
        raise TypeError(
            f"DiscreteActions.step takes a menu index (an int), got {type(action).__name__}; "
            "send text to the unwrapped env instead"
        )
    array = np.asarray(action)
    if array.size != 1 or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(
            f"DiscreteActions.step takes one integer menu index, got {action!r} (dtype {array.dtype})"
        )
    return int(array.reshape(()))
