"""Results that cannot be stale or mislabeled: model identity in the cache and rows, outages as errors.

Local folders: two tiny randomly initialised Llama models (built here, no downloads) in folders
of the same base name must never share cached replies, and retraining into the same folder is
another model. Servers: a fault stand-in (stdlib ``http.server`` on 127.0.0.1, OpenAI-shaped)
that lists its models on ``GET /v1/models``, answers 404 for a model it does not serve, hangs,
or is not there at all: the only kind of stand-in the project allows (fault injection).
"""

from __future__ import annotations

import io
import json
import socket
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from openai_stand_in import StandIn, chat_completion, send_json

import harness_gym  # noqa: F401  (registers the envs)
from harness_gym.analysis.agent_spec import parse_agent
from harness_gym.analysis.search import SearchError, search
from harness_gym.cli import main
from harness_gym.core.space import HarnessSpace
from harness_gym.llm.identity import folder_identity
from harness_gym.llm.spec import agent_factory, parse_llm_spec

ENV = "harness_gym/ClickButton-Json-v0"


# -- the fault stand-in ----------------------------------------------------------------------------


class Server(StandIn):
    """Serves ``models`` (id -> extra /v1/models fields); ``mode``: ok | hang. While
    ``models_status`` is set, ``GET /v1/models`` answers that status (a server still starting)."""

    def __init__(self, models: dict[str, dict[str, Any]], mode: str = "ok") -> None:
        self.models, self.mode, self.chats = models, mode, 0
        self.models_status: int | None = None
        self.listings = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                server.listings += 1
                if server.models_status is not None:
                    return send_json(self, server.models_status, {"error": {"message": "starting"}})
                listed = [
                    {"id": k, "object": "model", "created": int(time.time()), **v}
                    for k, v in server.models.items()
                ]
                send_json(self, 200, {"object": "list", "data": listed})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                server.chats += 1
                if server.mode == "hang":
                    time.sleep(2.0)
                if body.get("model") not in server.models:
                    msg = f"The model `{body.get('model')}` does not exist."
                    return send_json(
                        self, 404, {"error": {"message": msg, "type": "NotFoundError", "code": 404}}
                    )
                send_json(self, 200, chat_completion(body["model"], "hello", prompt_tokens=5))

            def log_message(self, *args: Any) -> None:
                pass

        self.serve(Handler)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    made: list[Server] = []
    yield made
    for s in made:
        s.close()


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def _play(spec: str, seeds: range) -> Any:
    """One step per seed through the agent the spec names; returns the agent (its cache counts)."""
    env = gym.make(ENV)
    agent = agent_factory(parse_llm_spec(spec))(env)
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        agent.reset(seed)
        agent.act(obs, info)
    return agent


# -- served models -----------------------------------------------------------------------------


