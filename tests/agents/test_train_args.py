"""TrainArgs: run options and frozen groups, settings by dotted key, `--set` reaching every setting."""

from __future__ import annotations

import dataclasses

import pytest

from agents.cli.train_cmd import parse_set
from agents.training import TrainArgs
from agents.training.args import GROUPS, ImitationArgs, setting_field, setting_keys


def test_every_setting_has_one_key_and_every_group_is_frozen() -> None:
    keys = setting_keys()
    assert len(keys) == len(set(keys)) == 72
    assert {"seed", "imitation.lr", "rl.gamma", "ppo.clip_range", "reinforce.baseline", "episodes.sim"} <= set(keys)
    args = TrainArgs()
    for name, cls in GROUPS.items():
        group = getattr(args, name)
        assert isinstance(group, cls) and cls.__dataclass_params__.frozen, name
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.imitation.lr = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.seed = 1  # type: ignore[misc]


def test_cli_set_reaches_every_setting() -> None:
    """A distinct value for each key through ``--set``, read back by key from the TrainArgs it builds."""
    defaults = TrainArgs()
    pairs, expected = [], {}
    for i, key in enumerate(setting_keys()):
        default = defaults.setting(key)
        if isinstance(setting_field(key).default, bool):
            text, value = str(not default).lower(), not default
        elif key == "recipe":
            text, value = "doppler", "doppler"
        elif isinstance(default, tuple):  # stages "a,b"; the spec lists "a;b"
            text, value = f"v{i}", (f"v{i}",)
        else:
            text, value = f"v{i}", f"v{i}"
        pairs.append(f"{key}={text}")
        expected[key] = value
    settings = parse_set(pairs)
    assert list(settings) == setting_keys()
    args = TrainArgs.from_settings(settings)
    for key, value in expected.items():
        assert args.setting(key) == value, key


def test_an_unknown_key_names_the_close_ones_and_lists_all() -> None:
    with pytest.raises(ValueError, match=r"'il_lr'.*did you mean.*imitation\.lr.*reinforce\.baseline_decay"):
        parse_set(["il_lr=1e-3"])
    with pytest.raises(ValueError, match=r"did you mean rl\.anchor_coef"):
        TrainArgs.from_settings({"rl_anchor_coef": 0.0})
    with pytest.raises(ValueError, match=r"did you mean imitation\.lr"):
        TrainArgs(imitation={"lrr": 1e-3})
    with pytest.raises(ValueError, match=r"did you mean episodes\.il"):
        setting_field("episodes")  # a group name alone is not a setting
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_set(["imitation.lr"])
    with pytest.raises(TypeError, match="ImitationArgs or a dict"):
        TrainArgs(imitation=3)


def test_groups_by_class_dict_or_dotted_keys_are_one_thing() -> None:
    by_class = TrainArgs(imitation=ImitationArgs(lr=3e-4, envs=2), episodes={"il": 5})
    by_dict = TrainArgs(imitation={"lr": 3e-4, "envs": 2}, episodes={"il": 5})
    by_key = TrainArgs.from_settings({"imitation.lr": 3e-4, "imitation": {"envs": 2}, "episodes.il": 5})
    assert by_class == by_dict == by_key
    assert by_key.imitation.teacher == "search"  # the recipe fills what was not given
    assert TrainArgs(**by_key.to_dict()) == by_key
    later = by_key.replace({"episodes.sim": 7, "imitation.lr": 1e-3})
    assert (later.episodes.il, later.episodes.sim, later.imitation.lr, later.imitation.envs) == (5, 7, 1e-3, 2)
    assert TrainArgs(stages="il, sim").stages == ("il", "sim")
    assert TrainArgs(evaluation={"held_out": "chainmm; ffnn"}).evaluation.held_out == ("chainmm", "ffnn")
