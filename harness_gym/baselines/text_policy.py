"""A small torch text policy that scores legal action texts, trained GRPO-style.

The policy reads what a language model would read: the observation text as the harness
rendered it, and each legal action as the harness writes it. It gives every candidate action a
score, and the policy is the softmax over the legal candidates (like a language model scoring
candidate completions). :meth:`TextPolicy.log_probs` exposes those log-probabilities.

Model (``TextPolicy``), per state:

1. Observation tokens (hashed ids, see :mod:`harness_gym.wrappers.encoding`) get a token
   embedding, a learned absolute position embedding and a "this word occurs twice" flag, then a
   stack of residual dilated 1-D convolutions gives each position a local context ``H``.
2. Each action's word tokens look themselves up in the observation (exact token match, a
   learned gate per action token decides which lookups count): the action's *context* is the
   gated mean of ``H`` over matching positions. This is how ``click(ref=4)`` finds what element
   4 is, and ``type(text="Saddle")`` finds that the instruction names ``Saddle``.
3. A small MLP scores ``[mean(H), mean(action token embeddings), context, log(1 + matches)]``.
   Its last layer starts at zero, so an untrained policy is exactly uniform over legal actions.

Training (``TextPolicyGRPOTrainer``), one iteration, CleanRL style:

1. Draw ``instances`` task instances (episode seeds). Play ``group_size`` episodes of each under
   each training harness, sampling from the current policy (all in lockstep, batched).
2. Group the episodes (``within``: same task instance and harness; ``cross``: same task
   instance, every harness) and give each episode the group-relative advantage
   ``(R - mean_group) / (std_group + eps)``; every step of the episode shares it.
3. A few epochs of minibatch updates of the clipped surrogate
   ``-min(r A, clip(r, 1-eps, 1+eps) A) + beta KL(pi || pi_ref)`` where ``r`` is the
   probability ratio to the sampling policy and the KL to the frozen reference policy (the
   policy at the start of training) is computed exactly over the legal actions.

A "task" in the grouping rule is a task *instance*: task id plus episode seed. Paired episodes
(DESIGN.md, contract 1) make the same instance under every harness, which is what lets
``cross`` groups compare harnesses on the same problem.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from harness_gym.core.env import unwrap_harness_env
from harness_gym.progress import progress_bar
from harness_gym.wrappers.encoding import repeated_words, token_codes, tokenize

GROUPINGS = ("within", "cross")


# -- encoding -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextPolicyConfig:
    """Sizes of the text policy (saved with it)."""

    vocab_size: int = 8192
    max_obs_tokens: int = 512
    max_action_tokens: int = 48
    dim: int = 48
    hidden: int = 96
    kernel_size: int = 3
    dilations: tuple[int, ...] = (1, 2, 4, 8, 16)
    #: Self-attention layers over the observation's tokens before the convolutions (0: none, the
    #: policy of earlier releases). A position attends to the *other* positions (itself masked),
    #: so it can learn "my word also stands there" (the link whose text the instruction quotes)
    #: beyond the convolutions' reach; positions stay in the input, so the layout still matters.
    attention_layers: int = 0
    attention_heads: int = 4

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["dilations"] = list(self.dilations)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TextPolicyConfig:
        data = dict(data)
        if "dilations" in data:
            data["dilations"] = tuple(data["dilations"])
        return cls(**data)


@dataclass
class EncodedState:
    """One (observation, legal actions) pair as arrays.

    ``pairs`` holds one row ``(action k, action token t, observation position l, weight)`` per
    exact match of a word token of action ``k`` in the observation; the weight is
    ``1 / occurrences`` so a token that occurs everywhere (``ref``) spreads its lookup thin.
    """

    obs_ids: np.ndarray  # (L,) int64
    obs_dup: np.ndarray  # (L,) int64 in {0, 1}
    act_ids: np.ndarray  # (K, T) int64, 0 = padding
    pairs: np.ndarray  # (P, 3) int64: k, t, l
    pair_w: np.ndarray  # (P,) float32


class _Tokens:
    """Hashed ids of one text, with word flags (cached per text)."""

    __slots__ = ("ids", "dup", "word", "positions")

    def __init__(self, text: str, vocab: int, limit: int, observation: bool) -> None:
        codes = token_codes(tokenize(text)[:limit])
        self.ids = 1 + (codes & 0xFFFFFFFF) % (vocab - 1)
        self.word = ((codes >> 32) & 1).astype(bool).tolist()
        self.dup = repeated_words(codes).astype(np.int64) if observation else None
        self.positions: dict[int, list[int]] | None = None
        if observation:
            positions: dict[int, list[int]] = {}
            for pos, tid in enumerate(self.ids.tolist()):
                positions.setdefault(tid, []).append(pos)
            self.positions = positions


class _Cache:
    """A bounded text -> tokens cache (cleared when full; observations repeat within a group)."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self.data: dict[tuple[str, bool], _Tokens] = {}

    def get(self, text: str, config: TextPolicyConfig, observation: bool) -> _Tokens:
        key = (text, observation)
        item = self.data.get(key)
        if item is None:
            if len(self.data) >= self.limit:
                self.data.clear()
            limit = config.max_obs_tokens if observation else config.max_action_tokens
            item = _Tokens(text, config.vocab_size, limit, observation)
            self.data[key] = item
        return item


