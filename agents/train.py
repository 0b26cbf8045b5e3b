"""Three-stage DOPPLER training on one policy: imitation, simulator RL, real-system RL.

CleanRL-style single file (a typed :class:`TrainArgs`, one readable function per stage, side
effects gated by flags). The policy is any sb3-contrib ``MaskableActorCriticPolicy`` subclass
for ``Doppler-Sim-v0`` observations: by default ``agents.policy.DopplerPolicy`` (the GNN dual
policy) when it imports, else sb3-contrib's ``MaskableMultiInputActorCriticPolicy`` (an MLP on the
flattened padded observation, for development).

Stages (DOPPLER paper §4; reference spec §4, with the authors' bugs avoided):

1. ``il``: **imitation of the critical-path teacher**, DAgger style. ``il_envs`` episodes are rolled
   in lockstep; at every step each env follows the teacher with probability ``beta`` (a uniformly
   chosen teacher action) and the learner (a sample of its masked distribution) otherwise, with
   ``beta`` decaying linearly from 1 to 0 over the first ``il_beta_decay`` of the stage. Every
   visited state is stored with its valid-action mask and the teacher's action *set*
   (``env.teacher_mask()``: all tied max-b-level ops in SEL, all tied earliest-start devices in
   PLC), and minibatches from that buffer minimise ``-log sum_{a in teacher} pi(a|s)`` under the
   masked distribution (both heads alike), minus ``il_ent_coef`` x entropy, plus ``il_vf_coef`` x
   the value error against the episode's return (so the critic is warm for stage 2).
2. ``sim``: **RL in the simulator** from the stage-1 weights: MaskablePPO on ``Doppler-Sim-v0``
   (``gamma = 1`` and GAE ``lambda = 1``: the reward is terminal; each update collects
   ``episodes_per_update`` whole episodes), or ``algo="reinforce"``: the paper's REINFORCE with a moving-average baseline, on
   sampled (not epsilon-greedy) actions. The learning rate decays linearly from ``rl_lr`` to
   ``rl_lr_final`` over the stage (the paper's schedule; the authors' code never applied it).
3. ``real``: the same RL code path on ``real_env_id`` (``Doppler-Real-v0`` by default; any env id
   with the same observation layout works, e.g. ``Doppler-Sim-v0`` in the tests).

Budget: a stage ends when it has run its episodes (``il_episodes`` ...) or its share of
``budget_minutes``, whichever comes first. The shares follow :data:`STAGE_WEIGHTS` (il 1, sim 3,
real 2) over the stages still to run, recomputed at each stage start from the time left, so a stage
that ends early (by episodes) leaves its time to the later ones: ``il,sim`` gives 25 % / 75 %,
``il,sim,real`` 1/6, 3/6, 2/6. Without a budget, unset episode counts default to
:data:`DEFAULT_EPISODES`; with a budget they are unbounded. The final evaluation (greedy and
sampled decodes, the baselines with a ``baseline_seconds`` local search) runs after the budget.

Outputs in ``out``: ``checkpoint.pt`` (written atomically at each stage end and every
``checkpoint_minutes`` / ``checkpoint_every_updates``: policy weights, optimizer, stage counters,
RNG states, the imitation buffer; ``resume=True`` continues from it; Ctrl-C writes it too),
``policy_<stage>.pt`` (weights at each stage end), ``policy_best.pt`` (the best periodic greedy
evaluation), ``metrics.jsonl`` (one JSON line per episode, update and evaluation),
``tb/`` (TensorBoard), ``summary.json`` and ``gantt.png`` (the learned placement).

>>> from agents.train import TrainArgs, train
>>> summary = train(TrainArgs(graph="paper/chainmm", devices=4, stages=("il", "sim"), budget_minutes=8))
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from stable_baselines3.common.callbacks import BaseCallback

import doppler_gym  # noqa: F401  (registers the env ids)
from doppler_gym.envs.observation import STATIC_KEYS
from doppler_gym.envs.registration import REAL_ENV_ID
from doppler_gym.graph.types import DataflowGraph
from doppler_gym.sim.config import SimConfig
from doppler_gym.topology.types import Topology

STAGES = ("il", "sim", "real")
STAGE_WEIGHTS = {"il": 1.0, "sim": 3.0, "real": 2.0}  # budget shares (normalised over the stages to run)
DEFAULT_EPISODES = {"il": 300, "sim": 1000, "real": 200}  # per stage, when neither episodes nor a budget is set
DOPPLER_POLICY = "agents.policy:DopplerPolicy"
FALLBACK_POLICY = "sb3_contrib.common.maskable.policies:MaskableMultiInputActorCriticPolicy"
CHECKPOINT_NAME = "checkpoint.pt"
CHECKPOINT_FORMAT = "doppler-train-checkpoint"
CHECKPOINT_VERSION = 1
_NEG = -1e9  # logit of a masked action (finite: keeps 0 * log p = 0 and gradients NaN-free)


# ============================================================================ arguments
@dataclass
class TrainArgs:
    """Everything a training run depends on (JSON-serialisable; stored in every checkpoint)."""

    # --- the instance
    graph: str = "paper/chainmm"
    """A paper graph name (``paper/chainmm``), a workload name (``chainmm``) or a .txt/.json file."""
    graph_params: dict = field(default_factory=dict)
    """Workload generator parameters (``{"n_ops": 12}`` for ``random``)."""
    devices: int | None = None
    """``Topology.uniform(devices)``; default 4 (exclusive with ``topology``)."""
    topology: str | None = None
    """A topology preset name (``p100x4``, ``uniform8``) instead of ``devices``."""
    sim_config: dict | None = None
    """``SimConfig`` fields; ``None``: the reference model for paper graphs, ``SimConfig()`` otherwise."""

    # --- the run
    stages: tuple[str, ...] = ("il", "sim")
    """Stages to run, in order, among ``il``, ``sim``, ``real``."""
    out: str = "out/train"
    """Output folder (checkpoints, logs, summary)."""
    seed: int = 0
    """Seeds Python, NumPy, torch, the envs and the baselines."""
    budget_minutes: float | None = None
    """Wall-clock budget of the training stages [min], split by ``STAGE_WEIGHTS``; None = episodes only."""
    il_episodes: int | None = None
    """Imitation episodes (None: unbounded under a budget, else ``DEFAULT_EPISODES``). Every stage
    rounds up to whole iterations (``il_envs`` episodes for il, ``episodes_per_update`` for RL)."""
    sim_episodes: int | None = None
    """Simulator RL episodes (same rule)."""
    real_episodes: int | None = None
    """Real-system RL episodes (same rule)."""
    resume: bool = False
    """Continue from ``out/checkpoint.pt`` (counters, optimizer, RNG, buffer); a fresh run if it is missing."""
    init: str | None = None
    """Start from the weights of this checkpoint (another graph or device count: matching tensors only)."""
    policy: str = "auto"
    """``auto`` (DopplerPolicy if importable, else MultiInputPolicy), ``MultiInputPolicy``, or ``module:Class``."""
    policy_kwargs: dict = field(default_factory=dict)
    """Keyword arguments of the policy class (JSON values only)."""
    device: str = "auto"
    """torch device of the policy (``auto``: CUDA when available)."""
    torch_threads: int | None = 1
    """torch intra-op threads while training (restored after). 1: the networks are small, and on a busy
    CPU more threads are much slower (OpenMP threads spin for cores they share: with two other busy
    processes on 2 cores, imitation on chainmm took 273 s with 2 threads, 7 s with 1); None = leave as is."""

    # --- stage 1: imitation (DAgger)
    il_lr: float = 1e-3
    """Adam learning rate of imitation (the authors' config)."""
    il_envs: int = 8
    """Episodes rolled in lockstep per iteration (one batched policy call per step)."""
    il_beta_decay: float = 0.5
    """Fraction of the stage over which the teacher probability beta falls from 1 to 0."""
    il_batch_size: int = 256
    """States per gradient step."""
    il_epochs: float = 4.0
    """Gradient samples per newly visited state (updates per iteration = ceil(il_epochs * new / batch))."""
    il_buffer_size: int = 10_000
    """States kept (ring buffer of the most recent visits)."""
    il_ent_coef: float = 1e-3
    """Entropy bonus weight (the authors' imitation config)."""
    il_vf_coef: float = 0.5
    """Weight of the value regression on episode returns (warms the critic for RL; 0 = off)."""

    # --- stages 2 and 3: RL
    algo: str = "ppo"
    """``ppo`` (sb3-contrib MaskablePPO) or ``reinforce`` (the paper's REINFORCE with a baseline)."""
    rl_lr: float = 1e-3
    """Initial learning rate. The paper's 1e-4 is for a loss summed over an episode's steps; PPO averages
    them (on paper/chainmm, 3 minutes: 1e-3 reached 0.81 x critical path, 3e-4 and 1e-4 0.94)."""
    rl_lr_final: float = 1e-4
    """Learning rate at the end of a stage (linear decay by stage progress, as in the paper)."""
    gamma: float = 1.0
    """Discount; 1: the reward is terminal (the authors' hidden 0.99 down-weighted early steps)."""
    gae_lambda: float = 1.0
    """PPO's GAE lambda; 1 = Monte-Carlo returns minus the critic (with one terminal reward over 2 n_ops
    steps, lambda < 1 lets an unsure critic mute the signal of early decisions: on paper/chainmm 0.95
    did not improve on the imitation policy in 3 minutes, 1.0 did)."""
    episodes_per_update: int = 4
    """Whole episodes per update (PPO's n_steps = this x episode length; REINFORCE's batch)."""
    ppo_epochs: int = 4
    """PPO epochs per update."""
    ppo_minibatch_episodes: float = 1.0
    """PPO minibatch size, in episodes (x episode length steps)."""
    clip_range: float = 0.2
    """PPO clip range."""
    ent_coef: float = 0.0
    """Entropy bonus of RL (the authors' RL configs use 0)."""
    vf_coef: float = 0.5
    """PPO value loss weight."""
    max_grad_norm: float = 0.5
    """Gradient norm clip (PPO and REINFORCE)."""
    target_kl: float | None = 0.05
    """PPO early stop of an update's epochs (protects the imitation weights); None = off."""
    reinforce_baseline_decay: float = 0.9
    """REINFORCE: exponential moving average factor of the return baseline."""

    # --- stage 3 env
    real_env_id: str = REAL_ENV_ID
    """Env id of stage 3 (made with the graph and device count, plus ``real_env_kwargs``)."""
    real_env_kwargs: dict = field(default_factory=dict)
    """Extra keyword arguments of the stage-3 env (``devices="cuda:0,1,2,3"``, ``repeats=3``, ...;
    a ``sim_config`` given as a dict of SimConfig fields becomes a SimConfig)."""

    # --- evaluation, logging, checkpoints
    eval_every_episodes: int = 20
    """Greedy decode in the simulator every this many training episodes (logged); 0 = off."""
    sample_decodes: int = 16
    """K sampled decodes of the final policy (the summary reports the best)."""
    baselines: tuple[str, ...] = ("critical_path", "heft", "random", "local_search")
    """Baselines of the summary (doppler_gym.baselines names)."""
    baseline_seconds: float = 5.0
    """Local search budget of the summary [s]."""
    checkpoint_minutes: float = 5.0
    """Write ``checkpoint.pt`` at least this often [min] (and at every stage end)."""
    checkpoint_every_updates: int | None = None
    """Also write it every this many updates (None = time only)."""
    interrupt_after_episodes: int | None = None
    """Simulate a kill: checkpoint and stop after this many episodes in this process (tests, job slots)."""
    tensorboard: bool = True
    """Write TensorBoard logs to ``out/tb``."""
    progress: bool = True
    """Show a progress bar per stage."""
    verbose: int = 0
    """SB3 verbosity."""

    def __post_init__(self) -> None:
        if isinstance(self.stages, str):
            self.stages = tuple(s.strip() for s in self.stages.split(",") if s.strip())
        self.stages = tuple(self.stages)
        self.baselines = tuple(self.baselines)

    def validate(self) -> None:
        """ValueError naming the bad field and what to give instead."""
        if not self.stages:
            raise ValueError(f"stages is empty; give some of {', '.join(STAGES)} (e.g. il,sim)")
        for s in self.stages:
            if s not in STAGES:
                raise ValueError(f"unknown stage {s!r}; stages are {', '.join(STAGES)} (e.g. il,sim)")
        if len(set(self.stages)) != len(self.stages):
            raise ValueError(f"stages {','.join(self.stages)} repeat a stage")
        if list(self.stages) != sorted(self.stages, key=STAGES.index):
            raise ValueError(f"stages must keep the order il, sim, real; got {','.join(self.stages)}")
        if self.devices is not None and self.topology is not None:
            raise ValueError("give devices or topology, not both")
        if self.devices is not None and self.devices < 1:
            raise ValueError(f"devices must be >= 1, got {self.devices}")
        if self.budget_minutes is not None and not self.budget_minutes > 0:
            raise ValueError(f"budget_minutes must be > 0, got {self.budget_minutes}")
        for s in STAGES:
            n = self.episodes(s)
            if n is not None and (not isinstance(n, (int, np.integer)) or n < 0):
                raise ValueError(f"{s}_episodes must be an integer >= 0, got {n!r}")
        if self.algo not in ("ppo", "reinforce"):
            raise ValueError(f"algo must be 'ppo' or 'reinforce', got {self.algo!r}")
        for name in ("il_envs", "il_batch_size", "il_buffer_size", "episodes_per_update", "ppo_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.il_beta_decay <= 1:
            raise ValueError(f"il_beta_decay must be in (0, 1], got {self.il_beta_decay}")
        if not 0 < self.gamma <= 1:
            raise ValueError(f"gamma must be in (0, 1], got {self.gamma}")
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError(f"torch_threads must be >= 1 or None, got {self.torch_threads}")
        if self.sample_decodes < 0:
            raise ValueError(f"sample_decodes must be >= 0, got {self.sample_decodes}")

    def episodes(self, stage: str) -> int | None:
        """The episode count set for ``stage`` (None = not set)."""
        return getattr(self, f"{stage}_episodes")

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["stages"] = list(self.stages)
        out["baselines"] = list(self.baselines)
        return out


# ============================================================================ the instance
@dataclass(frozen=True)
class Instance:
    """The graph, topology and simulator config every stage and the evaluation use."""

    graph: DataflowGraph
    topology: Topology
    config: SimConfig

    @classmethod
    def from_args(cls, args: TrainArgs) -> Instance:
        from doppler_gym import workloads
        from doppler_gym.envs.context import default_sim_config, resolve_graph

        if args.graph_params:
            if args.graph not in workloads.names():
                raise ValueError(f"graph_params only apply to workloads ({', '.join(workloads.names())}), "
                                 f"not to {args.graph!r}")
            graph = workloads.make(args.graph, **args.graph_params)
        else:
            graph = resolve_graph(args.graph)
        topology = Topology.preset(args.topology) if args.topology else Topology.uniform(args.devices or 4)
        config = SimConfig(**args.sim_config) if args.sim_config is not None else default_sim_config(graph)
        return cls(graph, topology, config)

    def sim_env(self, **kwargs: Any) -> gym.Env:
        """A ``Doppler-Sim-v0`` env on this instance."""
        return gym.make("Doppler-Sim-v0", graph=self.graph, topology=self.topology, sim_config=self.config,
                        disable_env_checker=True, **kwargs)


def make_stage_env(args: TrainArgs, inst: Instance, stage: str) -> gym.Env:
    """The env of a stage: the simulator for ``il``/``sim``, ``args.real_env_id`` for ``real``."""
    if stage != "real":
        return inst.sim_env()
    kwargs = dict(args.real_env_kwargs)
    if isinstance(kwargs.get("sim_config"), dict):  # JSON form of a SimConfig
        kwargs["sim_config"] = SimConfig(**kwargs["sim_config"])
    if args.real_env_id == REAL_ENV_ID:
        kwargs.setdefault("topology", inst.topology.n_devices)
        return gym.make(args.real_env_id, graph=inst.graph, disable_env_checker=True, **kwargs)
    kwargs.setdefault("topology", inst.topology)
    kwargs.setdefault("sim_config", inst.config)
    return gym.make(args.real_env_id, graph=inst.graph, disable_env_checker=True, **kwargs)


# ============================================================================ policies
def resolve_policy_class(spec: str = "auto") -> type:
    """``auto``: ``agents.policy.DopplerPolicy`` when it imports, else sb3-contrib's
    ``MaskableMultiInputActorCriticPolicy``; ``MultiInputPolicy``; or ``module:Class``."""
    if spec == "auto":
        try:
            return _import_object(DOPPLER_POLICY)
        except (ImportError, AttributeError):
            return _import_object(FALLBACK_POLICY)
    if spec in ("MultiInputPolicy", "fallback"):
        return _import_object(FALLBACK_POLICY)
    if spec in ("DopplerPolicy", "doppler"):
        return _import_object(DOPPLER_POLICY)
    if ":" not in spec:
        raise ValueError(f"policy {spec!r}: give 'auto', 'MultiInputPolicy', 'DopplerPolicy' or 'module:Class'")
    return _import_object(spec)


def policy_class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _import_object(path: str) -> Any:
    module, _, name = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def make_policy(
    policy_class: type, observation_space: gym.Space, action_space: gym.Space, lr: float,
    policy_kwargs: dict | None = None, device: str = "auto",
) -> torch.nn.Module:
    """A fresh policy for these spaces (its ``optimizer`` is Adam at ``lr``)."""
    from stable_baselines3.common.utils import get_device

    policy = policy_class(observation_space, action_space, lambda _: lr, **(policy_kwargs or {}))
    return policy.to(get_device(device))


def action_logits(policy: torch.nn.Module, obs: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(B, max_ops + max_devices)`` unmasked action scores of ``policy`` on a batch of observations.

    ``policy.action_logits`` when the policy has it (DopplerPolicy), else the logits of SB3's
    action distribution (normalised log-probabilities: the same softmax)."""
    if hasattr(policy, "action_logits"):
        return policy.action_logits(obs)
    return policy.get_distribution(obs).distribution.logits


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``logits`` with invalid actions (``mask == 0``) set to a large negative number."""
    return logits.masked_fill(~mask.bool(), _NEG)


def transfer_weights(policy: torch.nn.Module, state: dict[str, torch.Tensor]) -> tuple[list[str], list[str]]:
    """Copy the tensors of ``state`` whose name and shape match into ``policy``.

    Returns ``(loaded, skipped)`` parameter names; ``skipped`` are the policy's tensors left as
    initialised (missing from ``state`` or of another shape: e.g. an MLP's input layer on another
    graph size). A policy whose weights do not depend on the graph or device count (DopplerPolicy)
    loads everything."""
    own = policy.state_dict()
    loaded, skipped = [], []
    new_state = {}
    for name, tensor in own.items():
        src = state.get(name)
        if src is not None and tuple(src.shape) == tuple(tensor.shape):
            new_state[name] = src
            loaded.append(name)
        else:
            new_state[name] = tensor
            skipped.append(name)
    policy.load_state_dict(new_state)
    return loaded, skipped


def obs_to_tensors(obs: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    """A batched observation dict (leading batch axis) as torch tensors on ``device``."""
    return {k: torch.as_tensor(v, device=device) for k, v in obs.items()}


def stack_obs(obs_list: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.stack([o[k] for o in obs_list]) for k in obs_list[0]}


# ============================================================================ checkpoints
def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    """``torch.save`` to a temporary file, then ``os.replace``: a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """A checkpoint written by :func:`save_checkpoint` (tensors and plain Python only)."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise ValueError(f"checkpoint {str(path)!r} does not exist; give a file written by `doppler train` "
                         f"(DIR/{CHECKPOINT_NAME} or DIR/policy_<stage>.pt) or its folder")
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{str(path)!r} is not a doppler-gym training checkpoint (no format tag {CHECKPOINT_FORMAT!r})")
    return payload


def load_policy(
    checkpoint: str | os.PathLike | dict, env: gym.Env, device: str = "cpu", strict: bool = False,
) -> torch.nn.Module:
    """The checkpoint's policy, rebuilt for ``env``'s spaces (any graph or device count).

    Tensors whose shape differs (a policy whose weights depend on the padding sizes) stay as
    initialised, with a warning; ``strict=True`` raises instead."""
    payload = checkpoint if isinstance(checkpoint, dict) else load_checkpoint(checkpoint)
    cls = _import_object(payload["policy_class"])
    policy = make_policy(cls, env.observation_space, env.action_space, 1e-4, payload.get("policy_kwargs"), device)
    loaded, skipped = transfer_weights(policy, payload["policy_state"])
    if skipped:
        msg = (f"load_policy: {len(skipped)} of {len(loaded) + len(skipped)} tensors of {cls.__name__} do not match "
               f"this env's shapes and stay untrained ({', '.join(skipped[:4])}{', ...' if len(skipped) > 4 else ''})")
        if strict:
            raise ValueError(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    policy.set_training_mode(False)
    return policy


def _rng_state() -> dict[str, Any]:
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": [name, torch.as_tensor(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(_tuplify(state["python"]))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])


def _tuplify(x: Any) -> Any:
    return tuple(_tuplify(v) for v in x) if isinstance(x, (list, tuple)) else x


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


# ============================================================================ bookkeeping
@dataclass
class StageProgress:
    """Counters of one stage (saved in every checkpoint; a resumed run continues them)."""

    episodes: int = 0
    updates: int = 0
    env_steps: int = 0
    seconds: float = 0.0  # wall-clock time spent in the stage, over all processes [s]
    allotted_seconds: float | None = None  # its share of the budget [s], fixed at its start
    allotted_for_budget: float | None = None  # the budget [min] the share was computed for
    started: bool = False
    done: bool = False
    best_makespan: float = math.inf  # best training-episode makespan seen
    extra: dict = field(default_factory=dict)  # stage-specific scalars (REINFORCE baseline, PPO timesteps)


class MetricLog:
    """``metrics.jsonl`` (one JSON object per line) and, optionally, TensorBoard scalars."""

    def __init__(self, out: Path, tensorboard: bool) -> None:
        self.path = out / "metrics.jsonl"
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  closed in close()
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(out / "tb"))

    def write(self, kind: str, stage: str, step: int, **values: Any) -> None:
        row = {"kind": kind, "stage": stage, "step": int(step), "time": round(time.time(), 3)}
        row.update({k: (float(v) if isinstance(v, (np.floating, np.integer)) else v) for k, v in values.items()})
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        if self.writer is not None:
            for k, v in values.items():
                if isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool) and math.isfinite(v):
                    self.writer.add_scalar(f"{stage}/{k}", float(v), int(step))

    def close(self) -> None:
        self._file.close()
        if self.writer is not None:
            self.writer.close()


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl`` (or of ``DIR/metrics.jsonl``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class StateBuffer:
    """Ring buffer of imitation states: observation, valid mask, teacher mask, return.

    Static observation arrays (``op_features``, ``edge_index``, ...: one copy per graph) are kept
    once in a table and referenced by index; the dynamic ones are copied per state (int64 arrays
    stored as int32). Shapes: ``dyn[k]`` ``(capacity, *shape)``; ``mask``/``teacher``
    ``(capacity, n_actions) int8``; ``returns`` ``(capacity,) float32``.
    """

    def __init__(self, capacity: int, observation_space: gym.spaces.Dict) -> None:
        self.capacity = int(capacity)
        self.space = observation_space
        self.static_keys = [k for k in observation_space.spaces if k in STATIC_KEYS]
        self.dyn_keys = [k for k in observation_space.spaces if k not in STATIC_KEYS]
        self.dyn = {k: np.zeros((capacity, *sp.shape), _store_dtype(sp.dtype))
                    for k, sp in observation_space.spaces.items() if k in self.dyn_keys}
        self.static_table: list[dict[str, np.ndarray]] = []
        self._static_stack: dict[str, np.ndarray] | None = None
        self.static_idx = np.zeros(capacity, np.int32)
        self.mask: np.ndarray | None = None  # allocated on the first add
        self.teacher: np.ndarray | None = None
        self.returns = np.zeros(capacity, np.float32)
        self.ptr = 0
        self.size = 0

    def add(self, obs: dict[str, np.ndarray], mask: np.ndarray, teacher: np.ndarray) -> int:
        """Store one state; returns its slot (for :meth:`set_return`)."""
        if self.mask is None:
            self.mask = np.zeros((self.capacity, mask.shape[0]), np.int8)
            self.teacher = np.zeros((self.capacity, mask.shape[0]), np.int8)
        i = self.ptr
        for k in self.dyn_keys:
            self.dyn[k][i] = obs[k]
        self.static_idx[i] = self._static_index(obs)
        self.mask[i] = mask
        self.teacher[i] = teacher
        self.returns[i] = 0.0
        self.ptr = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        return i

    def set_return(self, slots: Sequence[int], returns: Sequence[float]) -> None:
        self.returns[np.asarray(slots, np.int64)] = returns

    def _static_index(self, obs: dict[str, np.ndarray]) -> int:
        table = self.static_table
        if table and all(np.array_equal(table[-1][k], obs[k]) for k in self.static_keys):
            return len(table) - 1
        for j, entry in enumerate(table):
            if all(np.array_equal(entry[k], obs[k]) for k in self.static_keys):
                return j
        table.append({k: np.array(obs[k]) for k in self.static_keys})
        self._static_stack = None
        return len(table) - 1

    def sample(self, batch_size: int, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
        """``(obs, mask, teacher, returns)`` of ``batch_size`` states drawn uniformly with replacement."""
        idx = rng.integers(0, self.size, size=batch_size)
        if self._static_stack is None:
            self._static_stack = {k: np.stack([e[k] for e in self.static_table]) for k in self.static_keys}
        obs = {k: self.dyn[k][idx].astype(self.space[k].dtype, copy=False) for k in self.dyn_keys}
        sidx = self.static_idx[idx]
        obs.update({k: self._static_stack[k][sidx] for k in self.static_keys})
        return obs, self.mask[idx], self.teacher[idx], self.returns[idx]

    def state_dict(self) -> dict[str, Any]:
        n = self.size
        return {
            "ptr": self.ptr, "size": n,
            "dyn": {k: torch.from_numpy(v[:n].copy()) for k, v in self.dyn.items()},
            "static_idx": torch.from_numpy(self.static_idx[:n].copy()),
            "static_table": [{k: torch.from_numpy(np.array(v)) for k, v in e.items()} for e in self.static_table],
            "mask": None if self.mask is None else torch.from_numpy(self.mask[:n].copy()),
            "teacher": None if self.teacher is None else torch.from_numpy(self.teacher[:n].copy()),
            "returns": torch.from_numpy(self.returns[:n].copy()),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        n = min(int(state["size"]), self.capacity)
        self.size, self.ptr = n, int(state["ptr"]) % self.capacity
        for k, v in state["dyn"].items():
            if k in self.dyn:
                self.dyn[k][:n] = v.numpy()[:n]
        self.static_idx[:n] = state["static_idx"].numpy()[:n]
        self.static_table = [{k: v.numpy() for k, v in e.items()} for e in state["static_table"]]
        self._static_stack = None
        if state["mask"] is not None:
            self.mask = np.zeros((self.capacity, state["mask"].shape[1]), np.int8)
            self.teacher = np.zeros_like(self.mask)
            self.mask[:n] = state["mask"].numpy()[:n]
            self.teacher[:n] = state["teacher"].numpy()[:n]
        self.returns[:n] = state["returns"].numpy()[:n]


def _store_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.int32) if np.dtype(dtype) == np.int64 else np.dtype(dtype)


# ============================================================================ rollouts
@dataclass
class Episode:
    """One finished episode of :func:`rollout`: the final info, rewards and (optionally) what was seen."""

    info: dict[str, Any]
    rewards: list[float] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)  # StateBuffer slots of its states
    obs: list[dict[str, np.ndarray]] = field(default_factory=list)  # when keep_obs
    masks: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    teacher_steps: int = 0
    agree: int = 0  # learner's greedy action in the teacher's set (teacher mode)

    @property
    def makespan(self) -> float:
        return float(self.info.get("makespan", math.nan))

    def returns(self, gamma: float) -> np.ndarray:
        r = np.asarray(self.rewards, np.float64)
        if gamma == 1.0:
            return np.cumsum(r[::-1])[::-1].copy()
        out = np.zeros_like(r)
        acc = 0.0
        for t in range(len(r) - 1, -1, -1):
            acc = r[t] + gamma * acc
            out[t] = acc
        return out


def rollout(
    policy: torch.nn.Module,
    envs: Sequence[gym.Env],
    seeds: Sequence[int | None],
    mode: str = "greedy",
    beta: float = 0.0,
    rng: np.random.Generator | None = None,
    buffer: StateBuffer | None = None,
    keep_obs: bool = False,
) -> list[Episode]:
    """Run one episode in each env in lockstep (one batched policy call per step).

    Args:
        mode: ``"greedy"`` (argmax of the masked scores), ``"sample"`` (from the masked softmax)
            or ``"dagger"`` (per env and step: a uniformly drawn teacher action with probability
            ``beta``, else a sample of the policy; every state goes to ``buffer`` with its teacher
            mask).
        seeds: reset seed of each env.
        keep_obs: keep observations, masks and actions (REINFORCE).
    """
    rng = rng if rng is not None else np.random.default_rng()
    device = policy.device
    obs = [env.reset(seed=s)[0] for env, s in zip(envs, seeds)]
    eps = [Episode(info={}) for _ in envs]
    active = list(range(len(envs)))
    while active:
        masks = np.stack([envs[i].get_wrapper_attr("action_masks")() for i in active])
        teacher = None
        use_teacher = np.zeros(len(active), bool)
        if mode == "dagger":
            teacher = np.stack([envs[i].get_wrapper_attr("teacher_mask")() for i in active])
            use_teacher = rng.random(len(active)) < beta
        actions = np.zeros(len(active), np.int64)
        need = np.flatnonzero(~use_teacher)
        if need.size:
            batch = obs_to_tensors(stack_obs([obs[active[j]] for j in need]), device)
            with torch.no_grad():
                scores = masked_logits(action_logits(policy, batch), torch.as_tensor(masks[need], device=device))
                if mode == "greedy":
                    chosen = scores.argmax(-1)
                else:
                    chosen = torch.distributions.Categorical(logits=scores).sample()
            actions[need] = chosen.cpu().numpy()
        for j, i in enumerate(active):
            ep = eps[i]
            if teacher is not None:
                if use_teacher[j]:
                    actions[j] = rng.choice(np.flatnonzero(teacher[j]))
                    ep.teacher_steps += 1
                else:
                    ep.agree += int(teacher[j][actions[j]])
                if buffer is not None:
                    ep.slots.append(buffer.add(obs[i], masks[j], teacher[j]))
            if keep_obs:
                ep.obs.append(obs[i])
                ep.masks.append(masks[j])
                ep.actions.append(int(actions[j]))
            obs[i], reward, terminated, truncated, info = envs[i].step(int(actions[j]))
            ep.rewards.append(float(reward))
            if terminated or truncated:
                ep.info = info
        active = [i for i in active if not eps[i].info]
    return eps


def decode(policy: torch.nn.Module, env: gym.Env, greedy: bool = True, seed: int | None = None) -> dict[str, Any]:
    """The final ``info`` of one episode of ``policy`` in ``env`` (greedy or sampled)."""
    return rollout(policy, [env], [seed], mode="greedy" if greedy else "sample")[0].info


# ============================================================================ the trainer
class Trainer:
    """Runs the stages of ``args`` on one policy; see the module docstring."""

    def __init__(self, args: TrainArgs) -> None:
        args.validate()
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.ckpt_path = self.out / CHECKPOINT_NAME
        seed_everything(args.seed)
        self.inst = Instance.from_args(args)
        self.eval_env = self.inst.sim_env()
        resume = load_checkpoint(self.ckpt_path) if args.resume and self.ckpt_path.is_file() else None
        init = load_checkpoint(args.init) if args.init and resume is None else None
        source = resume or init
        if source is not None and args.policy == "auto":  # keep the architecture that was trained
            self.policy_class = _import_object(source["policy_class"])
            args.policy_kwargs = dict(source.get("policy_kwargs") or {}) or args.policy_kwargs
        else:
            self.policy_class = resolve_policy_class(args.policy)
        self.policy = make_policy(self.policy_class, self.eval_env.observation_space, self.eval_env.action_space,
                                  args.il_lr, args.policy_kwargs, args.device)
        self.progress = {s: StageProgress() for s in args.stages}
        self.rng = np.random.default_rng(args.seed)
        self.resumed: dict[str, Any] | None = None  # the checkpoint being resumed (its stage-specific state)
        self.init_report: dict[str, Any] | None = None
        self.interrupted = False
        self._episodes_this_run = 0
        self._last_ckpt_time = time.monotonic()
        self._reference = math.nan
        self._lower_bound = math.nan

        self._stage: str | None = None  # the stage running now
        self.best_eval: dict[str, Any] = {}  # the best periodic greedy evaluation (policy_best.pt)

        if resume is not None:
            payload = resume
            self._check_same_instance(payload)
            self.policy.load_state_dict(payload["policy_state"])
            for s, d in payload["progress"].items():
                if s in self.progress:
                    self.progress[s] = StageProgress(**d)
            _set_rng_state(payload["rng"])
            self.rng.bit_generator.state = payload["trainer_rng"]
            self.best_eval = dict(payload.get("best_eval") or {})
            self.resumed = payload
        elif init is not None:
            payload = init
            loaded, skipped = transfer_weights(self.policy, payload["policy_state"])
            self.init_report = {"checkpoint": str(args.init), "from_graph": payload["args"].get("graph"),
                                "loaded": len(loaded), "skipped": skipped}
            if skipped:
                warnings.warn(f"init: {len(skipped)} tensors of the {args.init} policy do not fit this env's "
                              f"shapes and start untrained: {', '.join(skipped[:4])}", RuntimeWarning, stacklevel=2)
        self.log = MetricLog(self.out, args.tensorboard)

    def _check_same_instance(self, payload: dict[str, Any]) -> None:
        saved = payload.get("instance", {})
        here = self._instance_dict()
        if any(saved.get(k) != here[k] for k in ("graph", "n_ops", "n_devices")):
            raise ValueError(
                f"resume: {self.ckpt_path} was trained on {saved.get('graph')} ({saved.get('n_ops')} ops, "
                f"{saved.get('n_devices')} devices), not on {here['graph']} ({here['n_ops']} ops, {here['n_devices']} "
                f"devices); use another --out, or --init {self.ckpt_path} to fine-tune on this instance"
            )

    def _instance_dict(self) -> dict[str, Any]:
        return {"graph": self.inst.graph.name, "n_ops": self.inst.graph.n_ops,
                "n_devices": self.inst.topology.n_devices, "topology": self.inst.topology.name}

    # ------------------------------------------------------------------ driver
    def run(self) -> dict[str, Any]:
        """Run the remaining stages, then evaluate and write ``summary.json`` (unless interrupted)."""
        threads = torch.get_num_threads()
        if self.args.torch_threads:
            torch.set_num_threads(self.args.torch_threads)
        try:
            _, info = self.eval_env.reset(seed=self.args.seed)
            self._reference, self._lower_bound = info["reference_makespan"], info["lower_bound"]
            for stage in self.args.stages:
                prog = self.progress[stage]
                if prog.done and not self._extendable(stage):
                    continue
                prog.done = False
                self._allot(stage)
                self._stage = stage
                if stage == "il":
                    self.imitation()
                elif self.args.algo == "ppo":
                    self.ppo(stage)
                else:
                    self.reinforce(stage)
                if self.interrupted:
                    return {"interrupted": True, "stage": stage, "progress": self._progress_dict()}
                prog.done = True
                self.checkpoint(stage)
                self._snapshot(stage)
                self._stage = None
            return self.finish()
        except KeyboardInterrupt:  # Ctrl-C: keep the progress of the interrupted stage, then stop
            self.interrupted = True
            if self._stage is not None:
                path = self.checkpoint(self._stage)
                print(f"\ninterrupted: wrote {path}; resume=True (`--resume`) continues", flush=True)
            raise
        finally:
            self.log.close()
            torch.set_num_threads(threads)

    def _extendable(self, stage: str) -> bool:
        """A finished stage runs again on resume only if it is the last one started and its
        targets grew (more episodes or a larger budget than it ran with)."""
        started = [s for s in self.args.stages if self.progress[s].started]
        if not started or started[-1] != stage:
            return False
        later = [s for s in self.args.stages[self.args.stages.index(stage) + 1:]]
        if later:
            return False
        prog = self.progress[stage]
        target = self._episode_target(stage)
        more_episodes = target is not None and prog.episodes < target
        more_time = (self.args.budget_minutes is not None and prog.allotted_for_budget is not None
                     and self.args.budget_minutes > prog.allotted_for_budget)
        if more_time:
            prog.allotted_seconds = None
        return more_episodes or more_time

    def _episode_target(self, stage: str) -> int | None:
        n = self.args.episodes(stage)
        if n is None and self.args.budget_minutes is None:
            n = DEFAULT_EPISODES[stage]
        return n

    def _allot(self, stage: str) -> None:
        """Fix the stage's share of the budget at its start (kept on resume unless the budget changed)."""
        prog = self.progress[stage]
        prog.started = True
        budget = self.args.budget_minutes
        if budget is None:
            prog.allotted_seconds = prog.allotted_for_budget = None
            return
        if prog.allotted_seconds is not None and prog.allotted_for_budget == budget:
            return
        rest = self.args.stages[self.args.stages.index(stage):]
        used_before = sum(self.progress[s].seconds for s in self.args.stages if s not in rest)
        left = max(budget * 60.0 - used_before, 0.0)
        prog.allotted_seconds = left * STAGE_WEIGHTS[stage] / sum(STAGE_WEIGHTS[s] for s in rest)
        prog.allotted_for_budget = budget

    def _fraction(self, stage: str) -> float:
        """How far the stage is, in [0, 1]: the larger of its episode and time fractions."""
        prog = self.progress[stage]
        f = 0.0
        target = self._episode_target(stage)
        if target is not None:
            f = max(f, prog.episodes / target if target > 0 else 1.0)
        if prog.allotted_seconds is not None:
            f = max(f, prog.seconds / prog.allotted_seconds if prog.allotted_seconds > 0 else 1.0)
        return min(f, 1.0)

    def _out_of_time(self, stage: str, running: float = 0.0) -> bool:
        """Whether the stage's budget share is spent, counting ``running`` seconds not yet booked."""
        prog = self.progress[stage]
        return prog.allotted_seconds is not None and prog.seconds + running >= prog.allotted_seconds

    def _stage_over(self, stage: str) -> bool:
        return self._fraction(stage) >= 1.0

    def _should_interrupt(self) -> bool:
        n = self.args.interrupt_after_episodes
        return n is not None and self._episodes_this_run >= n

    # ------------------------------------------------------------------ stage 1: imitation
    def imitation(self) -> None:
        """DAgger on the critical-path teacher's action sets (see the module docstring)."""
        args, prog, policy = self.args, self.progress["il"], self.policy
        envs = [make_stage_env(args, self.inst, "il") for _ in range(args.il_envs)]
        buffer = StateBuffer(args.il_buffer_size, envs[0].observation_space)
        optimizer = torch.optim.Adam(policy.parameters(), lr=args.il_lr)
        if self.resumed is not None and self.resumed.get("stage") == "il":
            if self.resumed.get("optimizer_state") is not None:
                optimizer.load_state_dict(self.resumed["optimizer_state"])
            if self.resumed.get("il_buffer") is not None:
                buffer.load_state_dict(self.resumed["il_buffer"])
        self._stage_objects = {"optimizer": optimizer, "il_buffer": buffer}
        bar = _StageBar("il", self._episode_target("il"), prog, args.progress)
        has_values = hasattr(policy, "predict_values") and args.il_vf_coef > 0
        while not self._stage_over("il") and not self._should_interrupt():
            t0 = time.perf_counter()
            beta = max(0.0, 1.0 - self._fraction("il") / args.il_beta_decay)
            seeds = [args.seed + 1_000_003 * (k + 1) + prog.episodes for k in range(len(envs))]
            policy.set_training_mode(False)
            episodes = rollout(policy, envs, seeds, mode="dagger", beta=beta, rng=self.rng, buffer=buffer)
            new_states = 0
            for ep in episodes:
                buffer.set_return(ep.slots, ep.returns(args.gamma))
                new_states += len(ep.slots)
            # --- updates on the aggregated data
            policy.set_training_mode(True)
            n_updates = max(1, math.ceil(args.il_epochs * new_states / args.il_batch_size))
            stats: dict[str, list[float]] = {"cross_entropy": [], "accuracy": [], "entropy": [], "value_loss": []}
            for _ in range(n_updates):
                if self._out_of_time("il", time.perf_counter() - t0):  # a budget binds between updates too
                    break
                obs, mask, teacher, returns = buffer.sample(args.il_batch_size, self.rng)
                obs_t = obs_to_tensors(obs, policy.device)
                mask_t = torch.as_tensor(mask, device=policy.device).bool()
                teach_t = torch.as_tensor(teacher, device=policy.device).bool() & mask_t
                logits = action_logits(policy, obs_t)
                loss, parts = imitation_loss(logits, mask_t, teach_t, args.il_ent_coef)
                if has_values:
                    values = policy.predict_values(obs_t).flatten()
                    v_loss = F.mse_loss(values, torch.as_tensor(returns, device=policy.device))
                    loss = loss + args.il_vf_coef * v_loss
                    parts["value_loss"] = float(v_loss.detach())
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
                optimizer.step()
                for k, v in parts.items():
                    stats[k].append(v)
                prog.updates += 1
            # --- bookkeeping
            prog.seconds += time.perf_counter() - t0
            for ep in episodes:
                self._episode_done("il", ep.info, beta=beta,
                                   learner_agreement=ep.agree / max(len(ep.rewards) - ep.teacher_steps, 1))
            self.log.write("update", "il", prog.updates, beta=beta, buffer=buffer.size,
                           **{k: float(np.mean(v)) for k, v in stats.items() if v})
            bar.update(prog, len(episodes), ce=np.mean(stats["cross_entropy"]) if stats["cross_entropy"] else math.nan)
            self._maybe_checkpoint("il")
        bar.close()
        if self._should_interrupt():
            self.interrupted = True
            self.checkpoint("il")

    # ------------------------------------------------------------------ stages 2 and 3: PPO
    def ppo(self, stage: str) -> None:
        """MaskablePPO, one update per ``learn`` call so budgets and checkpoints act between updates."""
        from sb3_contrib import MaskablePPO
        from stable_baselines3.common.logger import Logger, configure
        from stable_baselines3.common.vec_env import DummyVecEnv

        args, prog = self.args, self.progress[stage]
        # The simulator stage steps episodes_per_update envs in lockstep (one batched policy call per
        # step, one whole episode each per update); the real stage uses one env (one device set) and
        # runs the update's episodes one after another.
        n_envs = args.episodes_per_update if stage == "sim" else 1
        envs = [make_stage_env(args, self.inst, stage) for _ in range(n_envs)]
        venv = DummyVecEnv([(lambda e=e: e) for e in envs])
        venv.seed(args.seed + 7919 * (STAGES.index(stage) + 1) + prog.episodes)
        episode_len = 2 * self.inst.graph.n_ops  # every step is valid under masking
        n_steps = episode_len * (args.episodes_per_update // n_envs)
        model = MaskablePPO(
            self.policy_class, venv, learning_rate=args.rl_lr, n_steps=n_steps,
            batch_size=max(1, round(args.ppo_minibatch_episodes * episode_len)), n_epochs=args.ppo_epochs,
            gamma=args.gamma, gae_lambda=args.gae_lambda, clip_range=args.clip_range, ent_coef=args.ent_coef,
            vf_coef=args.vf_coef, max_grad_norm=args.max_grad_norm, target_kl=args.target_kl,
            policy_kwargs=dict(args.policy_kwargs), seed=args.seed + STAGES.index(stage), device=args.device,
            verbose=args.verbose,
        )
        self._carry_weights(model.policy)
        model.lr_schedule = lambda _: self._rl_lr(stage)
        if args.tensorboard:
            model.set_logger(configure(str(self.out / "tb" / f"{stage}_ppo"), ["tensorboard"]))
        else:
            model.set_logger(Logger(folder=None, output_formats=[]))
        resuming = self.resumed is not None and self.resumed.get("stage") == stage
        if resuming:
            if self.resumed.get("optimizer_state") is not None:
                model.policy.optimizer.load_state_dict(self.resumed["optimizer_state"])
            model.num_timesteps = int(prog.extra.get("num_timesteps", 0))
            model._n_updates = int(prog.extra.get("n_updates", 0))
            _set_rng_state(self.resumed["rng"])  # MaskablePPO(seed=...) reseeded the global RNGs
        self.policy = model.policy
        self._stage_objects = {"optimizer": model.policy.optimizer}
        callback = _EpisodeCallback(lambda info: self._episode_done(stage, info))
        bar = _StageBar(stage, self._episode_target(stage), prog, args.progress)
        while not self._stage_over(stage) and not self._should_interrupt():
            t0 = time.perf_counter()
            before = prog.episodes
            model.learn(total_timesteps=n_steps, callback=callback, reset_num_timesteps=False, progress_bar=False)
            prog.updates += 1
            prog.extra.update(num_timesteps=int(model.num_timesteps), n_updates=int(model._n_updates))
            prog.seconds += time.perf_counter() - t0
            stats = {k.split("/")[1]: float(v) for k, v in model.logger.name_to_value.items() if k.startswith("train/")}
            if "entropy_loss" in stats:
                stats["entropy"] = -stats.pop("entropy_loss")
            stats.pop("learning_rate", None)
            self.log.write("update", stage, prog.updates, lr=self._rl_lr(stage), **stats)
            bar.update(prog, prog.episodes - before, best=prog.best_makespan)
            self._maybe_checkpoint(stage)
        bar.close()
        venv.close()
        if self._should_interrupt():
            self.interrupted = True
            self.checkpoint(stage)

    # ------------------------------------------------------------------ stages 2 and 3: REINFORCE
    def reinforce(self, stage: str) -> None:
        """REINFORCE with a moving-average baseline on ``episodes_per_update`` sampled episodes."""
        args, prog, policy = self.args, self.progress[stage], self.policy
        n_envs = args.episodes_per_update if stage == "sim" else 1  # one real env: one device set
        envs = [make_stage_env(args, self.inst, stage) for _ in range(n_envs)]
        fresh = make_policy(self.policy_class, envs[0].observation_space, envs[0].action_space, args.rl_lr,
                            args.policy_kwargs, args.device)
        self._carry_weights(fresh)
        self.policy = policy = fresh
        optimizer = torch.optim.Adam(policy.parameters(), lr=args.rl_lr)
        if self.resumed is not None and self.resumed.get("stage") == stage and self.resumed.get("optimizer_state"):
            optimizer.load_state_dict(self.resumed["optimizer_state"])
        self._stage_objects = {"optimizer": optimizer}
        bar = _StageBar(stage, self._episode_target(stage), prog, args.progress)
        while not self._stage_over(stage) and not self._should_interrupt():
            t0 = time.perf_counter()
            policy.set_training_mode(False)
            episodes: list[Episode] = []
            while len(episodes) < args.episodes_per_update:
                base = args.seed + 7919 * (STAGES.index(stage) + 1) + prog.episodes + len(episodes)
                seeds = [base + k for k in range(len(envs))]
                episodes += rollout(policy, envs, seeds, mode="sample", rng=self.rng, keep_obs=True)
            policy.set_training_mode(True)
            for g in optimizer.param_groups:
                g["lr"] = self._rl_lr(stage)
            baseline = prog.extra.get("baseline")
            finals = [ep.returns(args.gamma) for ep in episodes]
            if baseline is None:
                baseline = float(np.mean([r[0] for r in finals]))
            obs = obs_to_tensors(stack_obs([o for ep in episodes for o in ep.obs]), policy.device)
            mask = torch.as_tensor(np.stack([m for ep in episodes for m in ep.masks]), device=policy.device)
            act = torch.as_tensor([a for ep in episodes for a in ep.actions], device=policy.device)
            adv = torch.as_tensor(np.concatenate(finals) - baseline, dtype=torch.float32, device=policy.device)
            logp_all = torch.log_softmax(masked_logits(action_logits(policy, obs), mask), -1)
            logp = logp_all.gather(1, act[:, None]).squeeze(1)
            entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
            loss = -(adv * logp).sum() / len(episodes) - args.ent_coef * entropy
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
            optimizer.step()
            d = args.reinforce_baseline_decay
            prog.extra["baseline"] = d * baseline + (1 - d) * float(np.mean([r[0] for r in finals]))
            prog.updates += 1
            prog.seconds += time.perf_counter() - t0
            for ep in episodes:
                self._episode_done(stage, ep.info)
            self.log.write("update", stage, prog.updates, loss=float(loss.detach()), entropy=float(entropy.detach()),
                           baseline=baseline, lr=self._rl_lr(stage))
            bar.update(prog, len(episodes), best=prog.best_makespan)
            self._maybe_checkpoint(stage)
        bar.close()
        if self._should_interrupt():
            self.interrupted = True
            self.checkpoint(stage)

    def _rl_lr(self, stage: str) -> float:
        f = self._fraction(stage)
        return self.args.rl_lr + f * (self.args.rl_lr_final - self.args.rl_lr)

    def _carry_weights(self, target: torch.nn.Module) -> None:
        """Load the current policy's weights into a stage's new policy (shapes match on one instance)."""
        _, skipped = transfer_weights(target, self.policy.state_dict())
        if skipped:
            warnings.warn(f"{len(skipped)} policy tensors changed shape between stages and restart: "
                          f"{', '.join(skipped[:4])}", RuntimeWarning, stacklevel=3)

    # ------------------------------------------------------------------ per-episode bookkeeping
    def _episode_done(self, stage: str, info: dict[str, Any], **extra: float) -> None:
        prog = self.progress[stage]
        prog.episodes += 1
        self._episodes_this_run += 1
        makespan = float(info.get("makespan", math.nan))
        ref = float(info.get("reference_makespan", self._reference) or math.nan)
        prog.env_steps += 2 * self.inst.graph.n_ops
        prog.best_makespan = min(prog.best_makespan, makespan)
        step = self._global_episodes()
        self.log.write("episode", stage, step, stage_episode=prog.episodes, makespan=makespan,
                       ratio_to_critical_path=makespan / ref if ref else math.nan, **extra)
        every = self.args.eval_every_episodes
        if every and step % every == 0:
            greedy = decode(self.policy, self.eval_env, greedy=True, seed=self.args.seed)
            self.log.write("eval", stage, step, greedy_makespan=greedy["makespan"],
                           greedy_ratio_to_critical_path=greedy["makespan"] / self._reference)
            if greedy["makespan"] < self.best_eval.get("makespan", math.inf):  # keep the best policy seen
                self.best_eval = {"makespan": float(greedy["makespan"]), "stage": stage, "episode": step,
                                  "checkpoint": str(self.out / "policy_best.pt")}
                save_checkpoint(self.out / "policy_best.pt", self._payload(stage, full=False))

    def _global_episodes(self) -> int:
        return sum(p.episodes for p in self.progress.values())

    def _progress_dict(self) -> dict[str, dict[str, Any]]:
        return {s: dataclasses.asdict(p) for s, p in self.progress.items()}

    # ------------------------------------------------------------------ checkpoints
    def _maybe_checkpoint(self, stage: str) -> None:
        every = self.args.checkpoint_every_updates
        due_time = time.monotonic() - self._last_ckpt_time >= self.args.checkpoint_minutes * 60.0
        due_updates = every is not None and self.progress[stage].updates % every == 0
        if due_time or due_updates:
            self.checkpoint(stage)

    def _payload(self, stage: str, full: bool = True) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "stage": stage,
            "args": self.args.to_dict(), "policy_class": policy_class_path(self.policy_class),
            "policy_kwargs": dict(self.args.policy_kwargs), "policy_state": self.policy.state_dict(),
            "progress": self._progress_dict(), "instance": self._instance_dict(),
        }
        if full:
            objs = getattr(self, "_stage_objects", {})
            opt = objs.get("optimizer")
            payload["optimizer_state"] = opt.state_dict() if opt is not None else None
            payload["il_buffer"] = objs["il_buffer"].state_dict() if stage == "il" and "il_buffer" in objs else None
            payload["rng"] = _rng_state()
            payload["trainer_rng"] = self.rng.bit_generator.state
            payload["best_eval"] = dict(self.best_eval)
        return payload

    def checkpoint(self, stage: str) -> Path:
        """Write ``checkpoint.pt`` (everything a resume needs), atomically."""
        save_checkpoint(self.ckpt_path, self._payload(stage))
        self._last_ckpt_time = time.monotonic()
        return self.ckpt_path

    def _snapshot(self, stage: str) -> None:
        save_checkpoint(self.out / f"policy_{stage}.pt", self._payload(stage, full=False))

    # ------------------------------------------------------------------ final evaluation
    def finish(self) -> dict[str, Any]:
        """Greedy and sampled decodes, baselines, ``summary.json`` and the Gantt chart."""
        from doppler_gym import baselines
        from doppler_gym.sim.api import simulate
        from doppler_gym.sim.gantt import plot_gantt

        args, inst = self.args, self.inst
        t0 = time.perf_counter()
        policy = self.policy
        policy.set_training_mode(False)
        greedy = decode(policy, self.eval_env, greedy=True, seed=args.seed)
        best = None
        if args.sample_decodes:
            envs = [inst.sim_env() for _ in range(args.sample_decodes)]
            torch.manual_seed(args.seed)
            eps = rollout(policy, envs, [args.seed] * len(envs), mode="sample")
            best = min(eps, key=lambda e: e.makespan).info
        results: dict[str, float] = {}
        found = []
        for name in args.baselines:
            opts: dict[str, Any] = {}
            if "seed" in baselines.options(name):
                opts["seed"] = args.seed
            if name == "local_search":
                opts["seconds"] = args.baseline_seconds
                if found:
                    opts["starts"] = list(found)
            p = baselines.run(name, inst.graph, inst.topology, inst.config, **opts)
            found.append(p)
            results[name] = p.makespan
        cp = results.get("critical_path", self._reference)
        bound = self._lower_bound
        priorities = None
        if inst.config.queue_order == "priority":
            priorities = np.empty(inst.graph.n_ops)
            priorities[np.asarray(greedy["order"])] = np.arange(inst.graph.n_ops, dtype=np.float64)
        trace = simulate(inst.graph, np.asarray(greedy["assignment"]), inst.topology, priorities=priorities,
                         config=inst.config)
        gantt = self.out / "gantt.png"
        plot_gantt(trace, inst.graph, gantt, title=f"{inst.graph.name} on {inst.topology.name}: learned policy",
                   lower_bound=bound)
        stages = {}
        for s in args.stages:
            p = self.progress[s]
            stages[s] = {"episodes": p.episodes, "updates": p.updates, "env_steps": p.env_steps,
                         "seconds": round(p.seconds, 3),
                         "seconds_per_episode": p.seconds / p.episodes if p.episodes else None,
                         "allotted_seconds": p.allotted_seconds,
                         "best_training_makespan": p.best_makespan if math.isfinite(p.best_makespan) else None}
        summary = {
            "graph": inst.graph.name, "n_ops": inst.graph.n_ops, "topology": inst.topology.name,
            "n_devices": inst.topology.n_devices, "time_unit": trace.time_unit,
            "policy_class": policy_class_path(self.policy_class), "algo": args.algo, "seed": args.seed,
            "makespan": float(greedy["makespan"]),
            "assignment": np.asarray(greedy["assignment"]).tolist(), "order": np.asarray(greedy["order"]).tolist(),
            "best_of_k": None if best is None else {
                "k": args.sample_decodes, "makespan": float(best["makespan"]),
                "assignment": np.asarray(best["assignment"]).tolist(), "order": np.asarray(best["order"]).tolist()},
            "baselines": results, "critical_path": cp, "lower_bound": bound,
            "ratio_to_critical_path": float(greedy["makespan"]) / cp if cp else None,
            "ratio_to_lower_bound": float(greedy["makespan"]) / bound if bound else None,
            "best_eval": self.best_eval or None,
            "stages": stages, "budget_minutes": args.budget_minutes,
            "budget_split": {s: STAGE_WEIGHTS[s] / sum(STAGE_WEIGHTS[t] for t in args.stages) for s in args.stages},
            "init": self.init_report, "checkpoint": str(self.ckpt_path), "gantt": str(gantt),
            "eval_seconds": round(time.perf_counter() - t0, 3), "args": args.to_dict(),
        }
        _write_json(self.out / "summary.json", summary)
        return summary


def imitation_loss(
    logits: torch.Tensor, mask: torch.Tensor, teacher: torch.Tensor, ent_coef: float = 0.0
) -> tuple[torch.Tensor, dict[str, float]]:
    """``mean(-log sum_{a in teacher} pi(a|s)) - ent_coef * mean(entropy)`` under the masked softmax.

    Args:
        logits: ``(B, A)`` raw action scores.
        mask: ``(B, A) bool`` valid actions.
        teacher: ``(B, A) bool`` the teacher's (tied) actions, a non-empty subset of ``mask``.

    Returns:
        The loss and its parts as floats: ``cross_entropy``, ``entropy`` and ``accuracy`` (the
        argmax is a teacher action).
    """
    scores = masked_logits(logits, mask)
    log_z = torch.logsumexp(scores, -1)
    log_t = torch.logsumexp(scores.masked_fill(~teacher, _NEG), -1)
    ce = (log_z - log_t).mean()
    logp = scores - log_z[:, None]
    entropy = -(logp.exp() * logp).sum(-1).mean()
    loss = ce - ent_coef * entropy
    with torch.no_grad():
        acc = teacher.gather(1, scores.argmax(-1, keepdim=True)).float().mean()
    return loss, {"cross_entropy": float(ce.detach()), "entropy": float(entropy.detach()), "accuracy": float(acc)}


class _EpisodeCallback(BaseCallback):
    """Reports every finished episode (its final ``info``) of an SB3 rollout to ``on_episode``."""

    def __init__(self, on_episode: Callable[[dict], None]) -> None:
        super().__init__()
        self.on_episode = on_episode

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "makespan" in info:
                self.on_episode(info)
        return True


class _StageBar:
    """A tqdm bar per stage: over episodes when the stage has a count, else over its seconds."""

    def __init__(self, stage: str, episodes: int | None, prog: StageProgress, enabled: bool) -> None:
        self.by_time = episodes is None
        self.bar = None
        if not enabled:
            return
        from tqdm import tqdm

        if self.by_time:
            total = round(prog.allotted_seconds or 0)
            self.bar = tqdm(total=total, initial=min(int(prog.seconds), total), desc=stage, unit="s")
        else:
            self.bar = tqdm(total=episodes, initial=min(prog.episodes, episodes), desc=stage, unit="ep")

    def update(self, prog: StageProgress, n_episodes: int, **postfix: float) -> None:
        if self.bar is None:
            return
        if self.by_time:
            self.bar.update(max(0, min(int(prog.seconds), self.bar.total) - self.bar.n))
        else:
            self.bar.update(n_episodes)
        shown = {k: f"{v:.4g}" for k, v in postfix.items() if isinstance(v, (int, float, np.floating)) and math.isfinite(v)}
        self.bar.set_postfix(ep=prog.episodes, **shown, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=_json_default) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _json_default(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return str(x)


def train(args: TrainArgs) -> dict[str, Any]:
    """Run the stages of ``args``; returns the summary (also in ``args.out/summary.json``), or
    ``{"interrupted": True, ...}`` when ``interrupt_after_episodes`` stopped it early."""
    return Trainer(args).run()


def summary_keys() -> tuple[str, ...]:
    """Keys every ``summary.json`` has."""
    return ("makespan", "assignment", "order", "best_of_k", "baselines", "lower_bound", "critical_path",
            "ratio_to_critical_path", "stages", "gantt")


if __name__ == "__main__":  # python -m agents.train: the CLI's `doppler train`
    import sys

    from doppler_gym.cli.main import main

    sys.exit(main(["train", *sys.argv[1:]]))
