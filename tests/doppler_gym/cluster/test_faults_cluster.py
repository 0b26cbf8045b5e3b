"""doppler_gym.cluster under impossible settings and bad input: refused before the run or ended early with
one clear error (the CLI: one ``doppler: error:`` line, exit 2), never a spin to the event cap.

References: the Poisson chance of a failure-free stretch, ``exp(-g s / MTBF)``, computed by hand; float64
spacing from :func:`math.ulp`.
"""

from __future__ import annotations

import math
import re
import time

import pytest

from doppler_gym import cluster as C
from doppler_gym.cli import cluster_cmd
from doppler_gym.cluster import failures as fl
from doppler_gym.cluster.engine import simulate_cluster
from tests.doppler_gym.cli.cli_helpers import error_line, run


def _node(gpus: int = 8) -> C.Cluster:
    return C.Cluster((C.Node(gpus, "v100", None),))


def _job(job_id: int = 0, arrival: float = 0.0, iterations: int = 2_000, gpus: int = 1, t: float = 1.0,
         **kwargs: object) -> C.Job:
    return C.Job(job_id, arrival, iterations, gpus=gpus, workload=None, profile={"*": {gpus: t}}, **kwargs)


# ---------------------------------------------------------------------- failures a job cannot outrun
def test_expected_restarts_and_longest_stretch_by_hand():
    # 10 iterations of 2 s, a 1 s checkpoint after iterations 3, 6 and 9: stretches 7, 7, 7 and 2 s
    assert fl.longest_stretch(10, 2.0, 3, 1.0) == 7.0
    assert fl.longest_stretch(10, 2.0, None, 1.0) == 20.0  # no checkpoint: the whole job
    assert fl.longest_stretch(10, 2.0, 20, 1.0) == 20.0  # an interval past the job: no checkpoint taken
    # a stretch of s seconds at rate r: exp(r s) - 1 expected failures before one failure-free pass
    assert fl.expected_restarts(7.0, 0.1) == pytest.approx(math.exp(0.7) - 1, rel=1e-15)
    assert fl.expected_restarts(3_451.0, 4 / 72.0) == pytest.approx(math.exp(4 * 3_451 / 72), rel=1e-12)
    assert fl.expected_restarts(18_821.0, 4 / 72.0) == math.inf  # exp(1046): past float range
    assert fl.young_every(0.0, 100.0, 1, 1.0) == 1  # a free checkpoint: after every iteration
    assert fl.young_every(2.0, 400.0, 4, 1.0) == round(math.sqrt(2 * 2.0 * 100.0))  # sqrt(2 C M/g) = 20 s


def test_the_issue_command_is_refused_at_once_with_one_line_and_its_fixes_run(capsys, tmp_path):
    argv = ("cluster", "--trace", "generated:5", "--cluster", "2x4", "--scheduler", "fifo", "--out", str(tmp_path))
    start = time.perf_counter()
    code, _, err = run(capsys, *argv, "--mtbf-hours", "0.02")
    elapsed = time.perf_counter() - start
    line = error_line(err)
    assert code == 2 and elapsed < 30, (code, elapsed)  # it ran to a 10-million-event cap for minutes
    assert not (tmp_path / "jobs.csv").exists()  # nothing written for a run that never started
    # the binding job: 9900 iterations of 1 s on 4 GPUs, MTBF 72 s per GPU -> P = exp(-4 x 9900 / 72)
    job = cluster_cmd.parse_trace("generated:5", seed=0).jobs[2]
    assert (job.job_id, job.gpus, job.iterations) == (2, 4, 9900)
    assert "Job 2 cannot finish under failures" in line and "exp(-550)" in line and "no checkpoints" in line
    assert "4 of the 5 jobs cannot finish" in line
    # the two fixes it names, as given, run to the end
    every = re.search(r"--checkpoint-every (\d+)", line).group(1)
    hours = re.search(r"--mtbf-hours ([\d.]+)", line).group(1)
    assert (every, hours) == ("1", "1.6")  # 4 x 9900 / ln(1001) = 5733 s: rounded up to 5740 s, 1.6 h
    for fix in (("--mtbf-hours", "0.02", "--checkpoint-every", every), ("--mtbf-hours", hours)):
        code, out, err = run(capsys, *argv, *fix)
        assert code == 0 and "makespan" in out and (tmp_path / "jobs.csv").exists(), err


