"""RL adapters: the Discrete(K) menu with action masks, and the hashed text encoder."""

from __future__ import annotations

import zlib

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

from harness_gym import PRESETS, make_env
from harness_gym.wrappers.discrete import DEFAULT_MAX_ACTIONS, DiscreteActions, legal_mask
from harness_gym.wrappers.encoding import (
    HashedFeatures,
    TextEncoder,
    encode_actions,
    token_hash,
    token_ids,
    tokenize,
)


def adapted(task: str, preset: str, max_actions: int = DEFAULT_MAX_ACTIONS) -> gym.Env:
    return TextEncoder(DiscreteActions(gym.make(f"harness_gym/{task}-{preset}-v0"), max_actions))


# -- DiscreteActions ------------------------------------------------------------------------


@pytest.mark.parametrize("preset", list(PRESETS))
def test_index_sends_the_legal_action_as_the_harness_writes_it(preset: str) -> None:
    """Stepping index i equals stepping the text info['legal_actions'][i] on a twin env."""
    menu = DiscreteActions(make_env("EnterText", preset), max_actions=8)
    twin = make_env("EnterText", preset)
    for seed in range(5):
        obs_a, info_a = menu.reset(seed=seed)
        obs_b, info_b = twin.reset(seed=seed)
        rng = np.random.default_rng(seed)
        done = False
        while not done:
            assert obs_a == obs_b
            mask = menu.action_masks()
            assert mask.dtype == bool and mask.shape == (8,)
            assert mask.sum() == len(info_b["legal_actions"])
            assert menu.legal_action_texts() == info_b["legal_actions"]
            index = int(rng.choice(np.flatnonzero(mask)))
            obs_a, r_a, term_a, trunc_a, info_a = menu.step(np.int64(index))
            obs_b, r_b, term_b, trunc_b, info_b = twin.step(info_b["legal_actions"][index])
            assert (r_a, term_a, trunc_a) == (r_b, term_b, trunc_b)
            assert info_a["action_index"] == index and info_a["action_index_valid"]
            done = term_a or trunc_a


@pytest.mark.parametrize(
    ("preset", "ends", "shows_error"),
    [("Json", False, True), ("BundleXml", True, True), ("BundleYaml", False, False)],
)
@pytest.mark.parametrize("index", [12, 31, -1, 10_000, np.array([30])])
def test_masked_or_out_of_range_index_follows_the_invalid_action_policy(
    preset: str, ends: bool, shows_error: bool, index: object
) -> None:
    """Json gives feedback, Xml ends the episode, Yaml ignores: never an exception."""
    env = DiscreteActions(make_env("ClickButton", preset), max_actions=32)
    obs, info = env.reset(seed=0)
    assert len(info["legal_actions"]) < 12
    obs, reward, terminated, truncated, info = env.step(index)
    assert info["action_index_valid"] is False
    assert info["error_kind"] == "empty" and info["invalid_actions"] == 1
    assert reward == 0.0 and terminated is ends
    assert ("empty action" in obs) is shows_error


def test_wrong_action_types_raise_with_a_fix() -> None:
    env = DiscreteActions(make_env("ClickButton"))
    env.reset(seed=0)
    with pytest.raises(TypeError, match="menu index"):
        env.step('{"name": "click", "arguments": {"ref": 2}}')
    with pytest.raises(TypeError, match="integer menu index"):
        env.step(1.5)
    with pytest.raises(TypeError, match="menu index"):
        env.step(True)
    with pytest.raises(ValueError, match="max_actions"):
        DiscreteActions(make_env("ClickButton"), max_actions=0)


def test_menu_smaller_than_the_legal_actions_warns_and_counts_the_dropped() -> None:
    env = DiscreteActions(make_env("ClickButton"), max_actions=2)
    with pytest.warns(RuntimeWarning, match="exceed max_actions=2"):
        _, info = env.reset(seed=0)
    assert info["legal_actions_dropped"] == len(info["legal_actions"]) - 2
    assert env.action_masks().all() and len(env.legal_action_texts()) == 2


def test_legal_mask_never_masks_everything() -> None:
    assert legal_mask(3, 5).tolist() == [True, True, True, False, False]
    assert legal_mask(9, 4).all()
    assert legal_mask(0, 4).all()  # after the episode ended: any index is allowed (and invalid)


def test_action_masks_reach_through_the_encoder_and_vector_envs() -> None:
    import sb3_contrib  # noqa: F401 - MaskablePPO is what the masks are for
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
    from stable_baselines3.common.env_util import make_vec_env

    env = adapted("ClickButton", "Json")
    _, info = env.reset(seed=0)
    assert is_masking_supported(env)
    assert get_action_masks(env).sum() == len(info["legal_actions"])
    venv = make_vec_env(lambda: adapted("ClickButton", "BundleMarkdown"), n_envs=2, seed=0)
    venv.reset()
    masks = get_action_masks(venv)
    assert masks.shape == (2, DEFAULT_MAX_ACTIONS) and masks.any(axis=1).all()
    venv.close()


# -- encoding -------------------------------------------------------------------------------


def test_tokenize_and_stable_hashes() -> None:
    assert tokenize('{"ref": 3, "text": "Saddle"}') == [
        "{", '"', "ref", '"', ":", "3", ",", '"', "text", '"', ":", '"', "Saddle", '"', "}",
    ]  # fmt: skip
    assert token_hash("click") == zlib.crc32(b"click")  # CRC32, not Python's salted hash()
    ids, dup = token_ids("click 3 click", vocab_size=100, max_tokens=10)
    assert ids.dtype == np.int64 and (ids >= 1).all() and (ids < 100).all()
    assert ids[0] == ids[2] and dup.tolist() == [True, False, True]
    assert token_ids("a b c d", 100, 2)[0].shape == (2,)
    acts = encode_actions(["click 3", "type 3 hello world"], vocab_size=50, max_tokens=3)
    assert acts.shape == (2, 3) and acts[0, 2] == 0


