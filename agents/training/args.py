"""The arguments of a training run (:class:`TrainArgs`), grouped by stage and concern, and the stage constants.

:class:`TrainArgs` holds the run options (instance, stages, output, seed, budget, policy, device) and one
frozen group per stage or concern, the way rl-zoo groups hyperparameters per algorithm: ``episodes``
(:class:`StageEpisodes`), ``mix`` (:class:`MixArgs`), ``imitation`` (:class:`ImitationArgs`), ``rl``
(:class:`RLArgs`), ``ppo`` (:class:`PPOArgs`), ``reinforce`` (:class:`ReinforceArgs`), ``real``
(:class:`RealArgs`), ``evaluation`` (:class:`EvaluationArgs`), ``checkpoints`` (:class:`CheckpointArgs`)
and ``logging`` (:class:`LoggingArgs`). A setting is named by its dotted key (``imitation.lr``,
``rl.gamma``, ``seed``): the keys of ``doppler train --set KEY=VALUE`` and :meth:`TrainArgs.from_settings`.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.training.ablation import LEARN
from agents.training.graphs import MIX
from doppler_gym.envs.registration import REAL_ENV_ID

STAGES = ("il", "sim", "real")
TEACHERS = ("critical_path", "search")  # imitation.teacher values (agents.training.teacher)
STAGE_WEIGHTS = {"il": 1.0, "sim": 3.0, "real": 2.0}  # budget shares (normalised over the stages to run)
DEFAULT_EPISODES = {"il": 300, "sim": 1000, "real": 200}  # per stage, when neither episodes nor a budget is set


class _RecipeDefault:
    """Sentinel default of the settings a recipe sets (replaced by the recipe's value in ``__post_init__``)."""

    def __repr__(self) -> str:
        return "RECIPE"


RECIPE = _RecipeDefault()
BEST_POLICY_KWARGS = {"id_features": 16, "plc_affinity": True, "structure_features": 1, "heuristic_prior": True}
RECIPES: dict[str, dict[str, Any]] = {
    # the best measured recipe (docs/results/train_default.md): a search teacher (expert iteration), a
    # policy that corrects a list-scheduling prior, op-identity and structural GNN inputs, the PLC
    # affinity term, and a gentle RL stage that keeps
    # the imitated placement (rl.lr 1e-3 lost it within a few PPO updates)
    "best": {"imitation.teacher": "search", "rl.lr": 1e-4, "rl.lr_final": 1e-5, "ppo.target_kl": 0.01,
             "rl.anchor_coef": 1.0, "policy_kwargs": BEST_POLICY_KWARGS},
    # DOPPLER as published: imitation of the critical-path heuristic, then RL
    "doppler": {"imitation.teacher": "critical_path", "rl.lr": 1e-3, "rl.lr_final": 1e-4, "ppo.target_kl": 0.05,
                "rl.anchor_coef": 0.0, "policy_kwargs": {}},
}
RECIPE_FIELDS = ("imitation.teacher", "rl.lr", "rl.lr_final", "ppo.target_kl", "rl.anchor_coef", "policy_kwargs",
                 "imitation.teacher_evals", "imitation.teacher_restarts", "imitation.teacher_batch")
TEACHER_EVALS = {"one": 200_000, "mix": 20_000}  # the search teacher's evaluations: one graph, per graph of a mix
# independent restarts of the search teacher (imitation.teacher_evals / 4 evaluations each) beside its main run:
# one local search ends in one of several basins by luck (docs/results/train_default.md), the best of many
# runs does not; none per graph of a mix, where the teacher runs once per drawn graph
TEACHER_RESTARTS = {"one": 16, "mix": 0}
# neighbours per step of the search teacher: at a fixed count of evaluations, small batches take more steps
# and reach the best known basin far more often on one graph (docs/results/train_default.md); on a mix the
# per-graph search stays at local_search's default (a small batch costs about 3x the wall clock per evaluation)
TEACHER_BATCH = {"one": 16, "mix": 256}


def _spec_tuple(value: Any) -> tuple[str, ...]:
    """``"a;b"`` (the CLI's ``--set``) or a sequence of strings -> a tuple of strings."""
    if isinstance(value, str):
        return tuple(t.strip() for t in value.split(";") if t.strip())
    return tuple(value)


def _normalise_tuples(group: Any, names: tuple[str, ...]) -> None:
    """Store the fields ``names`` of a frozen group as tuples (:func:`_spec_tuple`)."""
    for name in names:
        object.__setattr__(group, name, _spec_tuple(getattr(group, name)))


# ============================================================================ the groups
@dataclass(frozen=True)
class StageEpisodes:
    """Episodes per stage (``--episodes il=300,sim=2000``). None: unbounded under a budget, else
    :data:`DEFAULT_EPISODES`. Every stage rounds up to whole iterations (``imitation.envs`` episodes
    for il, ``rl.episodes_per_update`` for RL)."""

    il: int | None = None
    """Imitation episodes."""
    sim: int | None = None
    """Simulator RL episodes."""
    real: int | None = None
    """Real-system RL episodes."""

    def count(self, stage: str) -> int | None:
        """The episode count set for ``stage`` (one of :data:`STAGES`; None = not set)."""
        return getattr(self, stage)


@dataclass(frozen=True)
class MixArgs:
    """Training on a mix of graphs and topologies (``graph="mix"``, see :mod:`agents.training.graphs`)."""

    graphs: tuple[str, ...] = ()
    """With ``graph="mix"``: graph specs ``NAME[:KEY=VALUE,...]`` drawn uniformly per episode; a value may
    be a range ``LO..HI`` and a workload's unset ``seed`` is drawn (``random:n_ops=40..80``, ``chainmm``,
    ``paper/ffnn``); a string ``"a;b"`` is split at ``;``."""
    topologies: tuple[str, ...] = ()
    """Topologies drawn per training episode (device counts ``"2"`` or preset names ``"p100x4"``);
    the device padding covers the largest; empty = ``devices``/``topology`` only."""
    pool: int | None = None
    """Each spec draws from a fixed pool of this many graphs (graph ``j`` of spec ``i`` built from
    seed ``(seed, i, j)``), so the search teacher's targets are reused; None = a fresh graph per draw."""
    max_ops: int | None = None
    """Observation padding [ops]; None = 1.25 x the largest sampled or held-out graph."""
    max_edges: int | None = None
    """Observation padding [edges] (same rule)."""

    def __post_init__(self) -> None:
        _normalise_tuples(self, ("graphs", "topologies"))


@dataclass(frozen=True)
class ImitationArgs:
    """Stage ``il``: imitation of a teacher, DAgger style (:mod:`agents.training.imitation`)."""

    lr: float = 1e-3
    """Adam learning rate (the authors' config)."""
    envs: int = 8
    """Episodes rolled in lockstep per iteration (one batched policy call per step)."""
    beta_decay: float = 0.5
    """Fraction of the stage over which the teacher probability beta falls from 1 to 0."""
    batch_size: int = 256
    """States per gradient step (also the imitation anchor's, :mod:`agents.training.anchor`)."""
    epochs: float = 4.0
    """Gradient samples per newly visited state (updates per iteration = ceil(epochs * new / batch_size))."""
    buffer_size: int = 10_000
    """States kept [states] (ring buffer of the most recent visits; also the anchor's)."""
    ent_coef: float = 1e-3
    """Entropy bonus weight (the authors' imitation config)."""
    label_smoothing: float = 0.1
    """Label smoothing of the imitation loss (:func:`agents.training.imitation.imitation_loss`): keeps
    every valid action's probability above zero, so the sampled episodes of the RL stages differ from
    the teacher's (0: the policy copies the teacher's argmax and samples only among exact ties)."""
    vf_coef: float = 0.5
    """Weight of the value regression on episode returns (warms the critic for RL; 0 = off)."""
    teacher: Any = RECIPE
    """Whom imitation copies: ``critical_path`` (DOPPLER's teacher) or ``search`` (PLC follows the
    local-search placement found from the critical-path and HEFT ones; on a mix one per drawn graph,
    cached): see :mod:`agents.training.teacher`. Default: the recipe's."""
    teacher_evals: Any = RECIPE
    """Simulated neighbours of the search teacher's local search [evaluations] (a count, not seconds:
    the same target on every machine); default 200,000 on one graph, 20,000 per graph of a mix."""
    teacher_restarts: Any = RECIPE
    """The most independent restarts of the search teacher beside its main run (``teacher_evals // 4``
    simulated neighbours each, their own seeds; the best placement of all runs is the target; fewer on
    graphs over 1,000 ops: :func:`agents.training.teacher.search_placement`); default 16 on one graph,
    0 on a mix."""
    teacher_batch: Any = RECIPE
    """Simulated neighbours per step of the search teacher's runs (``local_search``'s ``batch_size``);
    default 16 on one graph, 256 on a mix."""
    teacher_cache: int = 512
    """Search targets kept (LRU) on a mix [graphs]."""


@dataclass(frozen=True)
class RLArgs:
    """Stages ``sim`` and ``real``: what MaskablePPO and REINFORCE share (:mod:`agents.training.rl`)."""

    lr: Any = RECIPE
    """Initial learning rate (recipe ``best``: 1e-4, ``doppler``: 1e-3). The paper's 1e-4 is for a loss
    summed over an episode's steps; PPO averages them (DOPPLER's recipe on paper/chainmm, 3 minutes:
    1e-3 reached 0.81 x critical path, 3e-4 and 1e-4 0.94)."""
    lr_final: Any = RECIPE
    """Learning rate at the end of a stage (linear decay by stage progress, as in the paper;
    recipe ``best``: 1e-5, ``doppler``: 1e-4)."""
    gamma: float = 1.0
    """Discount (also of the returns imitation's value regression fits); 1: the reward is terminal
    (the authors' hidden 0.99 down-weighted early steps)."""
    episodes_per_update: int = 4
    """Whole episodes per update (PPO's n_steps = this x episode length; REINFORCE's batch)."""
    ent_coef: float = 0.0
    """Entropy bonus (the authors' RL configs use 0)."""
    max_grad_norm: float = 0.5
    """Gradient norm clip (PPO, REINFORCE and the imitation anchor)."""
    anchor_coef: Any = RECIPE
    """Weight of the imitation anchor (:mod:`agents.training.anchor`): after each update,
    ``anchor_updates`` steps of this times the imitation loss on the teacher's episodes keep the
    imitated placement likely (recipe ``best``: 1.0, ``doppler``: 0 = off, so RL may leave the
    critical-path teacher)."""
    anchor_updates: int = 8
    """Gradient steps of the anchor per RL update (``imitation.batch_size`` teacher states each)."""
    anchor_episodes: int = 8
    """Teacher episodes whose states the anchor imitates (collected at each RL stage's start)."""


@dataclass(frozen=True)
class PPOArgs:
    """MaskablePPO (``algo="ppo"``, sb3-contrib) beyond :class:`RLArgs`."""

    epochs: int = 4
    """Epochs per update."""
    minibatch_episodes: float = 1.0
    """Minibatch size [episodes] (x episode length steps)."""
    clip_range: float = 0.2
    """Clip range of the probability ratio."""
    vf_coef: float = 0.5
    """Value loss weight."""
    gae_lambda: float = 1.0
    """GAE lambda; 1 = Monte-Carlo returns minus the critic (with one terminal reward over 2 n_ops
    steps, lambda < 1 lets an unsure critic mute the signal of early decisions: on paper/chainmm 0.95
    did not improve on the imitation policy in 3 minutes, 1.0 did)."""
    target_kl: Any = RECIPE
    """Early stop of an update's epochs (protects the imitation weights); None = off (recipe
    ``best``: 0.01, ``doppler``: 0.05)."""


@dataclass(frozen=True)
class ReinforceArgs:
    """REINFORCE (``algo="reinforce"``, the paper's) beyond :class:`RLArgs`."""

    baseline: str = "ema"
    """The return baseline: ``ema`` (the paper's: a moving average of past batches' returns) or
    ``batch`` (leave-one-out: each episode's return minus the mean of the other episodes of its batch,
    all of the same instance: RLOO, Kool et al. 2019b; POMO, Kwon et al. 2020; needs
    ``rl.episodes_per_update >= 2``)."""
    baseline_decay: float = 0.9
    """With ``ema``: moving average factor of the return baseline."""


@dataclass(frozen=True)
class RealArgs:
    """Stage ``real``: the env it trains on."""

    env_id: str = REAL_ENV_ID
    """Env id (made with the graph and device count, plus ``env_kwargs``)."""
    env_kwargs: dict = field(default_factory=dict)
    """Extra keyword arguments of the env (``devices="cuda:0,1,2,3"``, ``repeats=3``, ...; a
    ``sim_config`` given as a dict of SimConfig fields becomes a SimConfig)."""


@dataclass(frozen=True)
class EvaluationArgs:
    """Periodic and final evaluation, and the stop at the lower bound."""

    every_episodes: int = 20
    """Greedy decode in the simulator every this many training episodes (logged); 0 = off."""
    stop_at_bound: bool = True
    """On one graph and one topology (no ``mix.graphs``/``mix.topologies``): end the simulator stages
    (``il``, ``sim``) once a periodic greedy decode reaches the makespan lower bound where that proves
    optimality (one stream, no jitter: :func:`doppler_gym.sim.bounds.reaches_bound`). The policy is then
    optimal on its graph and more training could only move it away; a ``real`` stage still runs."""
    sample_decodes: int = 16
    """K sampled decodes of the final policy (the summary reports the best)."""
    baselines: tuple[str, ...] = ("critical_path", "heft", "random", "local_search")
    """Baselines of the summary (doppler_gym.baselines names)."""
    baseline_seconds: float = 5.0
    """Local search budget of the summary [s]."""
    held_out: tuple[str, ...] = ()
    """Held-out graph specs (fixed: no ranges) evaluated at the end (``summary["held_out"]``): greedy and
    best-of-K decodes against critical path. With ``graph="mix"`` the first one is the main graph
    (periodic evaluations, Gantt chart; the mix's first draw if none is given)."""

    def __post_init__(self) -> None:
        _normalise_tuples(self, ("baselines", "held_out"))


@dataclass(frozen=True)
class CheckpointArgs:
    """When ``checkpoint.pt`` is written."""

    minutes: float = 5.0
    """Write it at least this often [min] (and at every stage end)."""
    every_updates: int | None = None
    """Also write it every this many updates (None = time only)."""
    interrupt_after_episodes: int | None = None
    """Simulate a kill: checkpoint and stop after this many episodes in this process (tests, job slots)."""


@dataclass(frozen=True)
class LoggingArgs:
    """What the run shows and logs besides ``metrics.jsonl``."""

    tensorboard: bool = True
    """Write TensorBoard logs to ``out/tb``."""
    progress: bool = True
    """Show a progress bar per stage."""
    verbose: int = 0
    """SB3 verbosity."""


GROUPS: dict[str, type] = {
    "episodes": StageEpisodes, "mix": MixArgs, "imitation": ImitationArgs, "rl": RLArgs, "ppo": PPOArgs,
    "reinforce": ReinforceArgs, "real": RealArgs, "evaluation": EvaluationArgs, "checkpoints": CheckpointArgs,
    "logging": LoggingArgs,
}  # TrainArgs field name -> its group class


# ============================================================================ arguments
@dataclass(frozen=True)
class TrainArgs:
    """Everything a training run depends on (JSON-serialisable: :meth:`to_dict`; stored in every checkpoint).

    The run options are fields; the settings of each stage or concern are a frozen group (see the
    module docstring). A group may be given as its class or as a dict of its fields
    (``TrainArgs(imitation={"lr": 3e-4}, episodes={"il": 8})``); :meth:`from_settings` also takes
    dotted keys (``{"imitation.lr": 3e-4}``).
    """

    # --- the recipe
    recipe: str = "best"
    """Defaults of the settings left unset (:data:`RECIPE_FIELDS`): ``best`` (the best measured recipe:
    search teacher, heuristic prior, op-identity and structural inputs, PLC affinity, gentle RL; with
    ``learn`` sel or plc the critical-path teacher, since the ablations are DOPPLER's) or ``doppler`` (the
    published recipe: critical-path teacher, rl.lr 1e-3, plain policy). Explicit values always win."""

    # --- the instance
    graph: str = "paper/chainmm"
    """A paper graph name (``paper/chainmm``), a workload name (``chainmm``), a .txt/.json file, or
    ``"mix"``: a new graph per training episode from ``mix.graphs`` (see :mod:`agents.training.graphs`)."""
    graph_params: dict = field(default_factory=dict)
    """Workload generator parameters (``{"n_ops": 12}`` for ``random``)."""
    devices: int | None = None
    """``Topology.uniform(devices)``; default 4 (exclusive with ``topology``)."""
    topology: str | None = None
    """A topology preset name (``p100x4``, ``uniform8``) instead of ``devices``."""
    sim_config: dict | None = None
    """``SimConfig`` fields; ``None``: ``doppler_gym.instances.default_config`` of the graph on the topology."""
    learn: str = "both"
    """Which decisions the policy learns: ``both`` (DOPPLER), ``sel`` (the critical-path teacher places: PLC
    ablation off) or ``plc`` (the teacher selects); see :mod:`agents.training.ablation`."""

    # --- the run
    stages: tuple[str, ...] = ("il", "sim")
    """Stages to run, in order, among ``il``, ``sim``, ``real`` (a string ``"il,sim"`` is split at commas)."""
    algo: str = "ppo"
    """RL algorithm of the sim and real stages: ``ppo`` (sb3-contrib MaskablePPO) or ``reinforce`` (the
    paper's REINFORCE with a baseline)."""
    out: str = "out/train"
    """Output folder (checkpoints, logs, summary)."""
    seed: int = 0
    """Seeds Python, NumPy, torch, the envs and the baselines."""
    budget_minutes: float | None = None
    """Wall-clock budget of the training stages [min], split by ``STAGE_WEIGHTS``; None = episodes only."""
    resume: bool = False
    """Continue from ``out/checkpoint.pt`` (counters, optimizer, RNG, buffer); a fresh run if it is missing."""
    init: str | None = None
    """Start from the weights of this checkpoint (another graph or device count: matching tensors only)."""
    policy: str = "auto"
    """``auto`` (DopplerPolicy if importable, else MultiInputPolicy), ``MultiInputPolicy``, or ``module:Class``."""
    policy_kwargs: Any = RECIPE
    """Keyword arguments of the policy class (JSON values only); by default the recipe's for
    DopplerPolicy (``best``: :data:`BEST_POLICY_KWARGS`), none for another class."""
    device: str = "auto"
    """torch device of the policy (``auto``: CUDA when available)."""
    torch_threads: int | None = 1
    """torch intra-op threads while training (restored after). 1: the networks are small, and on a busy
    CPU more threads are much slower (OpenMP threads spin for cores that other processes also use, and
    imitation on chainmm can take tens of times longer); None = leave as is."""
    ray_address: str | None = None
    """Ray cluster of the sim stage's PPO rollouts (Ray actors, up to one per env: :mod:`agents.distributed`):
    ``"local"`` (a Ray instance on this machine), ``"auto"`` (the cluster ``ray start`` joined) or
    ``HOST:6379``; None = the envs run in this process. Same seeds, same run either way."""

    # --- the groups (GROUPS)
    episodes: StageEpisodes = field(default_factory=StageEpisodes)
    """Episodes per stage (:class:`StageEpisodes`)."""
    mix: MixArgs = field(default_factory=MixArgs)
    """The graph and topology mix (:class:`MixArgs`)."""
    imitation: ImitationArgs = field(default_factory=ImitationArgs)
    """Stage ``il`` (:class:`ImitationArgs`)."""
    rl: RLArgs = field(default_factory=RLArgs)
    """Stages ``sim`` and ``real`` (:class:`RLArgs`)."""
    ppo: PPOArgs = field(default_factory=PPOArgs)
    """MaskablePPO (:class:`PPOArgs`)."""
    reinforce: ReinforceArgs = field(default_factory=ReinforceArgs)
    """REINFORCE (:class:`ReinforceArgs`)."""
    real: RealArgs = field(default_factory=RealArgs)
    """The real stage's env (:class:`RealArgs`)."""
    evaluation: EvaluationArgs = field(default_factory=EvaluationArgs)
    """Evaluations, summary baselines, stop at the bound (:class:`EvaluationArgs`)."""
    checkpoints: CheckpointArgs = field(default_factory=CheckpointArgs)
    """Checkpoint timing (:class:`CheckpointArgs`)."""
    logging: LoggingArgs = field(default_factory=LoggingArgs)
    """TensorBoard, progress bars, verbosity (:class:`LoggingArgs`)."""

    def __post_init__(self) -> None:
        if self.recipe not in RECIPES:
            raise ValueError(f"unknown recipe {self.recipe!r}; recipes are {', '.join(RECIPES)}")
        for name, cls in GROUPS.items():  # a group given as a dict of its fields
            value = getattr(self, name)
            if isinstance(value, Mapping):
                object.__setattr__(self, name, _group_from_mapping(name, cls, value))
            elif not isinstance(value, cls):
                raise TypeError(f"TrainArgs.{name} must be a {cls.__name__} or a dict of its fields "
                                f"({', '.join(_field_names(cls))}), got {value!r}")
        stages = self.stages
        if isinstance(stages, str):
            stages = [s.strip() for s in stages.split(",") if s.strip()]
        object.__setattr__(self, "stages", tuple(stages))
        self._apply_recipe()

    def _apply_recipe(self) -> None:
        """Replace every setting still at :data:`RECIPE` by the recipe's value (see :attr:`recipe`)."""
        values = dict(RECIPES[self.recipe])
        if self.learn != "both":  # the paper's ablations imitate the critical-path teacher
            values["imitation.teacher"] = "critical_path"
        size = "mix" if self.graph == MIX else "one"
        values["imitation.teacher_evals"] = TEACHER_EVALS[size]
        values["imitation.teacher_restarts"] = TEACHER_RESTARTS[size]
        values["imitation.teacher_batch"] = TEACHER_BATCH[size]
        if not (self.policy == "auto" or str(self.policy).endswith("DopplerPolicy")):
            values["policy_kwargs"] = {}  # the recipe's kwargs are DopplerPolicy's
        changes: dict[str, dict[str, Any]] = {}
        for key in RECIPE_FIELDS:
            if self.setting(key) is RECIPE:
                value = values[key]
                group, _, name = key.rpartition(".")
                changes.setdefault(group, {})[name] = dict(value) if isinstance(value, dict) else value
        for group, fields in changes.items():
            if group:
                object.__setattr__(self, group, dataclasses.replace(getattr(self, group), **fields))
            else:
                for name, value in fields.items():
                    object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ settings by dotted key
    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> TrainArgs:
        """TrainArgs from settings by key, applied in order (a later key wins): a run option (``"seed"``),
        a dotted group setting (``"imitation.lr"``), or a group name with a dict of its fields
        (``"imitation": {"lr": 3e-4}``, merged field by field with the other keys of that group).

        Raises:
            ValueError: an unknown key, naming the valid keys and the closest one.
        """
        top: dict[str, Any] = {}
        groups: dict[str, dict[str, Any]] = {}
        for key, value in settings.items():
            if key in GROUPS and isinstance(value, GROUPS[key]):
                value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            if key in GROUPS and isinstance(value, Mapping):
                for name, v in value.items():
                    setting_field(f"{key}.{name}")  # the same error for an unknown field
                    groups.setdefault(key, {})[name] = v
                continue
            setting_field(key)
            group, _, name = key.rpartition(".")
            if group:
                groups.setdefault(group, {})[name] = value
            else:
                top[key] = value
        return cls(**top, **groups)

    def setting(self, key: str) -> Any:
        """The value of a setting by key (``"imitation.lr"``, ``"seed"``)."""
        setting_field(key)
        value = self
        for part in key.split("."):
            value = getattr(value, part)
        return value

    def replace(self, settings: Mapping[str, Any]) -> TrainArgs:
        """A copy with ``settings`` changed (keys as in :meth:`from_settings`); settings already resolved
        from the recipe keep their values."""
        return TrainArgs.from_settings({**self.to_dict(), **settings})

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        """ValueError naming the bad setting (by its key) and what to give instead."""
        im, rl, mix = self.imitation, self.rl, self.mix
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
            n = self.episodes.count(s)
            if n is not None and (not isinstance(n, (int, np.integer)) or n < 0):
                raise ValueError(f"episodes.{s} must be an integer >= 0, got {n!r}")
        if self.algo not in ("ppo", "reinforce"):
            raise ValueError(f"algo must be 'ppo' or 'reinforce', got {self.algo!r}")
        if im.teacher not in TEACHERS:
            raise ValueError(f"imitation.teacher must be one of {', '.join(TEACHERS)}, got {im.teacher!r}")
        if im.teacher == "search" and self.learn != "both":
            raise ValueError("imitation.teacher='search' imitates a placement with both decisions learned: give "
                             "learn='both' (or use imitation.teacher='critical_path')")
        if not isinstance(self.evaluation.stop_at_bound, bool):
            raise ValueError(f"evaluation.stop_at_bound must be True or False, got {self.evaluation.stop_at_bound!r}")
        if im.teacher_cache < 1:
            raise ValueError(f"imitation.teacher_cache must be >= 1, got {im.teacher_cache}")
        if mix.pool is not None and (self.graph != MIX or mix.pool < 1):
            raise ValueError(f"mix.pool applies to graph='mix' and must be >= 1, got {mix.pool}")
        if mix.topologies and "real" in self.stages:
            raise ValueError("mix.topologies is for the simulator stages (il, sim); the real stage runs on one "
                             "topology")
        if not isinstance(self.policy_kwargs, dict):
            raise ValueError(f"policy_kwargs must be a dict, got {self.policy_kwargs!r}")
        if im.teacher_evals < 1:
            raise ValueError(f"imitation.teacher_evals must be >= 1, got {im.teacher_evals}")
        if isinstance(im.teacher_restarts, bool) or not isinstance(im.teacher_restarts, int) \
                or im.teacher_restarts < 0:
            raise ValueError(f"imitation.teacher_restarts must be an integer >= 0, got {im.teacher_restarts!r}")
        if isinstance(im.teacher_batch, bool) or not isinstance(im.teacher_batch, int) or im.teacher_batch < 1:
            raise ValueError(f"imitation.teacher_batch must be an integer >= 1, got {im.teacher_batch!r}")
        if self.reinforce.baseline not in ("ema", "batch"):
            raise ValueError(f"reinforce.baseline must be 'ema' or 'batch', got {self.reinforce.baseline!r}")
        if self.algo == "reinforce" and self.reinforce.baseline == "batch" and rl.episodes_per_update < 2:
            raise ValueError("reinforce.baseline='batch' compares the episodes of one update: give "
                             f"rl.episodes_per_update >= 2 (got {rl.episodes_per_update})")
        if isinstance(rl.anchor_coef, bool) or not isinstance(rl.anchor_coef, (int, float)) \
                or not rl.anchor_coef >= 0:
            raise ValueError(f"rl.anchor_coef must be a number >= 0 (0 = no imitation anchor), "
                             f"got {rl.anchor_coef!r}")
        if rl.anchor_updates < 0:
            raise ValueError(f"rl.anchor_updates must be >= 0 (0 = no imitation anchor), got {rl.anchor_updates}")
        for key in ("imitation.envs", "imitation.batch_size", "imitation.buffer_size", "rl.episodes_per_update",
                    "ppo.epochs", "rl.anchor_episodes"):
            if self.setting(key) < 1:
                raise ValueError(f"{key} must be >= 1, got {self.setting(key)}")
        if not 0 <= im.label_smoothing < 1:
            raise ValueError(f"imitation.label_smoothing must be in [0, 1), got {im.label_smoothing}")
        if not 0 < im.beta_decay <= 1:
            raise ValueError(f"imitation.beta_decay must be in (0, 1], got {im.beta_decay}")
        if not 0 < rl.gamma <= 1:
            raise ValueError(f"rl.gamma must be in (0, 1], got {rl.gamma}")
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError(f"torch_threads must be >= 1 or None, got {self.torch_threads}")
        if self.learn not in LEARN:
            raise ValueError(f"learn must be one of {', '.join(LEARN)} (the decisions the policy learns), "
                             f"got {self.learn!r}")
        if (self.graph == MIX) != bool(mix.graphs):
            raise ValueError("graph='mix' and mix.graphs go together: give graph='mix' with mix.graphs=[specs] "
                             "(e.g. ['random:n_ops=40..80', 'chainmm']), or a single graph without mix.graphs")
        if self.graph == MIX and self.graph_params:
            raise ValueError("graph_params do not apply to graph='mix'; put the parameters in the mix.graphs specs")
        if self.graph == MIX and "real" in self.stages:
            raise ValueError("the real stage runs on one graph; train the mix with stages il,sim, then --init on the "
                             "real graph")
        for key in ("mix.max_ops", "mix.max_edges"):
            v = self.setting(key)
            if v is not None and (not isinstance(v, (int, np.integer)) or v < 1):
                raise ValueError(f"{key} must be an integer >= 1 or None, got {v!r}")
        if self.evaluation.sample_decodes < 0:
            raise ValueError(f"evaluation.sample_decodes must be >= 0, got {self.evaluation.sample_decodes}")
        if self.ray_address is not None and (self.algo != "ppo" or "sim" not in self.stages):
            raise ValueError("ray_address (--ray) moves the sim stage's PPO rollouts to Ray: give algo='ppo' and a "
                             "sim stage, or leave it unset")

    def to_dict(self) -> dict[str, Any]:
        """The arguments as plain JSON values: run options, and each group as a dict of its fields
        (``TrainArgs(**args.to_dict())`` is ``args`` again)."""
        return _lists(dataclasses.asdict(self))


def _lists(value: Any) -> Any:
    """``value`` with every tuple turned into a list (JSON, ``torch.load(weights_only=True)``)."""
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value


def _field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _group_from_mapping(name: str, cls: type, values: Mapping[str, Any]) -> Any:
    """The group ``cls`` of TrainArgs field ``name`` from a dict of its fields (unknown keys: ValueError)."""
    for key in values:
        setting_field(f"{name}.{key}")
    return cls(**values)


def setting_keys() -> list[str]:
    """Every setting's key: the run options (``seed``) and the groups' fields (``imitation.lr``), in order."""
    keys = []
    for f in dataclasses.fields(TrainArgs):
        if f.name in GROUPS:
            keys += [f"{f.name}.{name}" for name in _field_names(GROUPS[f.name])]
        else:
            keys.append(f.name)
    return keys


def setting_field(key: str) -> dataclasses.Field:
    """The dataclass field of a setting key (``"imitation.lr"``, ``"seed"``).

    Raises:
        ValueError: an unknown key (a group name alone included), with the closest keys and the full list.
    """
    group, _, name = key.rpartition(".")
    owner = GROUPS.get(group) if group else TrainArgs
    if owner is not None and not (owner is TrainArgs and name in GROUPS):
        for f in dataclasses.fields(owner):
            if f.name == name:
                return f
    keys = setting_keys()
    close = difflib.get_close_matches(key, keys, n=3, cutoff=0.6)
    tail = key.rpartition(".")[2]
    for candidate in (tail, tail.partition("_")[2]):  # the field name alone, and without a prefix word
        close += [k for k in keys if k.rpartition(".")[2] == candidate and k not in close]
    hint = f"; did you mean {' or '.join(close[:3])}?" if close else ""
    raise ValueError(f"unknown training setting {key!r}{hint} Settings are run options or GROUP.FIELD with GROUP "
                     f"among {', '.join(GROUPS)}: {', '.join(keys)}")
