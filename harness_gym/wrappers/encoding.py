"""Fixed-size numeric encodings of harness-rendered text, for policies that cannot read strings.

A language model reads the observation exactly as the harness writes it, so reordering fields
or restyling tools changes its input. The encodings here keep that property: they are built
from the rendered text's tokens *and their positions*, never from the task's fields.

* :func:`tokenize` splits text into word and punctuation tokens (case kept).
* :class:`HashedFeatures` turns a text into a ``float32`` vector of hashed binary features:
  ``(token, position)``, ``token`` alone, and ``(duplicate, position)`` marking word tokens
  that occur more than once in the text (the cheap analogue of an LM's copy/induction heads:
  it lets a linear layer notice that a page element repeats a word of the instruction).
* :func:`token_ids` and :func:`encode_actions` give padded arrays of hashed token ids, for
  models with embeddings (the torch text policy) that score each legal action's text.
* :class:`TextEncoder` is the observation wrapper: ``Box(0, 1, (dim,), float32)``.

Hashes are stable across processes (CRC32, not Python's salted ``hash``), so a saved model
sees the same features after a restart.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

import gymnasium as gym
import numpy as np

#: Word tokens (letters, digits, underscore) and single punctuation characters.
TOKEN_PATTERN = re.compile(r"\w+|\S")  # the same as \w+|[^\w\s], and faster
#: Token id 0 is padding in :func:`token_ids`; hashed ids fall in ``1 .. vocab_size - 1``.
PAD_ID = 0

_CODES: dict[str, int] = {}
_ACTION_CODES: dict[str, frozenset[int]] = {}
_CACHE_LIMIT = 500_000
_LOW32 = 0xFFFFFFFF
# Odd multipliers that spread (token, position) pairs over the hash space.
_POS_MULT = 0x9E3779B1
_DUP_SALT = 0x5BD1E995
_UNI_SALT = 0x27D4EB2F
_SLOT_MULT = 0x85EBCA77


def tokenize(text: str) -> list[str]:
    """Split ``text`` into word tokens and single punctuation characters."""
    return TOKEN_PATTERN.findall(text)


def _new_code(token: str) -> int:
    if len(_CODES) >= _CACHE_LIMIT:
        _CODES.clear()
    is_word = token[0].isalnum() or token[0] == "_"
    code = zlib.crc32(token.encode("utf-8", "surrogatepass")) | (int(is_word) << 32)
    _CODES[token] = code
    return code


def _codes(tokens: Sequence[str]) -> list[int]:
    get = _CODES.get
    codes = [get(t) for t in tokens]
    if None in codes:
        codes = [_new_code(t) if c is None else c for c, t in zip(codes, tokens)]
    return codes


def token_codes(tokens: Sequence[str]) -> np.ndarray:
    """``int64`` codes of tokens: the low 32 bits are a stable hash (CRC32), bit 32 marks word tokens."""
    return np.array(_codes(tokens), dtype=np.int64)


def _action_codes(text: str) -> frozenset[int]:
    """The set of token codes of one action text (cached: menus repeat from step to step)."""
    codes = _ACTION_CODES.get(text)
    if codes is None:
        if len(_ACTION_CODES) >= _CACHE_LIMIT:
            _ACTION_CODES.clear()
        codes = _ACTION_CODES[text] = frozenset(_codes(tokenize(text)))
    return codes


def token_hash(token: str) -> int:
    """A stable 32-bit hash of a token (CRC32 of its UTF-8 bytes; cached)."""
    code = _CODES.get(token)
    return (code if code is not None else _new_code(token)) & _LOW32


def repeated_words(codes: np.ndarray) -> np.ndarray:
    """Which :func:`token_codes` are word tokens occurring more than once (sort-based: fast)."""
    order = np.argsort(codes, kind="stable")
    ranked = codes[order]
    same = ranked[1:] == ranked[:-1]
    repeated = np.zeros(len(codes), dtype=bool)
    repeated[1:] |= same
    repeated[:-1] |= same
    out = np.empty(len(codes), dtype=bool)
    out[order] = repeated
    return out & ((codes >> 32) & 1).astype(bool)


def duplicate_flags(tokens: Sequence[str]) -> np.ndarray:
    """For each token, whether it is a word token that occurs more than once in ``tokens``."""
    return repeated_words(token_codes(tokens))


def token_ids(text: str, vocab_size: int, max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Hashed ids (``int64`` in ``1 .. vocab_size-1``) and duplicate flags of the first tokens."""
    codes = token_codes(tokenize(text)[:max_tokens])
    return 1 + (codes & _LOW32) % (vocab_size - 1), repeated_words(codes)


