"""The arguments of a training run (:class:`TrainArgs`) and the stage constants."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.training.ablation import LEARN
from agents.training.graphs import MIX
from doppler_gym.envs.registration import REAL_ENV_ID

STAGES = ("il", "sim", "real")
TEACHERS = ("critical_path", "search")  # il_teacher values (agents.training.teacher)
STAGE_WEIGHTS = {"il": 1.0, "sim": 3.0, "real": 2.0}  # budget shares (normalised over the stages to run)
DEFAULT_EPISODES = {"il": 300, "sim": 1000, "real": 200}  # per stage, when neither episodes nor a budget is set


class _RecipeDefault:
    """Sentinel default of the fields a recipe sets (replaced by the recipe's value in ``__post_init__``)."""

    def __repr__(self) -> str:
        return "RECIPE"


RECIPE = _RecipeDefault()
BEST_POLICY_KWARGS = {"id_features": 16, "plc_affinity": True, "structure_features": 1, "heuristic_prior": True}
RECIPES: dict[str, dict[str, Any]] = {
    # the best measured recipe (docs/results/train_default.md): a search teacher (expert iteration), a
    # policy that corrects a list-scheduling prior, op-identity and structural GNN inputs, the PLC
    # affinity term, and a gentle RL stage that keeps
    # the imitated placement (rl_lr 1e-3 lost it within a few PPO updates)
    "best": {"il_teacher": "search", "rl_lr": 1e-4, "rl_lr_final": 1e-5, "target_kl": 0.01,
             "rl_anchor_coef": 1.0, "policy_kwargs": BEST_POLICY_KWARGS},
    # DOPPLER as published: imitation of the critical-path heuristic, then RL
    "doppler": {"il_teacher": "critical_path", "rl_lr": 1e-3, "rl_lr_final": 1e-4, "target_kl": 0.05,
                "rl_anchor_coef": 0.0, "policy_kwargs": {}},
}
RECIPE_FIELDS = ("il_teacher", "rl_lr", "rl_lr_final", "target_kl", "rl_anchor_coef", "policy_kwargs",
                 "il_teacher_evals", "il_teacher_restarts", "il_teacher_batch")
TEACHER_EVALS = {"one": 200_000, "mix": 20_000}  # the search teacher's evaluations: one graph, per graph of a mix
# independent restarts of the search teacher (il_teacher_evals / 4 evaluations each) beside its main run:
# one local search ends in one of several basins by luck (docs/results/train_default.md), the best of many
# runs does not; none per graph of a mix, where the teacher runs once per drawn graph
TEACHER_RESTARTS = {"one": 16, "mix": 0}
# neighbours per step of the search teacher: at a fixed count of evaluations, small batches take more steps
# and reach the best known basin far more often on one graph (docs/results/train_default.md); on a mix the
# per-graph search stays at local_search's default (a small batch costs about 3x the wall clock per evaluation)
TEACHER_BATCH = {"one": 16, "mix": 256}


# ============================================================================ arguments
@dataclass
class TrainArgs:
    """Everything a training run depends on (JSON-serialisable; stored in every checkpoint)."""

    # --- the recipe
    recipe: str = "best"
    """Defaults of the fields left unset (:data:`RECIPE_FIELDS`): ``best`` (the best measured recipe:
    search teacher, heuristic prior, op-identity and structural inputs, PLC affinity, gentle RL; with
    ``learn`` sel or plc the critical-path teacher, since the ablations are DOPPLER's) or ``doppler`` (the published
    recipe: critical-path teacher, rl_lr 1e-3, plain policy). Explicit values always win."""

    # --- the instance
    graph: str = "paper/chainmm"
    """A paper graph name (``paper/chainmm``), a workload name (``chainmm``), a .txt/.json file, or
    ``"mix"``: a new graph per training episode from ``graph_mix`` (see :mod:`agents.training.graphs`)."""
    graph_mix: tuple[str, ...] = ()
    """With ``graph="mix"``: graph specs ``NAME[:KEY=VALUE,...]`` drawn uniformly per episode; a value may
    be a range ``LO..HI`` and a workload's unset ``seed`` is drawn (``random:n_ops=40..80``, ``chainmm``,
    ``paper/ffnn``)."""
    graph_eval: tuple[str, ...] = ()
    """Held-out graph specs (fixed: no ranges) evaluated at the end (``summary["held_out"]``): greedy and
    best-of-K decodes against critical path. With ``graph="mix"`` the first one is the main graph
    (periodic evaluations, Gantt chart; the mix's first draw if none is given)."""
    max_ops: int | None = None
    """Observation padding [ops] with ``graph="mix"``; None = 1.25 x the largest sampled or held-out graph."""
    max_edges: int | None = None
    """Observation padding [edges] with ``graph="mix"`` (same rule)."""
    mix_pool: int | None = None
    """With ``graph="mix"``: each spec draws from a fixed pool of this many graphs (graph ``j`` of
    spec ``i`` built from seed ``(seed, i, j)``), so the search teacher's targets are reused; None =
    a fresh graph per draw."""
    topology_mix: tuple[str, ...] = ()
    """Topologies drawn per training episode (device counts ``"2"`` or preset names ``"p100x4"``);
    the device padding covers the largest; empty = ``devices``/``topology`` only."""
    learn: str = "both"
    """Which decisions the policy learns: ``both`` (DOPPLER), ``sel`` (the critical-path teacher places: PLC
    ablation off) or ``plc`` (the teacher selects); see :mod:`agents.training.ablation`."""
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
    policy_kwargs: Any = RECIPE
    """Keyword arguments of the policy class (JSON values only); by default the recipe's for
    DopplerPolicy (``best``: :data:`BEST_POLICY_KWARGS`), none for another class."""
    device: str = "auto"
    """torch device of the policy (``auto``: CUDA when available)."""
    torch_threads: int | None = 1
    """torch intra-op threads while training (restored after). 1: the networks are small, and on a busy
    CPU more threads are much slower (OpenMP threads spin for cores that other processes also use, and
    imitation on chainmm can take tens of times longer); None = leave as is."""

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
    il_label_smoothing: float = 0.1
    """Label smoothing of the imitation loss (:func:`agents.training.imitation.imitation_loss`): keeps
    every valid action's probability above zero, so the sampled episodes of the RL stages differ from
    the teacher's (0: the policy copies the teacher's argmax and samples only among exact ties)."""
    il_teacher: Any = RECIPE
    """Whom imitation copies: ``critical_path`` (DOPPLER's teacher) or ``search`` (PLC follows the
    local-search placement found from the critical-path and HEFT ones; on a mix one per drawn graph,
    cached): see :mod:`agents.training.teacher`. Default: the recipe's."""
    il_teacher_evals: Any = RECIPE
    """Simulated neighbours of the search teacher's local search (a count, not seconds: the same
    target on every machine); default 200,000 on one graph, 20,000 per graph of a mix."""
    il_teacher_restarts: Any = RECIPE
    """The most independent restarts of the search teacher beside its main run (``il_teacher_evals // 4``
    simulated neighbours each, their own seeds; the best placement of all runs is the target; fewer on
    graphs over 1,000 ops: :func:`agents.training.teacher.search_placement`); default 16 on one graph,
    0 on a mix."""
    il_teacher_batch: Any = RECIPE
    """Simulated neighbours per step of the search teacher's runs (``local_search``'s ``batch_size``);
    default 16 on one graph, 256 on a mix."""
    il_teacher_cache: int = 512
    """Search targets kept (LRU) on a mix [graphs]."""
    il_vf_coef: float = 0.5
    """Weight of the value regression on episode returns (warms the critic for RL; 0 = off)."""

    # --- stages 2 and 3: RL
    algo: str = "ppo"
    """``ppo`` (sb3-contrib MaskablePPO) or ``reinforce`` (the paper's REINFORCE with a baseline)."""
    rl_lr: Any = RECIPE
    """Initial learning rate (recipe ``best``: 1e-4, ``doppler``: 1e-3). The paper's 1e-4 is for a loss
    summed over an episode's steps; PPO averages them (DOPPLER's recipe on paper/chainmm, 3 minutes:
    1e-3 reached 0.81 x critical path, 3e-4 and 1e-4 0.94)."""
    rl_lr_final: Any = RECIPE
    """Learning rate at the end of a stage (linear decay by stage progress, as in the paper;
    recipe ``best``: 1e-5, ``doppler``: 1e-4)."""
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
    target_kl: Any = RECIPE
    """PPO early stop of an update's epochs (protects the imitation weights); None = off (recipe
    ``best``: 0.01, ``doppler``: 0.05)."""
    rl_anchor_coef: Any = RECIPE
    """Weight of the imitation anchor of the RL stages (:mod:`agents.training.anchor`): after each
    update, ``rl_anchor_updates`` steps of this times the imitation loss on the teacher's episodes
    keep the imitated placement likely (recipe ``best``: 1.0, ``doppler``: 0 = off, so RL may leave
    the critical-path teacher)."""
    rl_anchor_updates: int = 8
    """Gradient steps of the anchor per RL update (``il_batch_size`` teacher states each)."""
    rl_anchor_episodes: int = 8
    """Teacher episodes whose states the anchor imitates (collected at each RL stage's start)."""
    reinforce_baseline: str = "ema"
    """REINFORCE's baseline: ``ema`` (the paper's: a moving average of past batches' returns) or
    ``batch`` (leave-one-out: each episode's return minus the mean of the other episodes of its batch,
    all of the same instance: RLOO, Kool et al. 2019b; POMO, Kwon et al. 2020; needs
    ``episodes_per_update >= 2``)."""
    reinforce_baseline_decay: float = 0.9
    """REINFORCE with ``ema``: moving average factor of the return baseline."""

    # --- stage 3 env
    real_env_id: str = REAL_ENV_ID
    """Env id of stage 3 (made with the graph and device count, plus ``real_env_kwargs``)."""
    real_env_kwargs: dict = field(default_factory=dict)
    """Extra keyword arguments of the stage-3 env (``devices="cuda:0,1,2,3"``, ``repeats=3``, ...;
    a ``sim_config`` given as a dict of SimConfig fields becomes a SimConfig)."""

    # --- distributed rollouts
    ray_address: str | None = None
    """Ray cluster of the sim stage's PPO rollouts (Ray actors, up to one per env: :mod:`agents.distributed`):
    ``"local"`` (a Ray instance on this machine), ``"auto"`` (the cluster ``ray start`` joined) or
    ``HOST:6379``; None = the envs run in this process. Same seeds, same run either way."""

    # --- evaluation, logging, checkpoints
    eval_every_episodes: int = 20
    """Greedy decode in the simulator every this many training episodes (logged); 0 = off."""
    stop_at_bound: bool = True
    """On one graph and one topology (no ``graph_mix``/``topology_mix``): end the simulator stages
    (``il``, ``sim``) once a periodic greedy decode reaches the makespan lower bound where that proves
    optimality (one stream, no jitter: :func:`doppler_gym.sim.bounds.reaches_bound`). The policy is then
    optimal on its graph and more training could only move it away; a ``real`` stage still runs."""
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
        if self.recipe not in RECIPES:
            raise ValueError(f"unknown recipe {self.recipe!r}; recipes are {', '.join(RECIPES)}")
        self.apply_recipe()
        if isinstance(self.stages, str):
            self.stages = tuple(s.strip() for s in self.stages.split(",") if s.strip())
        self.stages = tuple(self.stages)
        self.baselines = tuple(self.baselines)
        for name in ("graph_mix", "graph_eval", "topology_mix"):  # "a;b" (CLI, --set) or a sequence
            value = getattr(self, name)
            if isinstance(value, str):
                value = [t.strip() for t in value.split(";") if t.strip()]
            setattr(self, name, tuple(value))

    def apply_recipe(self) -> None:
        """Replace every field still at :data:`RECIPE` by the recipe's value (see :attr:`recipe`)."""
        values = dict(RECIPES[self.recipe])
        if self.learn != "both":  # the paper's ablations imitate the critical-path teacher
            values["il_teacher"] = "critical_path"
        values["il_teacher_evals"] = TEACHER_EVALS["mix" if self.graph == MIX else "one"]
        values["il_teacher_restarts"] = TEACHER_RESTARTS["mix" if self.graph == MIX else "one"]
        values["il_teacher_batch"] = TEACHER_BATCH["mix" if self.graph == MIX else "one"]
        if not (self.policy == "auto" or str(self.policy).endswith("DopplerPolicy")):
            values["policy_kwargs"] = {}  # the recipe's kwargs are DopplerPolicy's
        for name in RECIPE_FIELDS:
            if getattr(self, name) is RECIPE:
                value = values[name]
                setattr(self, name, dict(value) if isinstance(value, dict) else value)

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
        if self.il_teacher not in TEACHERS:
            raise ValueError(f"il_teacher must be one of {', '.join(TEACHERS)}, got {self.il_teacher!r}")
        if self.il_teacher == "search" and self.learn != "both":
            raise ValueError("il_teacher='search' imitates a placement with both decisions learned: give "
                             "learn='both' (or use il_teacher='critical_path')")
        if not isinstance(self.stop_at_bound, bool):
            raise ValueError(f"stop_at_bound must be True or False, got {self.stop_at_bound!r}")
        if self.il_teacher_cache < 1:
            raise ValueError(f"il_teacher_cache must be >= 1, got {self.il_teacher_cache}")
        if self.mix_pool is not None and (self.graph != MIX or self.mix_pool < 1):
            raise ValueError(f"mix_pool applies to graph='mix' and must be >= 1, got {self.mix_pool}")
        if self.topology_mix and "real" in self.stages:
            raise ValueError("topology_mix is for the simulator stages (il, sim); the real stage runs on one topology")
        if not isinstance(self.policy_kwargs, dict):
            raise ValueError(f"policy_kwargs must be a dict, got {self.policy_kwargs!r}")
        if self.il_teacher_evals < 1:
            raise ValueError(f"il_teacher_evals must be >= 1, got {self.il_teacher_evals}")
        if isinstance(self.il_teacher_restarts, bool) or not isinstance(self.il_teacher_restarts, int) \
                or self.il_teacher_restarts < 0:
            raise ValueError(f"il_teacher_restarts must be an integer >= 0, got {self.il_teacher_restarts!r}")
        if isinstance(self.il_teacher_batch, bool) or not isinstance(self.il_teacher_batch, int) \
                or self.il_teacher_batch < 1:
            raise ValueError(f"il_teacher_batch must be an integer >= 1, got {self.il_teacher_batch!r}")
        if self.reinforce_baseline not in ("ema", "batch"):
            raise ValueError(f"reinforce_baseline must be 'ema' or 'batch', got {self.reinforce_baseline!r}")
        if self.algo == "reinforce" and self.reinforce_baseline == "batch" and self.episodes_per_update < 2:
            raise ValueError("reinforce_baseline='batch' compares the episodes of one update: give "
                             f"episodes_per_update >= 2 (got {self.episodes_per_update})")
        if isinstance(self.rl_anchor_coef, bool) or not isinstance(self.rl_anchor_coef, (int, float)) \
                or not self.rl_anchor_coef >= 0:
            raise ValueError(f"rl_anchor_coef must be a number >= 0 (0 = no imitation anchor), "
                             f"got {self.rl_anchor_coef!r}")
        if self.rl_anchor_updates < 0:
            raise ValueError(f"rl_anchor_updates must be >= 0 (0 = no imitation anchor), got {self.rl_anchor_updates}")
        for name in ("il_envs", "il_batch_size", "il_buffer_size", "episodes_per_update", "ppo_epochs",
                     "rl_anchor_episodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.il_label_smoothing < 1:
            raise ValueError(f"il_label_smoothing must be in [0, 1), got {self.il_label_smoothing}")
        if not 0 < self.il_beta_decay <= 1:
            raise ValueError(f"il_beta_decay must be in (0, 1], got {self.il_beta_decay}")
        if not 0 < self.gamma <= 1:
            raise ValueError(f"gamma must be in (0, 1], got {self.gamma}")
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError(f"torch_threads must be >= 1 or None, got {self.torch_threads}")
        if self.learn not in LEARN:
            raise ValueError(f"learn must be one of {', '.join(LEARN)} (the decisions the policy learns), "
                             f"got {self.learn!r}")
        if (self.graph == MIX) != bool(self.graph_mix):
            raise ValueError("graph='mix' and graph_mix go together: give graph='mix' with graph_mix=[specs] "
                             "(e.g. ['random:n_ops=40..80', 'chainmm']), or a single graph without graph_mix")
        if self.graph == MIX and self.graph_params:
            raise ValueError("graph_params do not apply to graph='mix'; put the parameters in the graph_mix specs")
        if self.graph == MIX and "real" in self.stages:
            raise ValueError("the real stage runs on one graph; train the mix with stages il,sim, then --init on the "
                             "real graph")
        for name in ("max_ops", "max_edges"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, np.integer)) or v < 1):
                raise ValueError(f"{name} must be an integer >= 1 or None, got {v!r}")
        if self.sample_decodes < 0:
            raise ValueError(f"sample_decodes must be >= 0, got {self.sample_decodes}")
        if self.ray_address is not None and (self.algo != "ppo" or "sim" not in self.stages):
            raise ValueError("ray_address (--ray) moves the sim stage's PPO rollouts to Ray: give algo='ppo' and a "
                             "sim stage, or leave it unset")

    def episodes(self, stage: str) -> int | None:
        """The episode count set for ``stage`` (None = not set)."""
        return getattr(self, f"{stage}_episodes")

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["stages"] = list(self.stages)
        out["baselines"] = list(self.baselines)
        out["graph_mix"] = list(self.graph_mix)
        out["graph_eval"] = list(self.graph_eval)
        out["topology_mix"] = list(self.topology_mix)
        return out
