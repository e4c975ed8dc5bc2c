"""TRL's ``rollout_func``: multi-turn harness episodes played with the trainer's own model.

:class:`HarnessRollout` is called by ``GRPOTrainer`` with the prompts of one generation
batch (each dataset row repeated ``num_generations`` times, in order). For each it plays one
episode of the row's task seed under the row's harness (``cross`` rows: the group's ``k``-th
completion under harness ``k mod H``), all episodes of the batch in flight at once: with the
trainer's own model every turn is one batched ``generate`` over the episodes still running;
with a generator that streams (:class:`StreamingGenerator`, such as a generation server
with continuous batching) each episode sends its next turn as soon as its reply is back.
It returns each episode as one token sequence (:mod:`~harness_gym.train.chat_tokens`) with
the env mask, and the episode's return, success, harness id, share of valid actions and
truncations as extra fields, which TRL hands to the reward functions (:mod:`~harness_gym.train.lm_rewards`).

The model sees the episode as a chat transcript (the harness's system prompt, its worked
examples as earlier turns, then alternating observations and replies) whatever the
harness's ``context`` factor says: training conditions on one growing sequence. Nothing the
model writes can stop training: a reply that does not parse is an invalid action the harness
handles, a reply that never ends is cut at ``max_reply_tokens`` (counted in
``reply_truncated``), and an episode that outgrows ``max_context_tokens`` ends there
(``context_truncated``) with the return it had.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import Harness
from harness_gym.llm.chat import Turn, chat_messages
from harness_gym.train.chat_tokens import ChatTokenizer, EpisodeTokens
from harness_gym.train.lm_dataset import EpisodeRow

#: ``generate(batch_of_input_ids) -> [(reply_ids, reply_logprobs), ...]``
Generator = Callable[[list[list[int]]], list[tuple[list[int], list[float]]]]
Reply = tuple[list[int], list[float]]


@runtime_checkable
class StreamingGenerator(Protocol):
    """A generator asked one sequence at a time, answering in its own time (a server).

    ``submit(input_ids, episode, turn)`` returns a future of ``(reply_ids, reply_logprobs)``;
    ``episode`` (the job's index) and ``turn`` let it seed each request, so an episode's
    replies do not depend on which others run beside it or on the order replies come back.
    """

    def submit(self, input_ids: list[int], episode: int, turn: int) -> Future[Reply]: ...


@dataclass
class RolloutConfig:
    """How episodes are played during training.

    Attributes:
        max_reply_tokens: most tokens per reply (a reply cut here counts in ``reply_truncated``).
        max_context_tokens: most tokens of an episode's sequence; an episode that would need
            more ends early (``context_truncated``). None: the model's own context length.
        temperature: sampling temperature of replies (0: greedy).
        top_p: nucleus sampling.
    """

    max_reply_tokens: int = 48
    max_context_tokens: int | None = 2048
    temperature: float = 1.0
    top_p: float = 1.0


@dataclass
class EpisodeOutcome:
    """One played episode: its token sequence and what happened."""

    tokens: EpisodeTokens
    harness_id: str
    seed: int
    episode_return: float = 0.0
    success: bool = False
    turns: int = 0
    valid_actions: int = 0
    reply_truncated: int = 0
    context_truncated: bool = False
    env_seconds: float = 0.0
    replies: list[str] = field(default_factory=list)

    @property
    def valid_action_rate(self) -> float:
        return self.valid_actions / self.turns if self.turns else 0.0


class EnvPool:
    """Reusable envs per (task, harness id): an episode takes one, and gives it back after."""

    def __init__(self, make: Callable[[str, Harness], HarnessEnv] | None = None) -> None:
        self._make = make or _make_env
        self._free: dict[tuple[str, str], list[HarnessEnv]] = {}

    def take(self, task: str, harness: Harness) -> HarnessEnv:
        free = self._free.setdefault((task, harness.id), [])
        return free.pop() if free else self._make(task, harness)

    def give_back(self, task: str, env: HarnessEnv) -> None:
        self._free.setdefault((task, env.harness.id), []).append(env)

    def close(self) -> None:
        for envs in self._free.values():
            for env in envs:
                env.close()
        self._free.clear()


def _make_env(task: str, harness: Harness) -> HarnessEnv:
    from harness_gym.core.registry import make_env

    return make_env(task, harness)


@dataclass
class _Running:
    env: HarnessEnv
    task: str
    outcome: EpisodeOutcome
    observation: str
    turns: list[Turn]
    tools: list | None
    done: bool = False


def play_episodes(
    jobs: Sequence[tuple[str, Harness, int]],
    chat: ChatTokenizer,
    generate: Generator | StreamingGenerator,
    config: RolloutConfig,
    pool: EnvPool | None = None,
    decode: Callable[[list[int]], str] | None = None,
) -> list[EpisodeOutcome]:
    """Play one episode per ``(task, harness, seed)`` job, all in flight at once.

    ``generate`` produces the replies of every running episode for one turn (the trainer's
    model in training; any scripted generator in tests), or, a :class:`StreamingGenerator`,
    one reply at a time, each episode going on as its own reply comes back. ``decode`` turns
    reply ids into the text the env parses (default: the tokenizer's decode without special
    tokens).
    """
    own_pool = pool is None
    pool = pool or EnvPool()
    decode = decode or (lambda ids: chat.tokenizer.decode(ids, skip_special_tokens=True))
    limit = config.max_context_tokens
    running: list[_Running] = []
    try:
        for task, harness, seed in jobs:
            start = time.perf_counter()
            env = pool.take(task, harness)
            observation, _ = env.reset(seed=seed)
            reset_seconds = time.perf_counter() - start
            tools = env.bound.openai_tools if harness.tool_channel == "native" else None
            messages = _messages(env, observation, [])
            tokens = EpisodeTokens(chat.prompt_ids(messages, tools))
            outcome = EpisodeOutcome(tokens, harness.id, seed, env_seconds=reset_seconds)
            running.append(_Running(env, task, outcome, observation, [], tools))
        if isinstance(generate, StreamingGenerator):
            _stream(running, chat, generate, config, decode)
            return [r.outcome for r in running]
        while True:
            active = [r for r in running if not r.done]
            for r in active:
                if limit is not None and len(r.outcome.tokens.ids) + config.max_reply_tokens > limit:
                    r.done = r.outcome.context_truncated = True
            active = [r for r in active if not r.done]
            if not active:
                break
            replies = generate([r.outcome.tokens.ids for r in active])
            for r, (reply_ids, logprobs) in zip(active, replies):
                _advance(r, reply_ids, logprobs, chat, decode, config)
    finally:
        for r in running:
            pool.give_back(r.task, r.env)
        if own_pool:
            pool.close()
    return [r.outcome for r in running]


def _stream(
    running: list[_Running],
    chat: ChatTokenizer,
    generate: StreamingGenerator,
    config: RolloutConfig,
    decode: Callable[[list[int]], str],
) -> None:
    """Each episode asks for its next reply when its last one is back (no turn barrier)."""
    limit = config.max_context_tokens
    pending: dict[Future[Reply], int] = {}

    def ask(i: int) -> None:
        r = running[i]
        if limit is not None and len(r.outcome.tokens.ids) + config.max_reply_tokens > limit:
            r.done = r.outcome.context_truncated = True
            return
        pending[generate.submit(list(r.outcome.tokens.ids), i, r.outcome.turns)] = i

    for i in range(len(running)):
        ask(i)
    while pending:
        done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
        for future in [f for f in pending if f in done]:
            i = pending.pop(future)
            reply_ids, logprobs = future.result()
            _advance(running[i], reply_ids, logprobs, chat, decode, config)
            if not running[i].done:
                ask(i)


def _messages(env: HarnessEnv, observation: str, turns: list[Turn]) -> list[dict[str, Any]]:
    transcript = env.harness.replace(context="transcript", history_window="all")
    return chat_messages(transcript, env.system_prompt, observation, turns, env.examples)


def _advance(
    r: _Running,
    reply_ids: list[int],
    logprobs: list[float],
    chat: ChatTokenizer,
    decode: Callable[[list[int]], str],
    config: RolloutConfig,
) -> None:
    """Step the env with one reply and append the reply (and the next observation) to the sequence."""
    from harness_gym.llm.transformers_backend import hermes_tool_calls

    out = r.outcome
    out.tokens.add_reply(reply_ids, logprobs)
    if not reply_ids or reply_ids[-1] != chat.eos_id:
        out.reply_truncated += 1
    text = decode(reply_ids)
    calls = hermes_tool_calls(text)[1] if r.tools else []
    call = calls[0] if calls else None
    # Several calls are written back together: the parser answers multiple_actions.
    action = "\n".join(r.env.bound.write_call(c.name, c.arguments) for c in calls) if calls else text
    start = time.perf_counter()
    observation, reward, terminated, truncated, info = r.env.step(action)
    out.env_seconds += time.perf_counter() - start
    out.turns += 1
    out.replies.append(action)
    out.valid_actions += info.get("error_kind") is None
    out.episode_return += float(reward)
    out.success = bool(info.get("success"))
    r.turns.append(Turn(r.observation, action, call))
    r.observation = observation
    if terminated or truncated:
        r.done = True
        return
    after = _messages(r.env, observation, r.turns)
    before = after[:-1]
    env_ids = chat.observation_ids(before, after, reply_ids, r.tools)
    if config.max_context_tokens is not None and (
        len(out.tokens.ids) + len(env_ids) + config.max_reply_tokens > config.max_context_tokens
    ):
        r.done = out.context_truncated = True
        return
    out.tokens.add_environment(env_ids)


def model_generator(model: Any, pad_id: int, eos_id: int, config: RolloutConfig) -> Generator:
    """A :data:`Generator` sampling from a transformers causal LM (left-padded batches).

    Log-probabilities are of the sampled token under the sampling distribution (the model's
    logits divided by the temperature), as vLLM reports them.
    """
    import torch

    def generate(batch: list[list[int]]) -> list[tuple[list[int], list[float]]]:
        width = max(len(ids) for ids in batch)
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for i, ids in enumerate(batch):
            input_ids[i, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention[i, width - len(ids) :] = 1
        device = next(model.parameters()).device
        sampled = config.temperature > 0
        kwargs: dict[str, Any] = {"do_sample": sampled}
        if sampled:
            kwargs.update(temperature=config.temperature, top_p=config.top_p, top_k=0)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                out = model.generate(
                    input_ids=input_ids.to(device),
                    attention_mask=attention.to(device),
                    max_new_tokens=config.max_reply_tokens,
                    pad_token_id=pad_id,
                    eos_token_id=eos_id,
                    use_cache=True,
                    output_logits=True,
                    return_dict_in_generate=True,
                    **kwargs,
                )
        finally:
            model.train(was_training)
        new = out.sequences[:, width:].cpu()
        scale = config.temperature if sampled else 1.0
        logits = torch.stack(out.logits, dim=1).float().cpu() / scale  # (batch, steps, vocab)
        logps = torch.log_softmax(logits, dim=-1)
        replies = []
        for i in range(len(batch)):
            ids = new[i].tolist()
            if eos_id in ids:
                ids = ids[: ids.index(eos_id) + 1]
            chosen = logps[i, torch.arange(len(ids)), torch.tensor(ids, dtype=torch.long)].tolist()
            replies.append((ids, chosen))
        return replies

    return generate


def vllm_generator(trainer: Any, eos_id: int) -> Generator:
    """A :data:`Generator` through TRL's vLLM generation (``use_vllm``: server or colocate mode).

    TRL syncs the trainer's weights into vLLM before each rollout; each turn's batch goes to
    ``trainer.vllm_generation.generate`` as token ids, one completion per episode. Needs CUDA:
    built, not run in this package's tests (no GPU there).
    """

    def generate(batch: list[list[int]]) -> list[tuple[list[int], list[float]]]:
        _, completions, logprobs, _ = trainer.vllm_generation.generate(batch, None, num_generations=1)
        replies = []
        for ids, lps in zip(completions, logprobs):
            ids = list(ids)
            flat = [float(lp[0]) if isinstance(lp, list | tuple) else float(lp) for lp in lps]
            if eos_id in ids:
                ids = ids[: ids.index(eos_id) + 1]
            replies.append((ids, flat[: len(ids)]))
        return replies

    return generate


class HarnessRollout:
    """A ``rollout_func`` for ``trl.GRPOTrainer`` over harness episodes.

    Args:
        rows: the dataset's rows (:func:`~harness_gym.train.lm_dataset.build_rows`); prompts
            are matched to rows by their descriptor.
        tokenizer: the model's tokenizer (its chat template is checked here).
        config: reply and context limits, sampling.
        pool: envs to reuse across calls (one is made if None).

    ``timings`` accumulates seconds spent in rollouts and, of those, in the envs (reset and
    step), so the env's share of a training step can be reported.
    """

    def __init__(
        self,
        rows: Sequence[EpisodeRow],
        tokenizer: Any,
        config: RolloutConfig | None = None,
        pool: EnvPool | None = None,
    ) -> None:
        self.rows = {row.prompt: row for row in rows}
        self.chat = ChatTokenizer(tokenizer)
        self.config = config or RolloutConfig()
        self.pool = pool or EnvPool()
        self.timings = {"rollout": 0.0, "env": 0.0, "episodes": 0}

    def jobs(self, prompts: Sequence[Any]) -> list[tuple[str, Harness, int]]:
        """(task, harness, seed) per prompt: the ``k``-th repeat of a row plays the row's ``k``-th harness."""
        seen: dict[str, int] = {}
        jobs = []
        for prompt in prompts:
            key = _prompt_text(prompt)
            row = self.rows.get(key)
            if row is None:
                raise KeyError(f"rollout got a prompt that is not a row of its dataset: {key[:120]!r}")
            k = seen.get(key, 0)
            seen[key] = k + 1
            jobs.append((row.task, row.harness_for(k), row.seed))
        return jobs

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        if getattr(trainer, "use_vllm", False):
            return self.run(prompts, vllm_generator(trainer, self.chat.eos_id))
        model = trainer.model
        if hasattr(trainer, "accelerator"):
            model = trainer.accelerator.unwrap_model(model)
        tok = self.chat.tokenizer
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else self.chat.eos_id
        return self.run(prompts, model_generator(model, pad_id, self.chat.eos_id, self.config))

    def run(self, prompts: Sequence[Any], generate: Generator) -> dict[str, Any]:
        """Play the prompts' episodes with ``generate`` and return TRL's rollout dict."""
        start = time.perf_counter()
        outcomes = play_episodes(self.jobs(prompts), self.chat, generate, self.config, self.pool)
        self.timings["rollout"] += time.perf_counter() - start
        self.timings["env"] += sum(o.env_seconds for o in outcomes)
        self.timings["episodes"] += len(outcomes)
        return rollout_dict(outcomes)


def rollout_dict(outcomes: Sequence[EpisodeOutcome]) -> dict[str, Any]:
    """TRL's rollout output: token ids, log-probs, env mask, and per-episode fields for rewards."""
    return {
        "prompt_ids": [o.tokens.prompt_ids for o in outcomes],
        "completion_ids": [o.tokens.completion_ids for o in outcomes],
        "logprobs": [o.tokens.logprobs for o in outcomes],
        "env_mask": [o.tokens.env_mask for o in outcomes],
        "episode_return": [o.episode_return for o in outcomes],
        "success": [float(o.success) for o in outcomes],
        "harness_id": [o.harness_id for o in outcomes],
        "valid_action_rate": [o.valid_action_rate for o in outcomes],
        "turns": [o.turns for o in outcomes],
        "reply_truncated": [o.reply_truncated for o in outcomes],
        "context_truncated": [float(o.context_truncated) for o in outcomes],
    }


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
        return str(prompt[-1].get("content", ""))
    return str(prompt)