def encode_state(
    observation: str, legal_actions: Sequence[str], config: TextPolicyConfig, cache: _Cache | None = None
) -> EncodedState:
    """Tokenize one state for :class:`TextPolicy` (see :class:`EncodedState`)."""
    if not isinstance(observation, str):
        raise TypeError(f"observation must be the rendered text (a str), got {type(observation).__name__}")
    if isinstance(legal_actions, str) or not all(isinstance(a, str) for a in legal_actions):
        raise TypeError("legal_actions must be a sequence of action texts (str), as in info['legal_actions']")
    if not legal_actions:
        raise ValueError("a state needs at least one legal action to score")
    cache = cache or _Cache()
    obs = cache.get(observation, config, observation=True)
    acts = [cache.get(a, config, observation=False) for a in legal_actions]
    width = max([1, *(len(a.ids) for a in acts)])
    act_ids = np.zeros((len(acts), width), dtype=np.int64)
    rows: list[tuple[int, int, int]] = []
    weights: list[float] = []
    assert obs.positions is not None
    for k, act in enumerate(acts):
        act_ids[k, : len(act.ids)] = act.ids
        for t, (tid, is_word) in enumerate(zip(act.ids.tolist(), act.word)):
            if not is_word:
                continue
            found = obs.positions.get(tid)
            if found:
                w = 1.0 / len(found)
                rows.extend((k, t, pos) for pos in found)
                weights.extend([w] * len(found))
    pairs = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
    assert obs.dup is not None
    return EncodedState(obs.ids, obs.dup, act_ids, pairs, np.asarray(weights, dtype=np.float32))


def collate(states: Sequence[EncodedState]) -> dict[str, torch.Tensor]:
    """Pad a list of states into batch tensors for :meth:`TextPolicy.forward`."""
    n = len(states)
    length = max([1, *(len(s.obs_ids) for s in states)])
    kmax = max(s.act_ids.shape[0] for s in states)
    tmax = max(s.act_ids.shape[1] for s in states)
    obs_ids = np.zeros((n, length), dtype=np.int64)
    obs_dup = np.zeros((n, length), dtype=np.int64)
    act_ids = np.zeros((n, kmax, tmax), dtype=np.int64)
    act_mask = np.zeros((n, kmax), dtype=bool)
    pair_act, pair_obs, pair_w = [], [], []
    for b, s in enumerate(states):
        obs_ids[b, : len(s.obs_ids)] = s.obs_ids
        obs_dup[b, : len(s.obs_dup)] = s.obs_dup
        k, t = s.act_ids.shape
        act_ids[b, :k, :t] = s.act_ids
        act_mask[b, :k] = True
        if len(s.pairs):
            pair_act.append((b * kmax + s.pairs[:, 0]) * tmax + s.pairs[:, 1])
            pair_obs.append(b * length + s.pairs[:, 2])
            pair_w.append(s.pair_w)
    empty = np.zeros(0, dtype=np.int64)
    return {
        "obs_ids": torch.from_numpy(obs_ids),
        "obs_dup": torch.from_numpy(obs_dup),
        "act_ids": torch.from_numpy(act_ids),
        "act_mask": torch.from_numpy(act_mask),
        "pair_act": torch.from_numpy(np.concatenate(pair_act) if pair_act else empty),
        "pair_obs": torch.from_numpy(np.concatenate(pair_obs) if pair_obs else empty),
        "pair_w": torch.from_numpy(np.concatenate(pair_w) if pair_w else np.zeros(0, np.float32)),
    }


