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
TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")
#: Token id 0 is padding in :func:`token_ids`; hashed ids fall in ``1 .. vocab_size - 1``.
PAD_ID = 0

_CODES: dict[str, int] = {}
_CACHE_LIMIT = 500_000
_LOW32 = 0xFFFFFFFF
# Odd multipliers that spread (token, position) pairs over the hash space.
_POS_MULT = 0x9E3779B1
_DUP_SALT = 0x5BD1E995
_UNI_SALT = 0x27D4EB2F


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


def token_codes(tokens: Sequence[str]) -> np.ndarray:
    """``int64`` codes of tokens: the low 32 bits are a stable hash (CRC32), bit 32 marks word tokens."""
    get = _CODES.get
    codes = [get(t) for t in tokens]
    if None in codes:
        codes = [_new_code(t) if c is None else c for c, t in zip(codes, tokens)]
    return np.array(codes, dtype=np.int64)


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
    """

    dim: int = 2048
    max_tokens: int = 512
    positional: bool = True
    unigrams: bool = True
    duplicates: bool = True

    def __post_init__(self) -> None:
        if self.dim < 8 or self.max_tokens < 1:
            raise ValueError(f"need dim >= 8 and max_tokens >= 1, got {self.dim}, {self.max_tokens}")

    @property
    def space(self) -> gym.spaces.Box:
        return gym.spaces.Box(0.0, 1.0, shape=(self.dim,), dtype=np.float32)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def encode(self, text: str) -> np.ndarray:
        """The feature vector of one text (``float32``, shape ``(dim,)``, values 0 or 1)."""
        if not isinstance(text, str):
            raise TypeError(
                f"HashedFeatures.encode takes the observation text (a str), got {type(text).__name__}"
            )
        codes = token_codes(tokenize(text)[: self.max_tokens])
        out = np.zeros(self.dim, dtype=np.float32)
        n = len(codes)
        if n == 0:
            return out
        hashes = codes & _LOW32
        parts = []
        if self.positional:
            parts.append((hashes ^ self._position_hash[:n]) % self.dim)
        if self.unigrams:
            parts.append((hashes ^ _UNI_SALT) % self.dim)
        if self.duplicates:
            parts.append(self._duplicate_index[:n][repeated_words(codes)])
        if parts:
            out[np.concatenate(parts)] = 1.0
        return out

    @cached_property
    def _position_hash(self) -> np.ndarray:
        return (np.arange(self.max_tokens, dtype=np.int64) * _POS_MULT) & _LOW32

    @cached_property
    def _duplicate_index(self) -> np.ndarray:
        positions = np.arange(self.max_tokens, dtype=np.int64)
        return ((positions * _POS_MULT + _DUP_SALT) & _LOW32) % self.dim

    def encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.encode(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


class TextEncoder(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Replace the observation text with its :class:`HashedFeatures` vector.

    The raw text stays available as ``info["observation_text"]`` (after ``reset`` and ``step``)
    and as :attr:`last_text`, so text-reading agents and analyses can still see it.
    """

    def __init__(self, env: gym.Env, features: HashedFeatures | None = None, **kwargs: Any) -> None:
        if features is not None and kwargs:
            raise TypeError("pass either a HashedFeatures or its keyword arguments, not both")
        self.features = features or HashedFeatures(**kwargs)
        gym.utils.RecordConstructorArgs.__init__(self, features=self.features)
        gym.ObservationWrapper.__init__(self, env)
        self.observation_space = self.features.space
        self.last_text = ""

    def observation(self, observation: Any) -> np.ndarray:
        self.last_text = observation
        return self.features.encode(observation)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        info["observation_text"] = observation
        return self.observation(observation), info

    def step(self, action: Any) -> tuple[np.ndarray, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        info["observation_text"] = observation
        return self.observation(observation), reward, terminated, truncated, info
