"""`doppler train --ray`: the sim stage's rollouts on Ray actors learn exactly what the local run learns."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("ray", reason="Ray is not installed: pip install 'doppler-gym[ray]'")

import torch  # noqa: E402

from agents.training import TrainArgs, train  # noqa: E402
from agents.training.trainer import make_stage  # noqa: E402
from tests.doppler_gym.parallel.ray_fixture import RAY_ADDRESS, ray_local  # noqa: E402, F401  (fixture)

pytestmark = pytest.mark.slow  # starts Ray and trains

TINY = {"graph": "random", "graph_params": {"n_ops": 6, "levels": 3, "seed": 1}, "devices": 2,
        "policy": "MultiInputPolicy", "policy_kwargs": {"net_arch": [16]}, "stages": ("sim",), "episodes": {"sim": 8},
        "rl": {"episodes_per_update": 4}, "logging": {"progress": False, "tensorboard": False},
        "evaluation": {"baselines": ("critical_path",), "sample_decodes": 0, "every_episodes": 0}, "seed": 4}


def _episodes(out):
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r["makespan"] for r in rows if r["kind"] == "episode"]


def test_sim_stage_on_ray_learns_the_same_weights(tmp_path, ray_local):  # noqa: F811
    local = train(TrainArgs(**TINY, out=str(tmp_path / "local")))
    remote = train(TrainArgs(**TINY, out=str(tmp_path / "ray"), ray_address=RAY_ADDRESS))
    assert remote["makespan"] == local["makespan"]
    a = torch.load(tmp_path / "local" / "policy_sim.pt", weights_only=False)["policy_state"]
    b = torch.load(tmp_path / "ray" / "policy_sim.pt", weights_only=False)["policy_state"]
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    ea, eb = _episodes(tmp_path / "local"), _episodes(tmp_path / "ray")
    assert len(ea) == 8 and ea == eb  # the same episodes, in the same order
    assert len(set(np.round(ea, 12))) > 1  # sampled placements differ: the comparison is not vacuous


def test_make_stage_and_validation():
    assert type(make_stage("sim", TrainArgs(**TINY, ray_address="local"))).__name__ == "RayPPOStage"
    assert type(make_stage("sim", TrainArgs(**TINY))).__name__ == "PPOStage"
    with pytest.raises(ValueError, match="moves the sim stage's PPO rollouts to Ray"):
        TrainArgs(**{**TINY, "algo": "reinforce"}, ray_address="local").validate()


def test_cli_without_ray_says_how_to_install(tmp_path, capsys, monkeypatch):
    import sys

    from doppler_gym.cli.main import main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    rc = main(["train", "random", "--param", "n_ops=6", "--param", "levels=3", "--devices", "2", "--stages", "sim",
               "--episodes", "sim=4", "--out", str(tmp_path), "--ray"])
    err = capsys.readouterr().err
    assert rc == 2 and "--ray needs Ray" in err and "pip install 'doppler-gym[ray]'" in err
    assert not (tmp_path / "checkpoint.pt").exists()  # refused before any stage ran
