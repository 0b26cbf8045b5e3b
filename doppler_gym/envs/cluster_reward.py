"""The rewards of ``Doppler-Cluster-v0``: job time in system, charged per unit of simulated time.

Between two decisions at times ``t0 < t1`` [s], the jobs in the system (arrived, not finished:
waiting, running or in a restart delay) accrue ``integral of J(t) dt`` job-seconds; summed over an
episode that is the total job completion time (JCT). Both rewards charge only that elapsed time, so an
action that does not move the clock (an edit within one event) earns exactly 0, as in DeepRM (Mao et
al., HotNets 2016) and Decima (Mao et al., SIGCOMM 2019):

- ``"time"``: ``-(integral of J dt) / time_scale``. The undiscounted return is
  ``-sum(JCT) / time_scale`` (job-hours with the default ``time_scale`` of 3600 s).
- ``"relative"``: the same minus what a baseline scheduler's run of the same trace accrues over the
  same interval: ``-(integral of (J - J_base) dt) / time_scale``, the rest of the baseline's time
  in system added at the last step. The undiscounted return is
  ``(sum(JCT_base) - sum(JCT)) / time_scale``: 0 for a policy that does what the baseline does, positive
  when it beats it. The arrivals' load, which both runs share, cancels out of every step's reward
  (the variance a trace-dependent baseline removes, as Decima's input-dependent baseline does), and
  a policy on the baseline's trajectory earns 0 at every step, so extra zero-time steps cannot make
  its discounted return look better.

Discounting is per step (per decision), not per second: under ``gamma < 1`` extra zero-time steps
postpone, and so shrink, every later reward. With ``"time"`` (all rewards <= 0) that favours churn;
train with ``gamma = 1`` as DeepRM and Decima do (the shipped MaskablePPO recipe does).
"""

from __future__ import annotations

import numpy as np

REWARDS = ("time", "relative")


def time_in_system(arrival: np.ndarray, completion: np.ndarray, now: float) -> float:
    """[job s] the time the jobs spent in the system up to ``now``: the sum over arrived jobs of
    ``min(now, completion) - arrival`` (``completion`` NaN: not finished). Arrays are ``(n_jobs,)`` [s]."""
    end = np.where(np.isnan(completion), now, np.minimum(completion, now))
    return float(np.maximum(end - arrival, 0.0).sum())


class BaselineTimeInSystem:
    """The time in system of a baseline scheduler's run of the same trace, at any time.

    Args:
        arrival: ``(n_jobs,)`` [s] the jobs' arrival times.
        completion: ``(n_jobs,)`` [s] their completion times in the baseline's run (all finite).
    """

    def __init__(self, arrival: np.ndarray, completion: np.ndarray) -> None:
        if not np.isfinite(completion).all():
            raise ValueError("the baseline run left jobs unfinished (NaN completion times)")
        self.arrival, self.completion = np.asarray(arrival, float), np.asarray(completion, float)
        self.total = float((self.completion - self.arrival).sum())  # [job s] the baseline's sum of JCTs

    def at(self, now: float) -> float:
        """[job s] the baseline's time in system up to ``now`` [s]; ``inf`` gives :attr:`total`."""
        if now == np.inf:
            return self.total
        return time_in_system(self.arrival, self.completion, now)