def test_the_suggested_fixes_make_the_run_possible():
    # 2000 s of work on one GPU with a 100 s MTBF: P(no failure) = exp(-20), 4.85e8 expected restarts
    job = _job(7, checkpoint_cost=2.0)
    failures = C.FailureModel(gpu_mtbf=100.0)
    with pytest.raises(ValueError) as info:
        C.run(C.JobTrace((job,)), _node(), "fifo", seed=0, failures=failures)
    msg = str(info.value)
    assert msg.startswith("Job 7 cannot finish under failures") and "exp(-20)" in msg and "4.85e+08" in msg
    every = int(re.search(r"checkpoint_every=(\d+)", msg).group(1))
    assert every == round(math.sqrt(2 * 2.0 * 100.0) / 1.0)  # Young's interval, 20 iterations
    mtbf = float(re.search(r"raise gpu_mtbf to >= ([\d,.]+) s", msg).group(1).replace(",", ""))
    edge = 2_000 / math.log1p(fl.MAX_RESTARTS_PER_STRETCH)  # [s] the MTBF at which it expects 1000 restarts
    assert edge <= mtbf <= edge * 1.005  # rounded up to 3 digits: 290 s
    # each fix runs to the end
    for fixed, mode, model in ((_job(7, checkpoint_cost=2.0, checkpoint_every=every), "fixed", failures),
                               (job, "young", failures), (job, "fixed", C.FailureModel(gpu_mtbf=mtbf))):
        r = C.run(C.JobTrace((fixed,)), _node(1), "fifo", seed=0, failures=model, checkpoints=mode)
        assert math.isfinite(r.jobs["completion"][0]) and r.n_jobs == 1


def test_the_bound_is_on_the_expected_restarts_of_one_stretch():
    # rate x stretch = ln(1 + bound) is the edge: just below it runs, just above it is refused
    edge = math.log1p(fl.MAX_RESTARTS_PER_STRETCH)  # expected failures in one stretch at the bound
    iterations = 1_000
    below = C.FailureModel(gpu_mtbf=iterations / edge * 1.001)
    above = C.FailureModel(gpu_mtbf=iterations / edge * 0.999)
    C.ClusterSimulation(C.JobTrace((_job(iterations=iterations),)), _node(), C.schedulers.make("fifo"),
                        seed=0, failures=below)
    with pytest.raises(ValueError, match=r"restarts \(more than 1,000\)"):
        C.ClusterSimulation(C.JobTrace((_job(iterations=iterations),)), _node(), C.schedulers.make("fifo"),
                            seed=0, failures=above)


def test_the_check_uses_the_fastest_gpu_type_and_the_young_interval():
    # a 2-type cluster: 1 s per iteration on v100, 4 s on k80; checkpoints at Young's interval
    cluster = C.Cluster((C.Node(4, "v100", None), C.Node(4, "k80", None)))
    job = C.Job(3, 0.0, 5_000, gpus=2, workload=None, profile={"v100": {2: 1.0}, "k80": {2: 4.0}},
                checkpoint_cost=30.0)
    failures = C.FailureModel(gpu_mtbf=10.0)  # a 5 s MTBF for its 2 GPUs, shorter than one checkpoint
    with pytest.raises(ValueError) as info:
        C.run(C.JobTrace((job,)), cluster, "fifo", seed=0, failures=failures, checkpoints="young")
    every = fl.young_every(30.0, 10.0, 2, 1.0)  # sqrt(2 x 30 x 5) = 17.3 s -> 17 iterations of the fastest 1 s
    assert every == 17
    msg = str(info.value)
    assert "Job 3 cannot finish" in msg and f"5000 iterations of 1 s, checkpoint every {every} iterations, 30 s" in msg
    assert "even checkpoints at Young's interval" in msg  # 47 s stretches on a 5 s MTBF: exp(9.4) restarts
    assert "exp(-9.4)" in msg
    # the MTBF it names passes with Young's interval at that MTBF (longer than at 10 s)
    mtbf = float(re.search(r"raise gpu_mtbf to >= ([\d,.]+) s", msg).group(1))
    C.ClusterSimulation(C.JobTrace((job,)), cluster, C.schedulers.make("fifo"), seed=0, checkpoints="young",
                        failures=C.FailureModel(gpu_mtbf=mtbf))
    assert mtbf > 2 * 47 / math.log1p(fl.MAX_RESTARTS_PER_STRETCH)  # more than at the 47 s stretch of 10 s


