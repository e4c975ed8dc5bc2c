"""A short sweep of a language model served by a real vLLM server.

Requests are counted at the server (its ``/metrics``), so the tests see what was really sent:
a resumed sweep sends nothing for finished cells, and a rerun into a fresh folder is answered
from the completion cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness_gym.analysis.sweep import SweepSpec, load_rows, run_sweep
from harness_gym.core.space import HarnessSpace

pytestmark = [pytest.mark.llm, pytest.mark.xdist_group("llm")]

SPACE = HarnessSpace({"tool_style": ["python", "json"], "few_shot": [2, 0]})


def _spec(server, cache: Path, constrain: bool) -> SweepSpec:
    agent = f"openai:{server.model}@{server.base_url}?max_tokens=24&cache={cache}&constrain={int(constrain)}"
    return SweepSpec.build([agent, "oracle"], tasks=["ClickButton"], space=SPACE, subset="all", seeds=2)


@pytest.mark.parametrize("constrain", [False, True])
def test_sweep_records_model_rows_resumes_and_reruns_from_cache(
    vllm_server, tmp_path: Path, constrain: bool
) -> None:
    cache = tmp_path / "cache"
    spec = _spec(vllm_server, cache, constrain)
    before = vllm_server.requests_served()
    first = run_sweep(spec, tmp_path / "a", workers=0, progress=False, in_flight=4)
    sent = vllm_server.requests_served() - before
    rows = load_rows(tmp_path / "a")
    llm = rows[rows["agent"].str.startswith("openai:")]
    assert first.n_errors == 0 and len(llm) == 4 * 2
    # Every request the rows count reached the server, and nothing else did.
    assert sent == int(llm["llm_requests"].sum()) > 0
    assert set(llm["model"]) == {vllm_server.model} and set(llm["backend"]) == {"openai"}
    # The identity is what the real server reports about the model (vLLM: its id and root).
    (identity,) = set(llm["model_identity"])
    assert identity.startswith(f"served:{vllm_server.model}:")
    assert vllm_server.base_url not in set(llm["agent"]).pop()  # named by what, not where
    assert (llm["prompt_tokens"] > 0).all() and (llm["completion_tokens"] > 0).all()
    for row in llm.itertuples():
        completions = json.loads(row.completions)
        assert len(completions) == row.llm_requests == row.steps
        assert json.loads(row.sampling)["max_tokens"] == 24
    if constrain:
        # The grammar makes format errors impossible: every reply was a legal action.
        assert (llm["invalid_actions"] == 0).all()
        assert set(llm["constrained"]) <= {"json_schema:exact", "regex:exact"}
    # Oracle rows have no model columns.
    assert rows[rows["agent"] == "oracle"]["model"].isna().all()

    # Resume: every cell is finished, so no request is sent.
    before = vllm_server.requests_served()
    again = run_sweep(spec, tmp_path / "a", workers=0, progress=False)
    assert again.n_run == 0 and vllm_server.requests_served() == before

    # A rerun into a new folder is answered from the cache: same rows, no request.
    rerun = run_sweep(spec, tmp_path / "b", workers=0, progress=False, in_flight=4)
    assert rerun.n_run == len(rows) and vllm_server.requests_served() == before
    fresh = load_rows(tmp_path / "b")
    fresh_llm = fresh[fresh["agent"].str.startswith("openai:")]
    assert (fresh_llm["cache_hits"] == fresh_llm["llm_requests"]).all()
    columns = ["index", "success", "steps", "invalid_actions", "completions"]
    assert fresh_llm[columns].reset_index(drop=True).equals(llm[columns].reset_index(drop=True))