def test_encoder_space_determinism_and_dtype() -> None:
    env = adapted("EnterText", "Json")
    x1, info = env.reset(seed=4)
    x2, _ = env.reset(seed=4)
    assert env.observation_space.contains(x1)
    assert x1.dtype == np.float32 and x1.shape == (2048,) and set(np.unique(x1)) <= {0.0, 1.0}
    assert np.array_equal(x1, x2)
    assert info["observation_text"] == env.get_wrapper_attr("last_text")
    assert np.array_equal(x1, HashedFeatures().encode(info["observation_text"]))


def test_reordering_fields_changes_the_input_through_positions() -> None:
    """Json and JsonReversed show the same tokens; only position features tell them apart."""
    text = make_env("EnterText", "Json").reset(seed=1)[0]
    reversed_text = make_env("EnterText", "JsonReversed").reset(seed=1)[0]
    assert sorted(tokenize(text)) == sorted(tokenize(reversed_text))
    full = HashedFeatures()
    assert not np.array_equal(full.encode(text), full.encode(reversed_text))
    bag = HashedFeatures(positional=False, duplicates=False)
    assert np.array_equal(bag.encode(text), bag.encode(reversed_text))


def test_duplicate_features_mark_words_repeated_from_the_instruction() -> None:
    enc = HashedFeatures(dim=1 << 16, positional=False, unigrams=False)
    assert enc.encode("alpha beta gamma").sum() == 0
    assert enc.encode("alpha beta alpha").sum() == 2  # one feature per repeated position
    assert enc.encode("{ { ,").sum() == 0  # punctuation repeats carry no signal
    with pytest.raises(TypeError, match="observation text"):
        enc.encode(b"bytes")  # type: ignore[arg-type]


# -- the menu part ---------------------------------------------------------------------------

MENU = HashedFeatures(dim=1 << 12, menu_slots=4, menu_dim=1 << 14)


def menu_part(features: HashedFeatures, text: str, actions: list[str]) -> np.ndarray:
    return np.flatnonzero(features.encode(text, actions)[features.dim :])


def test_menu_features_mark_the_slot_that_repeats_the_instructions_word() -> None:
    actions = ["type(3, 'moss')", "type(3, 'Piano')", "click(4)"]
    with_word = 'Enter "Piano" into the field'
    without = 'Enter "Kettle" into the field'
    # Only the Piano slot's features change with the observation: it points at the quoted word.
    assert len(menu_part(MENU, with_word, actions)) == len(menu_part(MENU, without, actions)) + 1
    one_slot = ["type(3, 'Piano')"]
    assert len(menu_part(MENU, with_word, one_slot)) == len(menu_part(MENU, without, one_slot)) + 1


def test_menu_features_depend_on_slot_order_and_leave_the_observation_part_alone() -> None:
    text = 'Enter "Piano" into the field'
    actions = ["type(3, 'moss')", "type(3, 'Piano')", "click(4)"]
    x, y = MENU.encode(text, actions), MENU.encode(text, actions[::-1])
    assert x.shape == y.shape == (MENU.size,) == MENU.space.shape
    assert np.array_equal(x[: MENU.dim], y[: MENU.dim])
    assert not np.array_equal(x[MENU.dim :], y[MENU.dim :])
    assert np.array_equal(x[: MENU.dim], HashedFeatures(dim=MENU.dim).encode(text))
    # Slots past menu_slots are not encoded.
    five = [*actions, "click(5)", "click(6)"]
    assert np.array_equal(MENU.encode(text, five), MENU.encode(text, [*actions, "click(5)", "press(x)"]))


def test_menu_features_need_the_menu() -> None:
    with pytest.raises(TypeError, match="pass the legal actions"):
        MENU.encode("some text")
    with pytest.raises(ValueError, match="menu_slots >= 0"):
        HashedFeatures(menu_slots=-1)
    env = TextEncoder(gym.make("CartPole-v1").unwrapped, features=MENU)  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="legal_actions"):
        env.reset(seed=0)


def test_menu_encoder_reads_the_discrete_menu_in_order() -> None:
    features = HashedFeatures(menu_slots=DEFAULT_MAX_ACTIONS)
    env = TextEncoder(DiscreteActions(gym.make("harness_gym/EnterText-Json-v0")), features=features)
    x, info = env.reset(seed=2)
    menu = env.get_wrapper_attr("legal_action_texts")()
    assert np.array_equal(x, features.encode(info["observation_text"], menu))
    assert x.shape == env.observation_space.shape == (features.dim + features.menu_dim,)
    x, *_, info = env.step(1)
    assert np.array_equal(x, features.encode(info["observation_text"], info["legal_actions"]))


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
@pytest.mark.parametrize("task", ["EnterText", "BookFlight"])
def test_check_env_passes_with_the_menu_encoded(task: str) -> None:
    from stable_baselines3.common.env_checker import check_env

    features = HashedFeatures(menu_slots=DEFAULT_MAX_ACTIONS)
    env = TextEncoder(DiscreteActions(gym.make(f"harness_gym/{task}-Json-v0")), features=features)
    check_env(env, warn=True)
    gym_check_env(env, skip_render_check=True)


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("task", ["ClickButton", "EnterText", "ClickCheckboxes"])
def test_sb3_and_gymnasium_check_env_pass_on_adapted_envs(task: str, preset: str) -> None:
    import stable_baselines3  # noqa: F401
    from stable_baselines3.common.env_checker import check_env

    env = adapted(task, preset)
    check_env(env, warn=True)
    gym_check_env(env, skip_render_check=True)
    env.close()
