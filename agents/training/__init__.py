"""Three-stage DOPPLER training on one policy: imitation, simulator RL, real-system RL.

A typed :class:`TrainArgs`, one stage object per stage (one module each), side effects gated
by flags. The policy is any sb3-contrib ``MaskableActorCriticPolicy`` subclass
for ``Doppler-Sim-v0`` observations: by default ``agents.policy.DopplerPolicy`` (the GNN dual
policy) when it imports, else sb3-contrib's ``MaskableMultiInputActorCriticPolicy`` (an MLP on the
flattened padded observation, for development).

Stages (DOPPLER paper §4):

1. ``il``: **imitation of the critical-path teacher**, DAgger style. ``imitation.envs`` episodes are rolled
   in lockstep; at every step each env follows the teacher with probability ``beta`` (a uniformly
   chosen teacher action) and the learner (a sample of its masked distribution) otherwise, with
   ``beta`` decaying linearly from 1 to 0 over the first ``imitation.beta_decay`` of the stage. Every
   visited state is stored with its valid-action mask and the teacher's action *set*
   (``env.teacher_mask()``: all tied max-b-level ops in SEL, all tied earliest-start devices in
   PLC), and minibatches from that buffer minimise ``-log sum_{a in teacher} pi(a|s)`` under the
   masked distribution (both heads alike), smoothed towards the uniform distribution over the valid
   actions by ``imitation.label_smoothing`` (so the policy still samples other actions in stage 2), minus
   ``imitation.ent_coef`` x entropy, plus ``imitation.vf_coef`` x the value error against the episode's return
   (so the critic is warm for stage 2). ``imitation.teacher="search"`` swaps the PLC teacher for a
   local-search placement of the graph (:mod:`agents.training.teacher`; on one graph the best of
   that search and ``imitation.teacher_restarts`` independent ones from their own starts, each scoring
   ``imitation.teacher_batch`` neighbours per step), so imitation is not capped at the heuristic's makespan.
2. ``sim``: **RL in the simulator** from the stage-1 weights: MaskablePPO on ``Doppler-Sim-v0``
   (``gamma = 1`` and GAE ``lambda = 1``: the reward is terminal; each update collects
   ``rl.episodes_per_update`` whole episodes), or ``algo="reinforce"``: the paper's REINFORCE with a
   moving-average baseline (or, ``reinforce.baseline="batch"``, the leave-one-out mean of the
   update's episodes), on sampled (not epsilon-greedy) actions. The learning rate decays linearly from ``rl.lr`` to
   ``rl.lr_final`` over the stage (the paper's schedule; the authors' code never applied it).
   With ``rl.anchor_coef > 0`` (recipe ``best``) each update is followed by behaviour-cloning steps
   on the teacher's episodes (:mod:`agents.training.anchor`), so RL keeps the imitated placement.
3. ``real``: the same RL code path on ``real.env_id`` (``Doppler-Real-v0`` by default; any env id
   with the same observation layout works, e.g. ``Doppler-Sim-v0`` in the tests).

Ablations (``learn``): ``"sel"`` trains SEL only while the critical-path teacher places, ``"plc"``
PLC only while the teacher selects (:mod:`agents.training.ablation`: the teacher's steps are
played inside the env wrapper, so the buffer, PPO and REINFORCE only see the learned decisions).
Generalisation: ``graph="mix"`` with ``mix.graphs`` specs draws a new graph per training episode,
and ``evaluation.held_out`` graphs are decoded at the end (:mod:`agents.training.graphs`); ``init``
fine-tunes a checkpoint on another graph or device count.

Stop at the bound: on one graph (``evaluation.stop_at_bound``, default on) the ``il`` and ``sim`` stages end
once a periodic greedy decode reaches the makespan lower bound, a proof that the policy is optimal
there; the policy goes back to the weights that reached it.

Budget: a stage ends when it has run its episodes (``episodes.il`` ...) or its share of
``budget_minutes``, whichever comes first. The shares follow :data:`STAGE_WEIGHTS` (il 1, sim 3,
real 2) over the stages still to run, recomputed at each stage start from the time left, so a stage
that ends early (by episodes) leaves its time to the later ones: ``il,sim`` gives 25 % / 75 %,
``il,sim,real`` 1/6, 3/6, 2/6. Without a budget, unset episode counts default to
:data:`DEFAULT_EPISODES`; with a budget they are unbounded. The final evaluation (greedy and
sampled decodes, the baselines with an ``evaluation.baseline_seconds`` local search) runs after the budget.

Outputs in ``out``: ``checkpoint.pt`` (written atomically at each stage end and every
``checkpoints.minutes`` / ``checkpoints.every_updates``: policy weights, optimizer, stage counters,
RNG states, the imitation buffer; ``resume=True`` continues from it, dropping the ``metrics.jsonl``
rows and TensorBoard events a killed run wrote after it, and says so when there is none (a fresh
run in the same folder starts ``metrics.jsonl`` again); Ctrl-C writes it too),
``policy_<stage>.pt`` (weights at each stage end), ``policy_best.pt`` (the best periodic greedy
evaluation), ``metrics.jsonl`` (one JSON line per episode, update and evaluation),
``tb/`` (TensorBoard), ``summary.json`` and ``gantt.png`` (the learned placement).

How a run is driven: the :class:`Trainer` builds a :class:`TrainContext` (the policy, counters, logs
and generator the stages share; the budget, seeds, learning-rate schedule, episode reports and
checkpoint timing they use) and, for each stage, a :class:`Stage` object (:class:`ImitationStage`,
:class:`PPOStage` or :class:`ReinforceStage`): ``setup`` builds its envs and optimizer (from the
checkpoint when resuming it), ``run`` trains while ``context.running(stage)``, and ``state`` is what
a checkpoint keeps of it (optimizer, imitation buffer). A resumed stage restores the global RNG
states after its setup, so an interrupted and resumed run equals an uninterrupted one.

Modules (one job each):

- ``args``: :class:`TrainArgs` (run options and one frozen group per stage or concern), the stage names and
  budget weights; ``budget``: :class:`StageBudget`;
- ``context``: :class:`TrainContext`, :class:`Stage`, the episode seeds;
- ``instance``: :class:`Instance` (graph or mix, topology, sim config) and each stage's env;
- ``ablation``: ``learn`` = both / sel / plc (:class:`TeacherPhase`); ``graphs``: graph specs, the mix;
- ``policies``: policy classes by name, the registry a checkpoint's class goes through
  (:func:`register_policy` adds your own: a file never chooses what is imported), construction, weight
  transfer, masked action scores;
- ``checkpoint``: atomic checkpoints, :func:`load_policy`, RNG states;
- ``metrics``: stage counters, ``metrics.jsonl`` + TensorBoard, progress bars;
- ``buffer``: the imitation :class:`StateBuffer`;
- ``rollout``: lockstep greedy / sampled / DAgger episodes, :func:`decode`;
- ``teacher``: the imitation teachers (critical path, or a search placement relabelled per state);
- ``imitation``: stage 1 (the loss and :class:`ImitationStage`); ``rl``: stages 2 and 3 (:class:`PPOStage`,
  :class:`ReinforceStage`);
- ``evaluate``: greedy and best-of-K decodes on any graph, held-out rows;
- ``summary``: the final evaluation and ``summary.json``; ``trainer``: :class:`Trainer`, :func:`train`.

Besides the greedy and best-of-K decodes, the summary keeps ``best_found``: the best placement any
training episode produced on the main graph (the incumbent that device-placement RL reports).

>>> from agents.training import TrainArgs, train
>>> summary = train(TrainArgs(graph="paper/chainmm", devices=4, stages=("il", "sim"), budget_minutes=8))
"""