# ---------------------------------------------------------------------- a clock too coarse or stuck
def test_arrival_times_in_nanoseconds_end_early_with_one_clear_error():
    jobs = (_job(0, arrival=1.7e18, iterations=1_800), _job(1, arrival=1.7e18 + 4e9, iterations=600))
    s = C.ClusterSimulation(C.JobTrace(jobs), _node(), C.schedulers.make("fifo"), seed=0, failures=C.FailureModel())
    with pytest.raises(C.ClusterRunError) as info:
        view = s.run_until_decision()
        while view is not None:
            s.allocate_in_order(view.active)
            view = s.run_until_decision()
    assert math.ulp(1.7e18) == 256.0
    assert "float64 resolves only 256 s" in str(info.value) and "job 0's 1 s iterations" in str(info.value)
    assert "nanoseconds" in str(info.value) and s.n_events < 10  # at its first completion, not the event cap
    assert isinstance(info.value, RuntimeError)


@pytest.mark.parametrize("scale", [1e8, 1e9, 1e10])
def test_a_completion_closer_than_the_clock_resolution_completes(scale):
    # Before, about half of these single jobs spun to the event cap: their completion rounded to `now`.
    for k in range(40):
        arrival, t, iterations = scale * (1 + k * 0.0137), 1.0 + k * 0.00731, 1_000 + k
        r = simulate_cluster(C.JobTrace((_job(0, arrival, iterations, t=t),)), _node(), C.schedulers.make("fifo"),
                             seed=0, failures=C.FailureModel(), max_events=100)
        jct = r.jobs["completion"][0] - arrival
        assert abs(jct - iterations * t) <= 2 * math.ulp(arrival + iterations * t), (k, jct, iterations * t)


def test_a_clock_that_stops_advancing_is_reported_after_stuck_steps():
    # A round tick of 1e-9 s at t ~ 1e9 s (float64 spacing 1.2e-7 s): every tick lands on `now` again.
    jobs = (_job(0, arrival=1e9, iterations=100, gpus=8), _job(1, arrival=1e9, iterations=100, gpus=8))
    start = time.perf_counter()
    with pytest.raises(C.ClusterRunError, match="clock has not advanced past t=1e\\+09 s") as info:
        simulate_cluster(C.JobTrace(jobs), _node(), C.schedulers.LAS(round_s=1e-9), seed=0,
                         failures=C.FailureModel())
    assert "round_s" in str(info.value) and f"{math.ulp(1e9):.3g} s" in str(info.value)
    assert time.perf_counter() - start < 30


def test_the_event_cap_stays_as_a_last_resort_with_a_clear_message():
    jobs = tuple(_job(i, arrival=10.0 * i, iterations=500) for i in range(20))
    with pytest.raises(C.ClusterRunError) as info:
        simulate_cluster(C.JobTrace(jobs), _node(2), C.schedulers.make("fifo"), seed=0,
                         failures=C.FailureModel(), max_events=5)
    assert "max_events=5 loop steps" in str(info.value) and "of 20 jobs unfinished" in str(info.value)