def test_server_identity_separates_weights_not_ports(servers: list[Server], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    a = Server({"m": {"root": "/ckpt/step-100"}})
    a2 = Server({"m": {"root": "/ckpt/step-100"}})  # the same model at another port
    b = Server({"m": {"root": "/ckpt/step-200"}})  # a new checkpoint served under the same name
    servers += [a, a2, b]
    first = _play(f"openai:m@{a.url}?max_tokens=4&cache={cache}", range(3))
    assert (first.cache.hits, a.chats) == (0, 3)
    again = _play(f"openai:m@{a2.url}?max_tokens=4&cache={cache}&retries=0&timeout=5", range(3))
    assert (again.cache.hits, a2.chats) == (3, 0)  # same identity: answered from the cache
    assert again.name == first.name == "openai:m?max_tokens=4"  # the URL and retries are how, not what
    other = _play(f"openai:m@{b.url}?max_tokens=4&cache={cache}", range(3))
    assert (other.cache.hits, b.chats) == (0, 3)  # other weights: never the first model's replies
    assert other.backend.identity != first.backend.identity
    record = other.episode_record()
    assert record["model_identity"] == other.backend.identity and record["model"] == "m"


def test_revision_is_part_of_the_identity_and_the_name(servers: list[Server], tmp_path: Path) -> None:
    a = Server({"m": {}})  # a server that reports nothing but the id
    servers.append(a)
    spec = f"openai:m@{a.url}?max_tokens=4&cache={tmp_path}"
    one = _play(spec + "&revision=r1", range(2))
    two = _play(spec + "&revision=r2", range(2))
    assert two.cache.hits == 0 and a.chats == 4
    assert one.backend.identity != two.backend.identity
    assert one.name.endswith("revision=r1") and parse_agent(spec + "&revision=r2").name == two.name


def test_an_unverified_identity_is_asked_again_and_never_cached(
    servers: list[Server],
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    a = Server({"m": {"root": "/ckpt/a"}})
    b = Server({"m": {"root": "/ckpt/b"}})  # another model, later, under the same name
    servers += [a, b]
    a.models_status = b.models_status = 503  # both still starting when the run begins
    first = _play(f"openai:m@{a.url}?max_tokens=4&cache={cache}", range(3))
    assert first.backend.identity.startswith("unverified:m:") and a.chats == 3
    assert not list(cache.rglob("*.json"))  # nothing cached under a name alone
    assert first.episode_record()["model_identity"].startswith("unverified:")
    other = _play(f"openai:m@{b.url}?max_tokens=4&cache={cache}", range(3))
    assert (other.cache.hits, b.chats) == (0, 3)  # never the first model's replies
    # The first server finishes starting: the same backend asks again and now keys its replies.
    asked = a.listings
    a.models_status = None
    first.backend.identity  # noqa: B018
    assert first.backend.identity.startswith("served:m:") and a.listings == asked + 1
    env = gym.make(ENV)
    obs, info = env.reset(seed=7)
    first.reset(7)
    first.act(obs, info)
    assert len(list(cache.rglob("*.json"))) == 1
    again = _play(f"openai:m@{a.url}?max_tokens=4&cache={cache}", range(7, 8))
    assert again.cache.hits == 1 and again.episode_record()["model_identity"] == first.backend.identity


def test_a_server_without_a_models_route_is_asked_once(servers: list[Server], tmp_path: Path) -> None:
    a = Server({"m": {}})
    servers.append(a)
    a.models_status = 404  # up, but no such route (a 4xx is final): asked once, still unverified
    agent = _play(f"openai:m@{a.url}?max_tokens=4&cache={tmp_path}", range(3))
    assert agent.backend.identity.startswith("unverified:m:") and a.listings == 1
    assert agent.cache.hits == 0 and not list(tmp_path.rglob("*.json"))


# -- local folders (a tiny random Llama, built here) ---------------------------------------------


def _tiny_model(folder: Path, seed: int) -> None:
    torch = pytest.importorskip("torch")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from harness_gym.llm.embedded import chat_template

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(["click the button"], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token="<|im_start|>"
    )
    fast.chat_template = chat_template()
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
        pad_token_id=fast.pad_token_id, eos_token_id=fast.eos_token_id,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)


def test_folders_of_the_same_name_never_share_replies(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    one, two = tmp_path / "a" / "model", tmp_path / "b" / "model"
    _tiny_model(one, seed=1)
    _tiny_model(two, seed=2)
    assert folder_identity(one) != folder_identity(two)
    first = _play(f"hf:{one}?max_tokens=3&cache={cache}", range(3))
    assert first.cache.hits == 0
    assert _play(f"hf:{one}?max_tokens=3&cache={cache}&batch_size=2", range(3)).cache.hits == 3
    other = _play(f"hf:{two}?max_tokens=3&cache={cache}", range(3))
    assert other.cache.hits == 0  # another model in a folder of the same base name
    assert other.episode_record()["model_identity"] == folder_identity(two)
    # Retraining into the same folder is another model too, loaded anew in the same process.
    _tiny_model(one, seed=3)
    assert folder_identity(one) not in (first.backend.identity, other.backend.identity)
    retrained = _play(f"hf:{one}?max_tokens=3&cache={cache}", range(3))
    assert retrained.cache.hits == 0 and retrained.backend.identity == folder_identity(one)


def test_folder_identity_is_memoized_and_names_an_empty_folder(tmp_path: Path) -> None:
    import harness_gym.llm.identity as identity

    folder = tmp_path / "m"
    folder.mkdir()
    with pytest.raises(ValueError, match="no model files"):
        folder_identity(folder)
    (folder / "model.safetensors").write_bytes(b"w" * 1000)
    (folder / "run.json").write_text("{}")  # not a model file: a new log does not change the model
    first = folder_identity(folder)
    (folder / "run.json").write_text('{"step": 2}')
    assert folder_identity(folder) == first
    identity._MEMO.clear()  # another process: read back from the on-disk memo, same answer
    assert folder_identity(folder) == first
    (folder / "model.safetensors").write_bytes(b"v" * 1000)  # same size, new mtime and content
    assert folder_identity(folder) != first


@pytest.mark.parametrize("how", ["cp -p", "rsync -a", "archive"])
def test_weights_replaced_with_their_old_mtime_are_hashed_again(tmp_path: Path, how: str) -> None:
    import os
    import shutil
    import tarfile

    folder = tmp_path / "m"
    folder.mkdir()
    weights = folder / "model.safetensors"
    weights.write_bytes(b"w" * 1000)
    mtime = 1_700_000_000 * 10**9  # whole seconds, as a tar archive keeps them
    os.utime(weights, ns=(mtime, mtime))
    first = folder_identity(folder)
    new = tmp_path / "new.safetensors"
    new.write_bytes(b"v" * 1000)  # same size, other content
    os.utime(new, ns=(mtime, mtime))  # the mtime that cp -p / rsync -a / an archive restores
    if how == "archive":
        with tarfile.open(tmp_path / "w.tar", "w") as tar:
            tar.add(new, arcname="model.safetensors")
        with tarfile.open(tmp_path / "w.tar") as tar:
            tar.extractall(folder, filter="data")
    elif how == "cp -p":
        shutil.copy2(new, weights)  # in place: the same inode, size and mtime
    else:
        tmp = folder / ".model.safetensors.tmp"
        shutil.copy2(new, tmp)
        os.replace(tmp, weights)  # rsync's way: a new file renamed over the old one
    stat = weights.stat()
    assert (stat.st_size, stat.st_mtime_ns) == (1000, mtime)
    assert folder_identity(folder) != first


# -- outages are errors ------------------------------------------------------------------------


def _eval(agent: str, tmp_path: Path) -> tuple[str, list[dict]]:
    out = tmp_path / "rows.jsonl"
    with pytest.raises(SystemExit) as err:
        main(
            ["eval", "--agent", agent, "--env", ENV, "--episodes", "2", "--out", str(out)], out=io.StringIO()
        )
    assert err.value.code != 0
    return str(err.value), [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("fault", ["dead port", "wrong model", "timeout"])
def test_eval_outage_is_an_error_not_zero_percent(servers: list[Server], tmp_path: Path, fault: str) -> None:
    server = Server({"m": {}}, mode="hang" if fault == "timeout" else "ok")
    servers.append(server)
    url = _dead_url() if fault == "dead port" else server.url
    model = "nosuch" if fault == "wrong model" else "m"
    line, rows = _eval(f"openai:{model}@{url}?max_tokens=4&retries=0&timeout=0.3&cache=off", tmp_path)
    want = {
        "dead port": "cannot reach",
        "wrong model": "does not serve 'nosuch' (it serves ['m'])",
        "timeout": "no answer within",
    }[fault]
    assert "lost model replies" in line and want in line and "\n" not in line.strip()
    assert len(rows) == 2 and all(r["error"] and r["error"].startswith("LLMBackendError") for r in rows)


SPACE = HarnessSpace({"tool_style": ["json", "xml"]})


def test_search_stops_on_an_outage_and_retries_on_request(servers: list[Server], tmp_path: Path) -> None:
    dead = _dead_url()
    kwargs = dict(tasks=["ClickButton"], space=SPACE, budget=40, dev_seeds=2, test_seeds=2, ceiling=False)
    agent = f"openai:m@{dead}?max_tokens=4&retries=0&timeout=1&cache=off"
    with pytest.raises(SearchError, match="lost model replies.*--retry-errors"):
        search(agent, tmp_path, log=io.StringIO(), **kwargs)
    assert not (tmp_path / "best_harness.yaml").exists()
    up = Server({"m": {}})  # the server comes back, at another port: the same search resumes
    servers.append(up)
    agent = f"openai:m@{up.url}?max_tokens=4&retries=0&timeout=5&cache=off"
    with pytest.raises(SearchError, match="--retry-errors"):
        search(agent, tmp_path, log=io.StringIO(), **kwargs)
    log = io.StringIO()
    result = search(agent, tmp_path, log=log, retry_errors=True, **kwargs)
    assert "run again" in log.getvalue() and (tmp_path / "best_harness.yaml").exists()
    assert (result.tables["final"]["errors"] == 0).all()
    assert up.chats > 0


def test_sweep_resume_names_error_rows_and_the_flag(servers: list[Server], tmp_path: Path) -> None:
    from harness_gym.analysis.sweep import SweepSpec, load_rows, run_sweep

    def spec(url: str, reach: str) -> SweepSpec:
        agent = f"openai:m@{url}?max_tokens=4&{reach}&cache=off"
        return SweepSpec.build(
            [agent], tasks=["ClickButton"], space=SPACE, subset="all", seeds=1, ceiling=False
        )

    down = spec(_dead_url(), "retries=0&timeout=1")
    first = run_sweep(down, tmp_path, workers=0, progress=False, log=io.StringIO())
    assert first.n_errors == 2
    log = io.StringIO()
    run_sweep(down, tmp_path, workers=0, progress=False, log=log)
    assert "2 of the done cells recorded an error (2 of them model-server outages)" in log.getvalue()
    assert "--retry-errors" in log.getvalue()
    # The server comes back at another port, reached with other settings: the same sweep.
    up = Server({"m": {"root": "/ckpt"}})
    servers.append(up)
    back = spec(up.url, "retries=2&timeout=5&concurrency=3")
    assert back.id == down.id
    again = run_sweep(back, tmp_path, workers=0, progress=False, retry_errors=True, log=io.StringIO())
    assert again.n_run == 2 and again.n_errors == 0 and up.chats > 0
    rows = load_rows(tmp_path)
    assert rows["error"].isna().all() and set(rows["agent"]) == {"openai:m?max_tokens=4"}
    assert rows["model_identity"].str.startswith("served:m:").all()


@pytest.mark.llm
def test_embedded_model_rows_carry_its_content_hash_and_rerun_from_cache(tmp_path: Path) -> None:
    """The real embedded model: its identity is the hash of its folder, recorded and keyed."""
    from harness_gym.llm.embedded import embedded_model_path

    spec = f"llm?max_tokens=8&cache={tmp_path}"
    first = _play(spec, range(2))
    assert first.backend.identity == folder_identity(embedded_model_path())
    assert first.episode_record()["model_identity"].startswith("sha256:") and first.cache.hits == 0
    again = _play(spec + "&threads=1", range(2))
    assert again.cache.hits == 2 and again.name == first.name == "llm?max_tokens=8"


def _sweep_cli(url: str, out: Path, space: Path, *flags: str) -> tuple[int, str]:
    agent = f"openai:m@{url}?max_tokens=4&retries=0&timeout=1&cache=off"
    argv = ["sweep", "--agent", agent, "--tasks", "ClickButton", "--space", str(space), "--subset", "all"]
    argv += ["--seeds", "1", "--workers", "0", "--no-ceiling", "--quiet", "--out", str(out), *flags]
    try:
        code = main(argv, out=io.StringIO())
    except SystemExit as err:
        return int(err.code or 0), str(err)
    return int(code or 0), ""


def test_sweep_exits_non_zero_while_outage_rows_remain(servers: list[Server], tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("factors:\n  tool_style: [json, xml]\n")
    out = tmp_path / "sweep"
    code, line = _sweep_cli(_dead_url(), out, space)
    assert code == 2 and "2 of 2 rows lost model replies" in line and "--retry-errors" in line
    assert (out / "episodes.jsonl").exists()  # the rows are kept, for --retry-errors
    code, line = _sweep_cli(_dead_url(), out, space)  # resumed: nothing run, the outage remains
    assert code == 2 and "lost model replies" in line
    up = Server({"m": {}})
    servers.append(up)
    assert _sweep_cli(up.url, out, space, "--retry-errors") == (0, "")
    assert up.chats > 0