def encode_actions(texts: Sequence[str], vocab_size: int, max_tokens: int) -> np.ndarray:
    """Hashed token ids of each action text, padded with 0: ``int64`` of shape ``(len(texts), T)``.

    ``T`` is the longest action's token count (at most ``max_tokens``, at least 1).
    """
    rows = [token_ids(t, vocab_size, max_tokens)[0] for t in texts]
    width = max([1, *(len(r) for r in rows)])
    out = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


@dataclass(frozen=True)
class HashedFeatures:
    """Hashed binary text features in a fixed-size vector.

    Attributes:
        dim: length of the feature vector (hash buckets).
        max_tokens: tokens beyond this are ignored.
        positional: add ``(token, position)`` features (what makes field order matter).
        unigrams: add position-free ``token`` features.
        duplicates: add ``(duplicate, position)`` features for repeated word tokens.
        menu_slots: also encode the first ``menu_slots`` legal actions as the harness writes
            them (0: the observation alone). See :meth:`encode`.
        menu_dim: hash buckets of the menu part, appended after the ``dim`` observation ones.
    """

    dim: int = 2048
    max_tokens: int = 512
    positional: bool = True
    unigrams: bool = True
    duplicates: bool = True
    menu_slots: int = 0
    menu_dim: int = 1024

    def __post_init__(self) -> None:
        if self.dim < 8 or self.max_tokens < 1:
            raise ValueError(f"need dim >= 8 and max_tokens >= 1, got {self.dim}, {self.max_tokens}")
        if self.menu_slots < 0 or (self.menu_slots and self.menu_dim < 8):
            raise ValueError(
                f"need menu_slots >= 0 and menu_dim >= 8, got {self.menu_slots}, {self.menu_dim}"
            )

    @property
    def size(self) -> int:
        """Length of the feature vector: ``dim``, plus ``menu_dim`` when the menu is encoded."""
        return self.dim + (self.menu_dim if self.menu_slots else 0)

    @property
    def space(self) -> gym.spaces.Box:
        return gym.spaces.Box(0.0, 1.0, shape=(self.size,), dtype=np.float32)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def encode(self, text: str, actions: Sequence[str] | None = None) -> np.ndarray:
        """The feature vector of one text (``float32``, shape ``(size,)``, values 0 or 1).

        With ``menu_slots``, ``actions`` are the legal actions as the harness writes them, in
        menu order. Slot ``k`` adds ``(k, token)`` for the tokens that set its action apart from
        the other slots (what it does), and ``(k, position)`` for each observation position
        holding one of those tokens (what it refers to): a linear layer can then prefer the
        slot that types the word the instruction quotes, the way a language model copies it.
        """
        if not isinstance(text, str):
            raise TypeError(
                f"HashedFeatures.encode takes the observation text (a str), got {type(text).__name__}"
            )
        codes = token_codes(tokenize(text)[: self.max_tokens])
        hashes = codes & _LOW32
        parts = []
        if self.positional:
            parts.append((hashes ^ self._position_hash[: len(codes)]) % self.dim)
        if self.unigrams:
            parts.append((hashes ^ _UNI_SALT) % self.dim)
        if self.duplicates:
            parts.append(self._duplicate_index[: len(codes)][repeated_words(codes)])
        if self.menu_slots:
            if actions is None:
                raise TypeError("this HashedFeatures encodes the menu: pass the legal actions too")
            parts.append(np.array(self._menu_index(codes, actions), dtype=np.int64))
        out = np.zeros(self.size, dtype=np.float32)
        if parts:
            out[np.concatenate(parts)] = 1.0
        return out

    def _menu_index(self, codes: np.ndarray, actions: Sequence[str]) -> list[int]:
        """Feature indices of the menu part (see :meth:`encode`), offset by ``dim``."""
        slots = [_action_codes(a) for a in list(actions)[: self.menu_slots]]
        if not slots:
            return []
        common = frozenset.intersection(*slots) if len(slots) > 1 else frozenset()
        distinct = [slot - common for slot in slots]
        wanted = frozenset().union(*distinct)
        where: dict[int, list[int]] = {}
        for position, code in enumerate(codes.tolist()):
            if code in wanted:
                where.setdefault(code, []).append(position)
        dim, menu_dim, salts, positions = self.dim, self.menu_dim, self._slot_salt, self._position_list
        index = []
        for k, own in enumerate(distinct):
            salt = salts[k]
            for code in own:
                index.append(dim + ((code & _LOW32) ^ salt) % menu_dim)
                index += [dim + (positions[p] ^ salt ^ _DUP_SALT) % menu_dim for p in where.get(code, ())]
        return index

    @cached_property
    def _position_hash(self) -> np.ndarray:
        return (np.arange(self.max_tokens, dtype=np.int64) * _POS_MULT) & _LOW32

    @cached_property
    def _position_list(self) -> list[int]:
        return self._position_hash.tolist()

    @cached_property
    def _duplicate_index(self) -> np.ndarray:
        positions = np.arange(self.max_tokens, dtype=np.int64)
        return ((positions * _POS_MULT + _DUP_SALT) & _LOW32) % self.dim

    @cached_property
    def _slot_salt(self) -> list[int]:
        return [((k + 1) * _SLOT_MULT) & _LOW32 for k in range(self.menu_slots)]


