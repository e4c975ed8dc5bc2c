"""Trajectory export: rows hold exactly what the env renders and what LLMAgent sends, TRL's
SFTTrainer trains on the files unchanged, and bad arguments write nothing."""

from __future__ import annotations

import io
import json
from pathlib import Path

import gymnasium as gym
import pytest

from harness_gym.cli import CLIExit, main
from harness_gym.core.harness import Harness
from harness_gym.integrations.export import episode_rows, record_episodes
from harness_gym.llm.types import Completion

TASK = "harness_gym/ClickButton-v0"
HARNESSES = {
    "json": Harness(),
    "few_shot_yaml": Harness(obs_format="yaml", few_shot=2),
    "native": Harness(tool_channel="native", context="transcript", history_window="all"),
    "native_renamed": Harness(tool_channel="native", rename_tools=(("click", "tap"),)),
}


class OracleAgent:
    """The env's oracle action, as its harness writes it."""

    def __init__(self, env: gym.Env) -> None:
        self.env = env.unwrapped

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, observation: str, info: dict) -> str:
        return self.env.oracle_action()


def play_by_hand(env: gym.Env, seed: int) -> tuple[dict, list[tuple[str, str]], str]:
    """reset + step with the oracle, keeping (observation, reply) pairs and the last observation."""
    observation, info = env.reset(seed=seed)
    pairs, done = [], False
    while not done:
        reply = env.unwrapped.oracle_action()
        pairs.append((observation, reply))
        observation, _, terminated, truncated, _ = env.step(reply)
        done = terminated or truncated
    return info, pairs, observation


@pytest.mark.parametrize("name", list(HARNESSES))
def test_episode_rows_equal_what_the_env_renders(name: str) -> None:
    harness = HARNESSES[name]
    env = gym.make("harness_gym/EnterText-v0", harness=harness)
    seeds = [3, 4]
    episodes = list(record_episodes(env, OracleAgent(env), seeds, "oracle"))
    for seed, episode in zip(seeds, episodes):
        (row,) = episode_rows(env, episode, "episode")
        info, pairs, _ = play_by_hand(gym.make("harness_gym/EnterText-v0", harness=harness), seed)
        messages = row["messages"]
        assert messages[0] == {"role": "system", "content": info["system_prompt"]}
        body = messages[1:]
        for example in info["examples"]:  # worked examples first, as earlier turns
            assert body.pop(0) == {"role": "user", "content": example["observation"]}
            reply = body.pop(0)
            if harness.tool_channel == "native":
                assert reply["tool_calls"][0]["function"]["name"] == json.loads(example["reply"])["name"]
                assert body.pop(0)["role"] == "tool"
            else:
                assert reply == {"role": "assistant", "content": example["reply"]}
        shown = [m["content"] for m in body if m["role"] in ("user", "tool")]
        assert shown == [obs for obs, _ in pairs]  # every observation, in order, as rendered
        replies = [m for m in body if m["role"] == "assistant"]
        assert len(replies) == len(pairs) and body[-1]["role"] == "assistant"
        for message, (_, text) in zip(replies, pairs):
            if harness.tool_channel == "native":
                call = message["tool_calls"][0]["function"]
                assert env.unwrapped.bound.write_call(call["name"], call["arguments"]) == text
                assert call["name"] in [t["function"]["name"] for t in json.loads(row["tools"])]  # as written
            else:
                assert message == {"role": "assistant", "content": text}
        if name == "native_renamed":
            assert "tap" in {m["tool_calls"][0]["function"]["name"] for m in replies}
        assert row["tools"] == (
            json.dumps(env.unwrapped.bound.openai_tools) if harness.tool_channel == "native" else None
        )
        assert (row["task_id"], row["harness_id"], row["seed"]) == ("EnterText", harness.id, seed)
        assert row["reward"] == episode.result.episode_return and row["success"] is True
        assert Harness.from_dict(json.loads(row["harness"])).id == info["harness_id"]  # replayable


class ScriptedBackend:
    """Replies with the oracle's action and keeps every request it was sent."""

    kind, model_id, supports_grammar = "scripted", "oracle", False

    def __init__(self, env: gym.Env) -> None:
        self.env, self.requests = env.unwrapped, []

    def complete(self, requests: list) -> list[Completion]:
        self.requests.extend(requests)
        return [Completion(text=self.env.oracle_action()) for _ in requests]


@pytest.mark.parametrize(
    "harness",
    [Harness(few_shot=1), Harness(context="transcript", history_window=1), Harness(history_window=2)],
    ids=["observation", "transcript_window1", "history_field"],
)
def test_step_rows_are_the_messages_llm_agent_sends(harness: Harness) -> None:
    from harness_gym.llm.agent import LLMAgent

    env = gym.make("harness_gym/EnterText-v0", harness=harness)
    backend = ScriptedBackend(env)
    agent = LLMAgent(env, backend)
    (episode,) = record_episodes(env, agent, [5], "llm")
    rows = episode_rows(env, episode, "step")
    assert len(rows) == len(backend.requests) == episode.result.steps >= 2
    for k, (row, request) in enumerate(zip(rows, backend.requests)):
        assert row["messages"][:-1] == request.messages
        assert row["messages"][-1] == {"role": "assistant", "content": episode.steps[k].reply}
        assert row["step"] == k and row["step_reward"] == episode.steps[k].reward