# -- model ----------------------------------------------------------------------------------


class TextPolicy(nn.Module):
    """Scores each legal action text given the observation text (see the module docstring)."""

    def __init__(self, config: TextPolicyConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or TextPolicyConfig()
        d = config.dim
        self.tok = nn.Embedding(config.vocab_size, d, padding_idx=0)
        self.pos = nn.Embedding(config.max_obs_tokens, d)
        self.dup = nn.Embedding(2, d)
        for emb in (self.tok, self.pos, self.dup):
            nn.init.normal_(emb.weight, std=d**-0.5 * 2)
        with torch.no_grad():
            self.tok.weight[0].zero_()
        self.convs = nn.ModuleList(
            nn.Conv1d(d, d, config.kernel_size, dilation=r, padding=r * (config.kernel_size - 1) // 2)
            for r in config.dilations
        )
        self.attention = nn.ModuleList(
            nn.MultiheadAttention(d, config.attention_heads, batch_first=True)
            for _ in range(config.attention_layers)
        )
        self.attention_norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(config.attention_layers))
        self.gate = nn.Linear(d, 1)
        self.head = nn.Sequential(nn.Linear(3 * d + 1, config.hidden), nn.GELU(), nn.Linear(config.hidden, 1))
        nn.init.zeros_(self.head[-1].weight)
        nn.init.zeros_(self.head[-1].bias)
        self._cache = _Cache()
        self.metadata: dict[str, Any] = {}

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Logits ``(B, K)`` over padded action slots; padding slots are ``-inf``."""
        obs_ids, act_ids, act_mask = batch["obs_ids"], batch["act_ids"], batch["act_mask"]
        n, length = obs_ids.shape
        kmax, tmax = act_ids.shape[1], act_ids.shape[2]
        obs_mask = (obs_ids > 0).unsqueeze(-1).float()  # (B, L, 1)
        positions = torch.arange(length, device=obs_ids.device).clamp(max=self.config.max_obs_tokens - 1)
        x = (self.tok(obs_ids) + self.pos(positions) + self.dup(batch["obs_dup"])) * obs_mask
        if len(self.attention):
            x = self._attend(x, obs_ids > 0) * obs_mask
        h = x.transpose(1, 2)
        mask_t = obs_mask.transpose(1, 2)
        for conv in self.convs:
            h = h + nn.functional.gelu(conv(h)) * mask_t
        hidden = h.transpose(1, 2)  # (B, L, d)
        summary = hidden.sum(1) / obs_mask.sum(1).clamp(min=1.0)  # (B, d)

        emb = self.tok(act_ids)  # (B, K, T, d); padding rows are zero
        tok_mask = (act_ids > 0).unsqueeze(-1).float()
        bag = emb.sum(2) / tok_mask.sum(2).clamp(min=1.0)  # (B, K, d)
        gate = torch.sigmoid(self.gate(emb)).reshape(-1)  # (B*K*T,)
        weight = gate[batch["pair_act"]] * batch["pair_w"]
        slot = batch["pair_act"] // tmax  # flat (b, k)
        context = torch.zeros(n * kmax, hidden.shape[-1], dtype=hidden.dtype, device=hidden.device)
        context = context.index_add(
            0, slot, weight.unsqueeze(-1) * hidden.reshape(n * length, -1)[batch["pair_obs"]]
        )
        mass = torch.zeros(n * kmax, dtype=hidden.dtype, device=hidden.device).index_add(0, slot, weight)
        context = (context / (1.0 + mass).unsqueeze(-1)).reshape(n, kmax, -1)
        features = torch.cat(
            [summary.unsqueeze(1).expand(n, kmax, -1), bag, context, torch.log1p(mass).reshape(n, kmax, 1)],
            -1,
        )
        logits = self.head(features).squeeze(-1)
        return logits.masked_fill(~act_mask, float("-inf"))

    def _attend(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Residual self-attention over the valid positions; a position's own key is damped
        (not removed: a one-token observation still has a key), so it looks for its word elsewhere."""
        length = x.shape[1]
        own = torch.eye(length, dtype=x.dtype, device=x.device) * -1e4
        padding = torch.zeros(valid.shape, dtype=x.dtype, device=x.device).masked_fill(~valid, float("-inf"))
        for attn, norm in zip(self.attention, self.attention_norms):
            y = norm(x)
            out, _ = attn(y, y, y, key_padding_mask=padding, attn_mask=own, need_weights=False)
            x = x + torch.nan_to_num(out)  # an empty observation: every key is padding
        return x

    # -- the API the analysis and agents use ---------------------------------------------

    def encode(self, observation: str, legal_actions: Sequence[str]) -> EncodedState:
        return encode_state(observation, legal_actions, self.config, self._cache)

    def log_probs_batch(
        self, states: Sequence[tuple[str, Sequence[str]]] | Sequence[EncodedState]
    ) -> list[np.ndarray]:
        """Log-probabilities of every legal action for many ``(observation, legal_actions)``."""
        encoded = [s if isinstance(s, EncodedState) else self.encode(*s) for s in states]
        if not encoded:
            return []
        with torch.no_grad():
            logp = torch.log_softmax(self(collate(encoded)), dim=-1).double().numpy()
        return [row[: s.act_ids.shape[0]] for row, s in zip(logp, encoded)]

    def log_probs(self, observation: str, legal_actions: Sequence[str]) -> np.ndarray:
        """``log pi(a | observation)`` for each text in ``legal_actions`` (float64, sums to 1 in exp)."""
        return self.log_probs_batch([(observation, legal_actions)])[0]

    # -- persistence ---------------------------------------------------------------------

    def save(self, path: str | Path, metadata: Mapping[str, Any] | None = None) -> Path:
        """Write weights and config to ``path`` (a ``.pt`` file); ``metadata`` rides along."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(
            {
                "config": self.config.to_dict(),
                "state_dict": self.state_dict(),
                "metadata": dict(metadata or {}),
            },
            path,
        )
        return path

    @classmethod
    def load(cls, path: str | Path) -> TextPolicy:
        blob = torch.load(Path(path), map_location="cpu", weights_only=True)
        policy = cls(TextPolicyConfig.from_dict(blob["config"]))
        policy.load_state_dict(blob["state_dict"])
        policy.metadata = blob.get("metadata", {})
        return policy


def masked_log_softmax(logits: torch.Tensor) -> torch.Tensor:
    """Log-softmax over legal slots; padding slots (``-inf`` logits) get log-prob 0 to stay finite."""
    logp = torch.log_softmax(logits, dim=-1)
    return torch.where(torch.isfinite(logits), logp, torch.zeros_like(logp))


def kl_to_reference(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Exact ``KL(pi || pi_ref)`` per state over the legal slots (``mask``); shape ``(B,)``.

    Zero exactly when the two distributions agree on every legal action, positive otherwise.
    """
    p = torch.where(mask, logp.exp(), torch.zeros_like(logp))
    diff = torch.where(mask, logp - ref_logp, torch.zeros_like(logp))
    return (p * diff).sum(-1)


# -- grouping and advantages ---------------------------------------------------------------


def group_key(task_id: str, seed: int, harness_id: str, grouping: str) -> tuple[Any, ...]:
    """The group of an episode: ``within`` keys on (task, seed, harness), ``cross`` on (task, seed)."""
    if grouping == "within":
        return (task_id, int(seed), harness_id)
    if grouping == "cross":
        return (task_id, int(seed))
    raise ValueError(f"unknown grouping {grouping!r}; choose one of {list(GROUPINGS)}")


def make_groups(episodes: Sequence[Mapping[str, Any]], grouping: str) -> dict[tuple[Any, ...], list[int]]:
    """Indices of ``episodes`` (dicts with ``task_id``, ``seed``, ``harness_id``) per group."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, ep in enumerate(episodes):
        groups.setdefault(group_key(ep["task_id"], ep["seed"], ep["harness_id"], grouping), []).append(i)
    return groups


def group_advantages(
    returns: Sequence[float], groups: Mapping[Any, Sequence[int]], eps: float = 1e-6
) -> np.ndarray:
    """GRPO advantages ``(R - mean) / (std + eps)`` within each group (0 when a group agrees)."""
    returns_arr = np.asarray(returns, dtype=np.float64)
    adv = np.zeros_like(returns_arr)
    for members in groups.values():
        idx = np.asarray(members, dtype=np.int64)
        r = returns_arr[idx]
        adv[idx] = (r - r.mean()) / (r.std() + eps)
    return adv


# -- rollouts -------------------------------------------------------------------------------


@dataclass
class Episode:
    """One played episode: its identity, return, and the steps' training data."""

    task_id: str
    harness_id: str
    seed: int
    episode_return: float = 0.0
    success: bool = False
    states: list[EncodedState] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    ref_logp: list[np.ndarray] = field(default_factory=list)


def play(
    policy: TextPolicy,
    jobs: Sequence[tuple[gym.Env, int]],
    *,
    greedy: bool = False,
    generator: torch.Generator | None = None,
    reference: TextPolicy | None = None,
    record: bool = False,
) -> list[Episode]:
    """Play one episode per ``(env, seed)`` job in lockstep, batching the policy over envs.

    Every env must be a distinct object. ``record=True`` keeps each step's encoded state,
    action, sampling log-prob and (with ``reference``) the reference log-probs, for training.
    """
    if len({id(env) for env, _ in jobs}) != len(jobs):
        raise ValueError("play() needs one distinct env object per job")
    episodes: list[Episode] = []
    current: list[tuple[str, list[str]]] = []
    for env, seed in jobs:
        obs, info = env.reset(seed=int(seed))
        episodes.append(Episode(info["task_id"], info["harness_id"], int(seed)))
        current.append((obs, list(info["legal_actions"])))
    active = list(range(len(jobs)))
    while active:
        encoded = [policy.encode(*current[i]) for i in active]
        batch = collate(encoded)
        with torch.no_grad():
            logp = masked_log_softmax(policy(batch))
            if greedy:
                choice = logp.masked_fill(~batch["act_mask"], float("-inf")).argmax(-1)
            else:
                probs = torch.where(batch["act_mask"], logp.exp(), torch.zeros_like(logp))
                choice = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
            ref = masked_log_softmax(reference(batch)) if (record and reference is not None) else None
        still = []
        for row, i in enumerate(active):
            env = jobs[i][0]
            ep = episodes[i]
            a = int(choice[row])
            if record:
                k = encoded[row].act_ids.shape[0]
                ep.states.append(encoded[row])
                ep.actions.append(a)
                ep.logp.append(float(logp[row, a]))
                ep.ref_logp.append(
                    ref[row, :k].numpy().copy() if ref is not None else np.full(k, -math.log(k))
                )
            obs, reward, terminated, truncated, info = env.step(current[i][1][a])
            ep.episode_return += float(reward)
            ep.success = bool(info["success"])
            if terminated or truncated:
                continue
            legal = list(info["legal_actions"])
            if not legal:  # nothing left to do: end the episode here
                continue
            current[i] = (obs, legal)
            still.append(i)
        active = still
    return episodes


def success_rate(
    policy: TextPolicy, env_factory: Callable[[], gym.Env], seeds: Iterable[int], batch: int = 128
) -> float:
    """Greedy success rate over ``seeds`` (one fresh env per concurrent episode)."""
    seeds = [int(s) for s in seeds]
    envs = [env_factory() for _ in range(min(batch, len(seeds)))]
    wins = 0
    for start in range(0, len(seeds), len(envs)):
        chunk = seeds[start : start + len(envs)]
        wins += sum(ep.success for ep in play(policy, list(zip(envs, chunk)), greedy=True))
    for env in envs:
        env.close()
    return wins / max(1, len(seeds))


# -- GRPO trainer ---------------------------------------------------------------------------


@dataclass
class TextPolicyGRPOConfig:
    """Hyperparameters of :class:`TextPolicyGRPOTrainer` (defaults train EnterText in about a minute)."""

    iterations: int = 30
    instances: int = 16  # task instances (episode seeds) per iteration
    group_size: int = 8  # episodes per (instance, harness)
    grouping: str = "within"
    epochs: int = 2
    minibatch_size: int = 256
    learning_rate: float = 3e-3
    clip: float = 0.2
    beta: float = 0.01  # KL penalty coefficient
    max_grad_norm: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.grouping not in GROUPINGS:
            raise ValueError(f"unknown grouping {self.grouping!r}; choose one of {list(GROUPINGS)}")


#: Training seeds are drawn from here; evaluation conventionally uses small seeds 0, 1, 2, ...
TRAIN_SEED_RANGE = (1_000_000, 2**31 - 1)


class TextPolicyGRPOTrainer:
    """Clipped policy-gradient training of a :class:`TextPolicy` with group-relative advantages.

    Args:
        policy: the policy to train (in place).
        env_factories: one zero-argument env constructor per training harness, all for the
            same task (e.g. ``lambda: make_env("EnterText", "Json")``).
        config: hyperparameters; ``config.grouping`` picks ``within`` or ``cross`` groups.
        reference: the frozen reference policy of the KL term; defaults to a copy of
            ``policy`` as given (an untrained policy is uniform over legal actions).
    """

    def __init__(
        self,
        policy: TextPolicy,
        env_factories: Sequence[Callable[[], gym.Env]],
        config: TextPolicyGRPOConfig | None = None,
        reference: TextPolicy | None = None,
    ) -> None:
        if not env_factories:
            raise ValueError(
                "TextPolicyGRPOTrainer needs at least one env factory (one per training harness)"
            )
        self.policy = policy
        self.config = config = config or TextPolicyGRPOConfig()
        self.reference = reference if reference is not None else copy.deepcopy(policy)
        self.reference.eval()
        for p in self.reference.parameters():
            p.requires_grad_(False)
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
        self.rng = np.random.default_rng(config.seed)
        self.generator = torch.Generator().manual_seed(config.seed)
        n = config.instances * config.group_size
        self.envs = [[factory() for _ in range(n)] for factory in env_factories]
        tasks = {unwrap_harness_env(pool[0], "the text policy").task.task_id for pool in self.envs}
        if len(tasks) != 1:
            raise ValueError(f"all training envs must present the same task, got {sorted(tasks)}")
        self.history: list[dict[str, float]] = []

    def collect(self) -> list[Episode]:
        """Play ``group_size`` episodes per (instance, harness) for fresh instance seeds."""
        cfg = self.config
        seeds = self.rng.integers(*TRAIN_SEED_RANGE, size=cfg.instances)
        jobs = []
        for pool in self.envs:
            for j, env in enumerate(pool):
                jobs.append((env, int(seeds[j // cfg.group_size])))
        return play(self.policy, jobs, generator=self.generator, reference=self.reference, record=True)

    def update(self, episodes: Sequence[Episode]) -> dict[str, float]:
        """Group-relative advantages, then ``epochs`` passes of clipped-surrogate minibatch updates."""
        cfg = self.config
        groups = make_groups([vars(ep) for ep in episodes], cfg.grouping)
        adv_ep = group_advantages([ep.episode_return for ep in episodes], groups)
        states, actions, old_logp, ref_logp, adv = [], [], [], [], []
        for ep, a in zip(episodes, adv_ep):
            states.extend(ep.states)
            actions.extend(ep.actions)
            old_logp.extend(ep.logp)
            ref_logp.extend(ep.ref_logp)
            adv.extend([a] * len(ep.states))
        n = len(states)
        stats = {"pg_loss": 0.0, "kl": 0.0, "clip_frac": 0.0}
        updates = 0
        for _ in range(cfg.epochs):
            order = self.rng.permutation(n)
            for start in range(0, n, cfg.minibatch_size):
                idx = order[start : start + cfg.minibatch_size]
                batch = collate([states[i] for i in idx])
                mask = batch["act_mask"]
                ref = torch.zeros(mask.shape, dtype=torch.float32)
                for row, i in enumerate(idx):
                    ref[row, : len(ref_logp[i])] = torch.from_numpy(ref_logp[i])
                b_act = torch.as_tensor([actions[i] for i in idx])
                b_old = torch.as_tensor([old_logp[i] for i in idx], dtype=torch.float32)
                b_adv = torch.as_tensor([adv[i] for i in idx], dtype=torch.float32)

                logp = masked_log_softmax(self.policy(batch))
                new = logp.gather(1, b_act.unsqueeze(1)).squeeze(1)
                ratio = (new - b_old).exp()
                pg_loss = torch.max(-b_adv * ratio, -b_adv * ratio.clamp(1 - cfg.clip, 1 + cfg.clip)).mean()
                kl = kl_to_reference(logp, ref, mask).mean()
                loss = pg_loss + cfg.beta * kl

                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                stats["pg_loss"] += pg_loss.item()
                stats["kl"] += kl.item()
                stats["clip_frac"] += float(((ratio - 1).abs() > cfg.clip).float().mean())
                updates += 1
        return {k: v / max(1, updates) for k, v in stats.items()} | {"steps": float(n)}

    def train(
        self, iterations: int | None = None, progress: bool = False, log: Any = None
    ) -> list[dict[str, float]]:
        """Run ``iterations`` collect-and-update rounds; return one stats row per iteration
        (each also sent to ``log``, a :class:`harness_gym.logging_backends.RunLog`, if given)."""
        total = self.config.iterations if iterations is None else iterations
        bar = progress_bar(total, "grpo", unit="it", enabled=progress)
        for _ in range(total):
            start = time.perf_counter()
            self.policy.eval()
            episodes = self.collect()
            self.policy.train()
            stats = self.update(episodes)
            self.policy.eval()
            row = {
                "iteration": float(len(self.history)),
                "train_success": float(np.mean([ep.success for ep in episodes])),
                "train_return": float(np.mean([ep.episode_return for ep in episodes])),
                **stats,
                "seconds": time.perf_counter() - start,
            }
            self.history.append(row)
            if log is not None:
                log.log(row, step=len(self.history) - 1)
            if bar is not None:
                bar.set_postfix(success=f"{row['train_success']:.2f}", kl=f"{row['kl']:.3f}")
                bar.update(1)
        if bar is not None:
            bar.close()
        return self.history


# -- agent adapter ----------------------------------------------------------------------------


class TextPolicyAgent:
    """The Agent protocol over a :class:`TextPolicy`: greedy (default) or sampled choices."""

    name = "text_policy"

    def __init__(self, policy: TextPolicy, greedy: bool = True, seed: int | None = None) -> None:
        self.policy = policy
        self.greedy = greedy
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        legal = list(info.get("legal_actions") or [])
        if not legal:
            return ""
        logp = self.policy.log_probs(observation, legal)
        if self.greedy:
            return legal[int(np.argmax(logp))]
        p = np.exp(logp - logp.max())
        return legal[int(self.rng.choice(len(legal), p=p / p.sum()))]


def save_run(
    policy: TextPolicy,
    out_dir: str | Path,
    *,
    task_id: str,
    harnesses: Sequence[Mapping[str, Any]],
    config: TextPolicyGRPOConfig,
    history: Sequence[Mapping[str, float]] = (),
    tuned_source: str = "",
) -> Path:
    """Save a trained policy with what it was trained under (``policy.pt`` + ``run.json``);
    ``tuned_source`` names the tuned entry its defaults came from (:mod:`.tuned`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "algo": "text_policy",
        "task_id": task_id,
        "harnesses": [dict(h) for h in harnesses],
        "grpo": asdict(config),
        "policy": policy.config.to_dict(),
        "tuned_source": tuned_source,
    }
    policy.save(out / "policy.pt", meta)
    (out / "run.json").write_text(json.dumps({**meta, "history": list(history)}, indent=2))
    return out


#: Old names, which read as TRL's ``GRPOConfig`` / ``GRPOTrainer`` (a different trainer, used by
#: :mod:`harness_gym.train`); they still resolve, with a DeprecationWarning, for one release.
_DEPRECATED_NAMES = {"GRPOConfig": "TextPolicyGRPOConfig", "GRPOTrainer": "TextPolicyGRPOTrainer"}


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED_NAMES:
        import warnings

        new = _DEPRECATED_NAMES[name]
        warnings.warn(
            f"harness_gym.baselines.text_policy.{name} is deprecated (it reads as TRL's {name}); use {new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[new]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
