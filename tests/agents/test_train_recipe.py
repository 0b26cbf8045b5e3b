"""Recipes: the default TrainArgs and `doppler train` resolve to the best measured recipe, `--recipe
doppler` restores the published settings, explicit values win, and the ablations keep DOPPLER's teacher."""

from __future__ import annotations

import argparse

import pytest

from agents.cli.train_cmd import args_from_namespace, register
from agents.training import TrainArgs
from agents.training.args import BEST_POLICY_KWARGS, RECIPES


def _cli(*argv: str) -> TrainArgs:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return args_from_namespace(parser.parse_args(["train", *argv]))


def test_default_args_are_the_best_recipe() -> None:
    for args in (TrainArgs(), _cli("paper/ffnn", "--budget-minutes", "1")):
        assert args.recipe == "best"
        assert args.imitation.teacher == "search" and args.imitation.teacher_evals == 200_000
        assert (args.rl.lr, args.rl.lr_final, args.ppo.target_kl) == (1e-4, 1e-5, 0.01)
        assert args.policy_kwargs == BEST_POLICY_KWARGS
        assert args.policy_kwargs is not RECIPES["best"]["policy_kwargs"]  # a copy: the recipe stays intact
        args.validate()
    mix = TrainArgs(graph="mix", mix={"graphs": ("random:n_ops=10..20",)})
    # a cheaper search per graph of a mix
    assert mix.imitation.teacher == "search" and mix.imitation.teacher_evals == 20_000
    mix.validate()


def test_recipe_doppler_restores_the_published_settings() -> None:
    for args in (TrainArgs(recipe="doppler"), _cli("paper/ffnn", "--recipe", "doppler")):
        assert args.imitation.teacher == "critical_path" and args.policy_kwargs == {}
        assert (args.rl.lr, args.rl.lr_final, args.ppo.target_kl) == (1e-3, 1e-4, 0.05)
        assert (args.rl.gamma, args.ppo.gae_lambda, args.imitation.lr) == (1.0, 1.0, 1e-3)
        args.validate()


def test_explicit_values_and_ablations_win_over_the_recipe() -> None:
    args = _cli("paper/ffnn", "--il-teacher", "critical_path", "--set", "rl.lr=3e-4", "--set", "ppo.target_kl=None")
    assert args.imitation.teacher == "critical_path" and args.rl.lr == 3e-4 and args.ppo.target_kl is None
    assert args.policy_kwargs == BEST_POLICY_KWARGS  # the fields not given keep the recipe's values
    assert _cli("paper/ffnn", "--policy-kwargs", '{"hidden_dim": 32}').policy_kwargs == {"hidden_dim": 32}
    for learn in ("sel", "plc"):  # the paper's ablations imitate the critical-path heuristic
        args = TrainArgs(learn=learn)
        assert args.imitation.teacher == "critical_path"
        args.validate()
    assert TrainArgs(policy="MultiInputPolicy").policy_kwargs == {}  # the recipe's kwargs are DopplerPolicy's
    with pytest.raises(ValueError, match="recipe"):
        TrainArgs(recipe="fast")
    with pytest.raises(ValueError, match="learn='both'"):
        TrainArgs(learn="sel", imitation={"teacher": "search"}).validate()


def test_args_round_trip_through_a_checkpoint_dict() -> None:
    args = TrainArgs(graph="mix", mix={"graphs": ("random:n_ops=10..20",), "topologies": ("2", "p100x4"), "pool": 3})
    again = TrainArgs(**args.to_dict())
    assert again.to_dict() == args.to_dict() and again.mix.topologies == ("2", "p100x4")
    with pytest.raises(ValueError, match="mix.pool"):
        TrainArgs(mix={"pool": 3}).validate()