def tiny_tokenizer(tmp: Path):  # noqa: ANN201
    """A byte-level BPE tokenizer trained here, with the package's ChatML template (no downloads)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from harness_gym.llm.embedded import chat_template

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(["click the button", '{"name": "type", "ref": 3}'], trainer)
    from tokenizers import decoders

    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token="<|im_start|>"
    )
    fast.chat_template = chat_template()
    return fast


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "hf"])
def test_sft_trainer_reads_the_export_unchanged(tmp_path: Path, fmt: str) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from datasets import load_dataset, load_from_disk
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import SFTConfig, SFTTrainer

    name = {"jsonl": "demos.jsonl", "parquet": "demos.parquet", "hf": "demos_ds"}[fmt]
    out = tmp_path / name
    argv = [
        "export",
        "--env",
        "harness_gym/ClickButton-Json-v0",
        "--env",
        "harness_gym/EnterText-JsonNative-v0",
    ]
    argv += ["--episodes", "2", "--out", str(out)] + (["--format", "hf"] if fmt == "hf" else [])
    main(argv, out=io.StringIO())
    if fmt == "hf":
        data = load_from_disk(str(out))
    else:
        data = load_dataset("json" if fmt == "jsonl" else "parquet", data_files=str(out), split="train")
    assert len(data) == 4 and set(data["harness_id"]) == {Harness().id, Harness(tool_channel="native").id}
    tokenizer = tiny_tokenizer(tmp_path)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    before = [p.detach().clone() for p in model.parameters()]
    args = SFTConfig(
        output_dir=str(tmp_path / "sft"), max_steps=1, per_device_train_batch_size=2, report_to="none",
        use_cpu=True, save_strategy="no", logging_steps=1, max_length=4096, learning_rate=1e-2,
    )  # fmt: skip
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    result = trainer.train()
    assert result.global_step == 1 and torch.isfinite(torch.tensor(result.training_loss))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


BAD = [
    (["--env", "harness_gym/NoSuchTask-v0"], "unknown env id"),
    (["--agent", "nosuchagent"], "nosuchagent"),
    (["--harness", "NoSuchPreset"], "NoSuchPreset"),
    (["--episodes", "0"], "--episodes"),
    (["--unit", "turn"], "--unit"),
    (["--format", "csv"], "--format"),
    (["--format", "hf"], "writes a folder"),
    (["--format", "parquet"], "does not match"),
]


@pytest.mark.parametrize("extra,message", BAD, ids=[b[0][-1] for b in BAD])
def test_bad_arguments_are_one_line_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture, extra: list[str], message: str
) -> None:
    out = tmp_path / "rows.jsonl"
    argv = ["export", "--env", "harness_gym/ClickButton-Json-v0", "--out", str(out)]
    if "--env" in extra:
        argv = ["export", "--out", str(out)]
    with pytest.raises(CLIExit) as err:
        main(argv + extra, out=io.StringIO())
    assert err.value.code == 2 and message in str(err.value)
    assert "\n" not in str(err.value).strip() and "Traceback" not in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case", ["no_suffix", "nonempty_folder", "folder_as_file"])
def test_bad_outputs_write_nothing(tmp_path: Path, case: str) -> None:
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "mine.txt").write_text("mine")
    out, extra = {
        "no_suffix": (tmp_path / "rows", []),
        "nonempty_folder": (keep, ["--format", "hf"]),
        "folder_as_file": (keep, ["--format", "jsonl"]),
    }[case]
    with pytest.raises(CLIExit) as err:
        main(
            ["export", "--env", "harness_gym/ClickButton-Json-v0", "--out", str(out), *extra],
            out=io.StringIO(),
        )
    assert err.value.code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]
    assert [p.name for p in keep.iterdir()] == ["mine.txt"]


class GarbageThenOracle:
    """First a reply no harness parses, then the oracle."""

    def __init__(self, env: gym.Env) -> None:
        self.env, self.n = env.unwrapped, 0

    def reset(self, seed: int | None = None) -> None:
        self.n = 0

    def act(self, observation: str, info: dict) -> str:
        self.n += 1
        return "\x00not a call{{" if self.n == 1 else self.env.oracle_action()


def test_a_native_reply_that_does_not_parse_stays_text() -> None:
    env = gym.make("harness_gym/ClickButton-JsonNative-v0")
    (episode,) = record_episodes(env, GarbageThenOracle(env), [2], "garbage")
    (row,) = episode_rows(env, episode, "episode")
    replies = [m for m in row["messages"] if m["role"] == "assistant"]
    assert replies[0] == {"role": "assistant", "content": "\x00not a call{{"}
    assert replies[1]["tool_calls"][0]["function"]["name"] == "click"
    assert row["invalid_actions"] == 1 and row["success"]
    follows = row["messages"][row["messages"].index(replies[0]) + 1]
    assert follows["role"] == "user" and follows["content"] == episode.steps[1].observation


@pytest.mark.llm
def test_sft_trainer_trains_the_embedded_model_on_the_export(tmp_path: Path) -> None:
    """The embedded SmolLM2, loaded the package's way, takes one SFTTrainer step on the JSONL."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    from harness_gym.llm.embedded import embedded_model_path
    from harness_gym.train.grpo_lm import load_tokenizer

    out = tmp_path / "demos.jsonl"
    argv = ["export", "--env", "harness_gym/ClickButton-JsonNative-v0", "--episodes", "2", "--out", str(out)]
    main(argv, out=io.StringIO())
    data = load_dataset("json", data_files=str(out), split="train")
    path = Path(embedded_model_path())
    tokenizer = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    first = next(model.parameters()).detach().clone()
    args = SFTConfig(
        output_dir=str(tmp_path / "sft"), max_steps=1, per_device_train_batch_size=2, report_to="none",
        use_cpu=True, save_strategy="no", max_length=2048, learning_rate=1e-4,
    )  # fmt: skip
    result = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer).train()
    assert result.global_step == 1 and torch.isfinite(torch.tensor(result.training_loss))
    assert not torch.equal(first, next(model.parameters()))