def test_the_cli_reports_a_run_that_cannot_go_on_as_one_line(capsys, tmp_path, monkeypatch):
    def capped(*args: object, **kwargs: object) -> C.ClusterResult:  # the real engine, with a tiny event cap
        sim_kwargs = {k: v for k, v in kwargs.items() if k != "placement"}
        trace, cluster, scheduler = args
        return simulate_cluster(trace, cluster, C.schedulers.make(scheduler), max_events=3,
                                times=C.IterationTimes(cluster), **sim_kwargs)

    monkeypatch.setattr(C, "run", capped)
    code, _, err = run(capsys, "cluster", "--trace", "generated:20", "--cluster", "2x8", "--scheduler", "fifo",
                       "--out", str(tmp_path / "out"))
    assert code == 2 and "exceeded max_events=3 loop steps" in error_line(err)


# ---------------------------------------------------------------------- fields that name themselves
@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"profile": {"abc": 1.0}}, "Job 0: profile['abc'] must be a mapping {gpu_count: iteration time [s]}"),
    ({"profile": {"v100": {"abc": 1.0}}}, "Job 0: profile['v100'] key 'abc' must be a GPU count"),
    ({"profile": {"v100": {0: 1.0}}}, "Job 0: profile['v100'] key 0 must be a GPU count"),
    ({"profile": {"v100": {4: "fast"}}}, "Job 0: profile['v100'][4] must be a finite iteration time > 0 [s]"),
    ({"profile": {4: {4: 1.0}}}, "Job 0: profile keys must be GPU type names"),
    ({"profile": [("v100", {4: 1.0})]}, "Job 0: profile must be a mapping"),
    ({"max_gpus": "4"}, "Job 0: max_gpus must be None or an integer >= gpus (1), got '4'"),
    ({"max_gpus": 4.0}, "Job 0: max_gpus must be None or an integer >= gpus (1), got 4.0"),
    ({"arrival": "0"}, "Job 0: arrival must be a finite time >= 0 [s], got '0'"),
    ({"checkpoint_cost": "1"}, "Job 0: checkpoint_cost must be a finite time >= 0 [s], got '1'"),
    ({"checkpoint_every": True}, "Job 0: checkpoint_every must be None or an integer >= 1, got True"),
    ({"cross_node_bytes": "8"}, "Job 0: cross_node_bytes must be None or a finite number >= 0 [B], got '8'"),
    ({"job_type": 3}, "Job 0: job_type must be a string"),
    ({"workload_params": [1, 2]}, "Job 0: workload_params must be a mapping"),
])
def test_bad_job_fields_are_named(kwargs, expected):
    fields = {"job_id": 0, "arrival": 0.0, "iterations": 10, "workload": None, "profile": {"*": {1: 1.0}}} | kwargs
    with pytest.raises(ValueError) as info:
        C.Job(**fields)
    assert str(info.value).startswith(expected), str(info.value)


def test_a_json_style_profile_is_read_as_numbers():
    job = C.Job(0, 0, 10, gpus=2, workload=None, profile={"v100": {"2": 1.5, "4": 1}}, max_gpus=4)
    assert dict(job.profile["v100"]) == {2: 1.5, 4: 1.0} and job.max_gpus == 4 and job.arrival == 0.0
    assert all(type(k) is int and type(v) is float for k, v in job.profile["v100"].items())


@pytest.mark.parametrize(("build", "expected"), [
    (lambda: C.Cluster((C.Node(8),), inter_node_bandwidth="25e9"), "Cluster.inter_node_bandwidth must be a number"),
    (lambda: C.Cluster((C.Node(8),), node_uplink_bandwidth=float("nan")), "Cluster.node_uplink_bandwidth"),
    (lambda: C.Cluster((C.Node(8),), inter_node_latency=None), "Cluster.inter_node_latency must be a finite time"),
    (lambda: C.Node(8, gpu_type=None), "Node.gpu_type must be a GPU type name"),
    (lambda: C.FailureModel(gpu_mtbf="72"), "FailureModel.gpu_mtbf must be a time > 0 [s]"),
    (lambda: C.FailureModel(restart_delay=None), "FailureModel.restart_delay must be a finite time"),
    (lambda: C.FailureModel(straggler_speed="0.5"), "FailureModel.straggler_speed must be in (0, 1]"),
])
def test_bad_cluster_and_failure_fields_are_named(build, expected):
    with pytest.raises(ValueError) as info:
        build()
    assert str(info.value).startswith(expected), str(info.value)