from agents.training.args import DEFAULT_EPISODES, STAGE_WEIGHTS, STAGES, TrainArgs
from agents.training.budget import StageBudget
from agents.training.buffer import StateBuffer
from agents.training.checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_NAME,
    CHECKPOINT_VERSION,
    load_checkpoint,
    load_policy,
    save_checkpoint,
    seed_everything,
)
from agents.training.context import Stage, TrainContext, episode_seeds, model_seed
from agents.training.imitation import ImitationStage, imitation_loss
from agents.training.instance import Instance, make_stage_env
from agents.training.metrics import MetricLog, StageProgress, read_metrics
from agents.training.policies import (
    DOPPLER_POLICY,
    FALLBACK_POLICY,
    action_logits,
    make_policy,
    masked_logits,
    obs_to_tensors,
    policy_class_path,
    register_policy,
    registered_policy,
    resolve_policy_class,
    stack_obs,
    transfer_weights,
)
from agents.training.rl import PPOStage, ReinforceStage
from agents.training.rollout import Episode, decode, rollout
from agents.training.summary import summary_keys
from agents.training.trainer import Trainer, make_stage, train

__all__ = [
    "CHECKPOINT_FORMAT", "CHECKPOINT_NAME", "CHECKPOINT_VERSION", "DEFAULT_EPISODES", "DOPPLER_POLICY",
    "FALLBACK_POLICY", "STAGES", "STAGE_WEIGHTS", "Episode", "ImitationStage", "Instance", "MetricLog", "PPOStage",
    "ReinforceStage", "Stage", "StageBudget", "StageProgress", "StateBuffer", "TrainArgs", "TrainContext", "Trainer",
    "action_logits", "decode", "episode_seeds", "imitation_loss", "load_checkpoint", "load_policy", "make_policy",
    "make_stage", "make_stage_env", "masked_logits", "model_seed", "obs_to_tensors", "policy_class_path",
    "read_metrics", "register_policy", "registered_policy", "resolve_policy_class", "rollout", "save_checkpoint",
    "seed_everything", "stack_obs", "summary_keys", "train", "transfer_weights",
]
