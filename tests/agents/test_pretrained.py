"""The shipped pre-trained policy: a small file that loads with weights_only, its training record,
and a valid placement from its own decode."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import tomllib
import torch

import doppler_gym as dg
from agents.policy import DopplerPolicy
from agents.pretrained import INFO_PATH, WEIGHTS_PATH, export_checkpoint, info, load_payload, load_policy
from agents.training.rollout import decode

ROOT = Path(__file__).resolve().parents[2]


def test_file_is_small_loads_weights_only_and_is_packaged() -> None:
    assert WEIGHTS_PATH.is_file() and WEIGHTS_PATH.stat().st_size < 400_000
    raw = torch.load(WEIGHTS_PATH, map_location="cpu", weights_only=True)
    assert raw.keys() == load_payload().keys() and raw["policy_class"].endswith("DopplerPolicy")
    state = raw["policy_state"]
    assert {v.dtype for v in state.values() if v.is_floating_point()} == {torch.float16}
    assert 50_000 < sum(v.numel() for k, v in state.items() if k.startswith("features_extractor.")) < 400_000
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert {WEIGHTS_PATH.name, INFO_PATH.name} <= set(data["agents.pretrained"])


def test_training_record_names_command_seed_commit_and_held_out_families() -> None:
    record = info()
    for key in ("command", "seed", "commit", "train_mix", "topologies", "held_out", "policy_kwargs"):
        assert key in record, key
    assert record["command"].startswith("doppler train mix") and f"--seed {record['seed']}" in record["command"]
    assert all(spec in record["command"] for spec in record["train_mix"])
    assert not any(s.startswith(("llama-layer", "paper/")) for s in record["train_mix"])  # held out
    assert any("llama-layer" in f for f in record["held_out"]["families"])
    assert any("paper" in g for g in record["held_out"]["graphs"])
    assert load_payload()["policy_kwargs"] == record["policy_kwargs"]


@pytest.mark.parametrize("devices", [2, 5])
def test_loaded_policy_decodes_a_valid_placement(devices: int) -> None:
    graph = dg.workloads.make("random", n_ops=14, levels=4, seed=11)
    env = gym.make("Doppler-Sim-v0", graph=graph, topology=devices)
    policy = load_policy(env)
    assert isinstance(policy, DopplerPolicy) and not policy.training
    assert all(p.dtype == torch.float32 for p in policy.parameters())
    out = decode(policy, env, greedy=True, seed=0)
    assign = np.asarray(out["assignment"])
    assert assign.shape == (graph.n_ops,) and assign.min() >= 0 and assign.max() < devices
    assert sorted(np.asarray(out["order"]).tolist()) == list(range(graph.n_ops))
    again = dg.simulate(graph, assign, dg.Topology.uniform(devices), config=dg.SimConfig()).makespan
    assert out["makespan"] == pytest.approx(again, rel=1e-9)
    moved = load_policy().transfer_to(env)  # default spaces, then moved: the same scores
    obs, _ = env.reset(seed=0)
    with torch.no_grad():
        torch.testing.assert_close(moved.action_logits(obs), policy.action_logits(obs))


def test_export_round_trip(tmp_path) -> None:
    env = gym.make("Doppler-Sim-v0", graph=dg.workloads.make("random", n_ops=6, levels=2, seed=0), topology=2)
    src = tmp_path / "src.pt"
    payload = load_payload()
    policy = load_policy(env)
    payload = {**payload, "policy_state": policy.state_dict()}
    torch.save(payload, src)
    out = export_checkpoint(src, tmp_path / "small.pt", {"note": "test"})
    again = load_policy(env, path=out)
    for (k, a), b in zip(policy.state_dict().items(), again.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=k)  # float16 of float16 values is exact
    assert load_payload(out)["pretrained"] == {"note": "test"}
