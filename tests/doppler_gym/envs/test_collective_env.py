"""Doppler-Collective-v0: API, masks, random valid play validated by dg.comm.validate, MILP teacher, SB3."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import doppler_gym  # noqa: F401  (registers the ids)
from doppler_gym.comm import CommTopology, validate
from doppler_gym.envs.collective import CollectiveEnv
from doppler_gym.envs.masked import InvalidActionWarning

ID = "Doppler-Collective-v0"
CHUNK = 1e9  # [B]; with 1e9 B/s links and tau = 1 s a link moves one chunk per epoch


def _gpus(name: str, n: int, pairs: list[tuple[int, int]], capacity: float = 1e9, alpha: float = 0.0) -> CommTopology:
    src = [a for a, b in pairs] + [b for a, b in pairs]
    dst = [b for a, b in pairs] + [a for a, b in pairs]
    return CommTopology(
        name=name, node_names=tuple(f"g{i}" for i in range(n)), is_switch=np.zeros(n, bool),
        copy_capable=np.ones(n, bool), src=np.array(src), dst=np.array(dst), capacity=np.full(len(src), capacity),
        alpha=np.full(len(src), alpha),
    )


def line3(capacity: float = 1e9, alpha: float = 0.0) -> CommTopology:
    return _gpus("line3", 3, [(0, 1), (1, 2)], capacity, alpha)


def ring4() -> CommTopology:
    return _gpus("ring4", 4, [(0, 1), (1, 2), (2, 3), (3, 0)])


def star(copy: bool) -> CommTopology:
    """Switch s (node 0) joining GPUs 1..3."""
    return CommTopology(
        name="star", node_names=("s", "a", "b", "c"), is_switch=np.array([True, False, False, False]),
        copy_capable=np.array([copy, True, True, True]), src=np.array([1, 2, 3, 0, 0, 0]),
        dst=np.array([0, 0, 0, 1, 2, 3]), capacity=np.full(6, 1e9), alpha=np.zeros(6),
    )


def make(topology, collective="allgather", chunks=1, **kw) -> gym.Env:
    """tau = 1 s and 1 GB chunks on the hand-built topologies (one chunk per link per epoch)."""
    if isinstance(topology, CommTopology):
        n_gpus = int((~topology.is_switch).sum())
        out = {"allgather": n_gpus, "alltoall": n_gpus, "broadcast": 1, "gather": n_gpus}[collective]
        kw.setdefault("epoch", 1.0)
        kw.setdefault("buffer_bytes", CHUNK * out * chunks)
    return gym.make(ID, topology=topology, collective=collective, chunks=chunks, **kw)


def play(env: gym.Env, rng: np.random.Generator | None, teacher: bool = False) -> tuple[float, dict, bool, int]:
    """One episode of uniformly random valid actions (or the teacher's first action); returns
    (return, final info, terminated, steps) and checks the mask on the way."""
    obs, _ = env.reset(seed=0)
    u = env.unwrapped
    total, steps = 0.0, 0
    while True:
        mask = obs["action_mask"]
        assert np.array_equal(mask, u.action_masks())
        if teacher:
            t = u.teacher_mask()
            assert t.sum() >= 1 and np.all(mask[t == 1] == 1)  # the teacher only proposes valid actions
            a = int(u.teacher_actions()[0])
        else:
            a = int(rng.choice(np.flatnonzero(mask)))
        obs, r, term, trunc, info = env.step(a)
        total += r
        steps += 1
        assert steps < 100_000
        if term or trunc:
            return total, info, term, steps


INSTANCES = {
    "line3": lambda: make(line3()),
    "line3-slow": lambda: make(line3(capacity=0.5e9)),  # beta = 1: one chunk per 2 epochs
    "line3-latency": lambda: make(line3(alpha=2.0)),  # delta = 2
    "ring4-alltoall-c2": lambda: make(ring4(), "alltoall", chunks=2),
    "ring4-broadcast": lambda: make(ring4(), "broadcast", root=2),
    "line3-gather": lambda: make(line3(), "gather"),
    "star-copy": lambda: make(star(True)),
    "star-nocopy": lambda: make(star(False)),
    "dgx1": lambda: make("dgx1", buffer_bytes="1GB"),
    "dgx2-1-slow": lambda: make("dgx2-1", buffer_bytes="1MB", epoch="slow"),
}


@pytest.mark.parametrize("name", ["star-nocopy", "dgx1"])  # line3: test_env_contract.py
def test_check_env(name):
    env = INSTANCES[name]()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    # the checker steps unmasked random actions: the env's one warning about them is expected, nothing else
    unexpected = [str(w.message) for w in caught if not issubclass(w.category, InvalidActionWarning)]
    assert not unexpected, unexpected


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_random_valid_play_ends_and_validates(name):
    env = INSTANCES[name]()
    for seed in range(3):
        ret, info, term, _ = play(env, np.random.default_rng(seed))
        assert term, f"{name}: random valid play was truncated after {info['epochs']} epochs"
        sched = info["schedule"]
        assert sched.method == "agent" and sched.epochs == info["epochs"]
        report = validate(sched)
        assert report.ok, report.errors
        assert report.epochs_needed <= sched.epochs
        assert ret == pytest.approx(-info["epochs"])  # reward "epochs": the return is -epochs
        assert info["delivered"] == 1.0


def test_invalid_actions_send_nothing_and_a_truncating_streak_reports_the_schedule():
    """(The penalty, the unchanged state and the raise mode of every env: test_env_contract.py.)"""
    env = make(line3(), invalid_penalty=-0.5, max_invalid_streak=3)
    obs, _ = env.reset()
    u = env.unwrapped
    bad = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    with pytest.warns(InvalidActionWarning, match=r"reward -0.5 .*3 in a row truncate"):
        env.step(bad)
    env.step(bad)
    assert u.sends.shape == (0, 3)
    _, r, term, trunc, info = env.step(bad)  # third in a row truncates: the end's info and truncation term
    assert trunc and not term and info["invalid_action"] and info["delivered"] < 1.0
    assert info["n_sends"] == 0 and info["schedule"].sends.shape == (0, 3)
    assert r == pytest.approx(-0.5 - u.max_epochs * (1.0 - info["delivered"]))
    strict = make(line3(), invalid_action="raise")
    strict.reset()
    with pytest.raises(ValueError, match=rf"action {bad} is not valid in epoch 0 \(valid: \["):
        strict.step(bad)


def test_mask_rules_on_line3():
    """Line a - b - c, links 0 a->b, 1 b->c, 2 b->a, 3 c->b; commodities 0, 1, 2 at a, b, c."""
    env = make(line3(capacity=0.5e9))  # beta = 1: each link carries one send per 2 epochs
    obs, _ = env.reset()
    u = env.unwrapped
    nl = 4
    valid = set(np.flatnonzero(obs["action_mask"]).tolist())
    # epoch 0: each GPU may send only its own chunk to a neighbour
    assert valid == {0 * nl + 0, 1 * nl + 1, 1 * nl + 2, 2 * nl + 3, u.next_epoch_action}
    assert u.max_offset == 2 and u.instance.window_capacity.tolist() == [1, 1, 1, 1]  # the scales, by hand
    assert obs["capacity_left"].tolist() == [1.0] * 4 and obs["epoch"][0] == 0.0
    obs, *_ = env.step(0 * nl + 0)  # x0 a->b
    # lands in 1 + beta = 2 epochs: in_flight is epochs / max_offset = 2 / 2; capacity_left is sends / window capacity
    assert obs["capacity_left"][0] == 0 and obs["in_flight"][0, 1] == 1.0
    assert obs["action_mask"][0 * nl + 0] == 0
    obs, *_ = env.step(u.next_epoch_action)
    assert obs["capacity_left"][0] == 0  # the window of 2 epochs is still full
    assert obs["in_flight"][0, 1] == 0.5  # 1 epoch to go, of max_offset = 2
    assert obs["epoch"][0] == np.float32(1 / u.max_epochs)
    assert obs["action_mask"][0 * nl + 1] == 0  # b does not hold x0 yet
    obs, *_ = env.step(u.next_epoch_action)
    assert obs["holdings"][0, 1] == 1 and obs["action_mask"][0 * nl + 1] == 1  # b forwards x0 now
    assert obs["in_flight"][0, 1] == 0 and obs["capacity_left"][0] == 1


def test_switch_without_copy_forwards_one_copy_per_arrival():
    env = make(star(False))
    obs, _ = env.reset()
    u = env.unwrapped
    nl = 6
    env.step(0 * nl + 0)  # commodity 0 (at a) a -> s, arrives at s in epoch 1
    obs, *_ = env.step(u.next_epoch_action)
    assert obs["holdings"][0, 0] == 1  # at the switch in its arrival epoch
    assert obs["action_mask"][0 * nl + 4] == 1 and obs["action_mask"][0 * nl + 5] == 1
    obs, *_ = env.step(0 * nl + 4)  # s -> b: lands at b in this epoch (switch -> GPU, delta 0)
    assert obs["holdings"][0, 2] == 1
    assert obs["action_mask"][0 * nl + 5] == 0  # the one copy is used up
    obs, *_ = env.step(u.next_epoch_action)
    assert obs["holdings"][0, 0] == 0  # gone: switches have no buffer


@pytest.mark.parametrize("name", ["line3-latency", "ring4-alltoall-c2", "star-nocopy", "dgx2-1-slow"])
def test_observation_is_scaled_to_the_unit_box(name):
    """Every float key within [0, 1] and the space's bounds finite, on instances whose raw values exceed 1
    (delta = 2 hops, several chunks, slow epochs); the scaled values times their scales are the raw
    integers (epochs, sends)."""
    env = INSTANCES[name]()
    u = env.unwrapped
    for key, space in env.observation_space.spaces.items():
        assert np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)), key
        if key != "action_mask":
            assert space.dtype == np.float32 and space.low.min() == 0.0 and space.high.max() == 1.0, key
    assert env.observation_space["action_mask"].dtype == np.int8  # the integer key stays an integer
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    seen_in_flight = 0.0
    while True:
        assert env.observation_space.contains(obs)
        in_flight_epochs = obs["in_flight"] * u.max_offset
        np.testing.assert_allclose(in_flight_epochs, np.round(in_flight_epochs), atol=1e-5)
        sends = obs["capacity_left"] * np.maximum(u.instance.window_capacity, 1)
        np.testing.assert_allclose(sends, np.round(sends), atol=1e-5)
        assert np.all(sends <= u.instance.window_capacity + 1e-5)
        assert obs["epoch"][0] == np.float32(min(u.epoch, u.max_epochs) / u.max_epochs)
        seen_in_flight = max(seen_in_flight, float(obs["in_flight"].max()))
        obs, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        if term or trunc:
            break
    assert seen_in_flight > 0.0  # some chunk was in flight (the check above was not vacuous)


def test_the_teacher_without_ortools_names_the_solvers_extra(monkeypatch):
    import sys

    env = make(line3())
    monkeypatch.setitem(sys.modules, "ortools", None)  # as if OR-Tools were not installed
    obs, _ = env.reset()  # the env itself runs
    env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    with pytest.raises(ImportError, match=r"pip install doppler-gym\[solvers\]"):
        env.unwrapped.teacher_actions()


def test_composite_collectives_rejected():
    with pytest.raises(ValueError, match="composite"):
        CollectiveEnv(topology=line3(), collective="allreduce", buffer_bytes=3e9, epoch=1.0)


@pytest.mark.parametrize("name,expected", [("line3", 2), ("ring4", 2), ("dgx1", 3), ("star-nocopy", None),
                                           ("line3-slow", None)])
def test_teacher_reaches_the_milp_optimum(name, expected):
    env = {"line3": lambda: make(line3()), "ring4": lambda: make(ring4())}.get(name, INSTANCES.get(name))()
    u = env.unwrapped
    milp = u.teacher_schedule()
    assert milp.optimal
    if expected is not None:
        assert milp.epochs == expected
    ret, info, term, _ = play(env, None, teacher=True)
    assert term and info["epochs"] == milp.epochs
    assert ret == pytest.approx(-milp.epochs)
    assert validate(info["schedule"]).ok
    # a second episode reuses the cached solve and replays the same schedule
    _, info2, _, _ = play(env, None, teacher=True)
    assert u.teacher_schedule() is milp and np.array_equal(info2["schedule"].sends, info["schedule"].sends)


def test_teacher_drops_a_redundant_slow_delivery():
    """Broadcast from a on a triangle whose a -> c link is 3x slower: a schedule sending x0 both
    a -> c in epoch 0 (lands in 3) and a -> b -> c (lands in 2) replays in 2 epochs only once the
    slow copy is dropped (the env masks a second send to a GPU that already expects the chunk)."""
    from doppler_gym.comm import Schedule
    from doppler_gym.envs.collective.teacher import teacher_sends

    topo = CommTopology(
        name="tri", node_names=("a", "b", "c"), is_switch=np.zeros(3, bool), copy_capable=np.ones(3, bool),
        src=np.array([0, 0, 1]), dst=np.array([1, 2, 2]), capacity=np.array([1e9, 1e9 / 3, 1e9]), alpha=np.zeros(3),
    )
    env = make(topo, "broadcast")
    u = env.unwrapped
    assert u.instance.offset.tolist() == [1, 3, 1]
    hand = Schedule(topology=u.instance.topology, demand=u.instance.demand, chunk_bytes=CHUNK, tau=1.0, epochs=3,
                    sends=np.array([[0, 1, 0], [0, 0, 0], [0, 2, 1]]), method="hand")
    assert validate(hand).ok and validate(hand).epochs_needed == 2
    rows = teacher_sends(u.instance, hand)
    assert rows.tolist() == [[0, 0, 0], [0, 2, 1]]
    env.reset()
    for x, lk, k in rows:
        while u.epoch < k:
            env.step(u.next_epoch_action)
        _, _, term, _, info = env.step(int(x * 3 + lk))
    assert term and info["epochs"] == 2


@pytest.mark.slow
def test_maskable_ppo_runs():
    torch = pytest.importorskip("torch")
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.vec_env import DummyVecEnv

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        venv = DummyVecEnv([lambda: make(ring4()), lambda: make(ring4())])
        model = MaskablePPO("MultiInputPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
        model.learn(total_timesteps=256)
        obs = venv.reset()
        for _ in range(30):
            masks = get_action_masks(venv)
            action, _ = model.predict(obs, action_masks=masks)
            assert all(masks[i, action[i]] for i in range(len(action)))
            obs, _, _, _ = venv.step(action)
    finally:
        torch.set_num_threads(threads)
