"""Channel specs: levels, ids, dict round trip, seeded sampling, enumeration."""

from __future__ import annotations

import json

import pytest

from harness_gym.core.harness import HarnessSpecError
from harness_gym.multiagent.channels import DelegationChannel, MeshChannel, resolve_channel


@pytest.mark.parametrize("kind", [DelegationChannel, MeshChannel])
def test_round_trip_ids_and_enumeration(kind: type) -> None:
    points = kind().enumerate()
    sizes = {DelegationChannel: 3 * 2, MeshChannel: 3 * 3 * 2}
    assert len(points) == sizes[kind] == len({p.id for p in points})
    for point in points:
        again = kind.from_dict(json.loads(json.dumps(point.to_dict())))
        assert again == point and again.id == point.id
    assert kind().to_dict(full=False) == {} and kind().id.startswith(kind.ID_PREFIX)


def test_sampling_is_seeded_and_covers_the_levels() -> None:
    draws = [MeshChannel().sample(seed) for seed in range(60)]
    assert draws == [MeshChannel().sample(seed) for seed in range(60)]
    assert {d.hint_position for d in draws} == {"first", "last", "hidden"}
    assert {d.show_confidence for d in draws} == {True, False}
    base = DelegationChannel(max_worker_steps=5, worker_step_cost=0.2)
    assert {(d.max_worker_steps, d.worker_step_cost) for d in (base.sample(s) for s in range(10))} == {
        (5, 0.2)
    }


def test_bad_specs_are_clear() -> None:
    with pytest.raises(HarnessSpecError, match="unknown DelegationChannel factor"):
        DelegationChannel.from_dict({"view": "actions"})
    with pytest.raises(HarnessSpecError, match="valid levels"):
        MeshChannel(hint_format="emoji")
    with pytest.raises(HarnessSpecError, match="worker_step_cost"):
        DelegationChannel(worker_step_cost=-1)
    with pytest.raises(HarnessSpecError, match="max_worker_steps"):
        DelegationChannel(max_worker_steps=True)  # type: ignore[arg-type]
    with pytest.raises(HarnessSpecError, match="must be a mapping"):
        MeshChannel.from_dict(["first"])  # type: ignore[arg-type]
    spec, source = resolve_channel(MeshChannel, "sample")
    assert spec == MeshChannel() and source is not None and source(3) == MeshChannel().sample(3)