class TextEncoder(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Replace the observation text with its :class:`HashedFeatures` vector.

    The raw text stays available as ``info["observation_text"]`` (after ``reset`` and ``step``)
    and as :attr:`last_text`, so text-reading agents and analyses can still see it. When the
    features encode the menu (``menu_slots``), the menu is ``info["legal_actions"]`` in order:
    the slots of :class:`~harness_gym.wrappers.DiscreteActions`.
    """

    def __init__(self, env: gym.Env, features: HashedFeatures | None = None, **kwargs: Any) -> None:
        if features is not None and kwargs:
            raise TypeError("pass either a HashedFeatures or its keyword arguments, not both")
        self.features = features or HashedFeatures(**kwargs)
        gym.utils.RecordConstructorArgs.__init__(self, features=self.features)
        gym.ObservationWrapper.__init__(self, env)
        self.observation_space = self.features.space
        self.last_text = ""
        self._menu: list[str] = []

    def observation(self, observation: Any) -> np.ndarray:
        self.last_text = observation
        return self.features.encode(observation, self._menu if self.features.menu_slots else None)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        return self._encode(observation, info), info

    def step(self, action: Any) -> tuple[np.ndarray, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return self._encode(observation, info), reward, terminated, truncated, info

    def _encode(self, observation: str, info: dict[str, Any]) -> np.ndarray:
        info["observation_text"] = observation
        if self.features.menu_slots:
            if "legal_actions" not in info:
                raise KeyError(
                    "these features encode the menu, which is info['legal_actions']; "
                    "wrap a HarnessEnv (gym.make('harness_gym/...') or harness_gym.make_env)"
                )
            self._menu = info["legal_actions"]
        return self.observation(observation)
