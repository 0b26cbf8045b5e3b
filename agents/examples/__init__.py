"""Single-file examples of third-party RL on the doppler-gym envs, each runnable as ``python -m agents.examples.X``:
:mod:`~agents.examples.cleanrl_masked_ppo` (CleanRL-style masked PPO), :mod:`~agents.examples.torchrl_masked_ppo`
(torchrl's PPO) and :mod:`~agents.examples.rllib_ppo_masked` (RLlib's PPO)."""
