"""``doppler eval GRAPH --backend real``: every baseline measured on real devices next to the simulator,
with Kendall tau and mean relative error recomputed here from the written numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import kendalltau

from doppler_gym.cli.main import main
from envs_real.compare import rank_agreement

SMALL_FFNN = ["--param", "batch=32", "--param", "d_in=32", "--param", "hidden=32", "--param", "layers=2",
              "--param", "blocks=2"]


def test_rank_agreement_by_hand():
    tau, mre = rank_agreement(np.array([1.0, 2.0, 3.0]), np.array([1.0, 3.0, 2.0]))
    assert tau == pytest.approx(1 / 3)  # 2 concordant pairs, 1 discordant, of 3
    assert mre == pytest.approx((0 + 1 / 3 + 1 / 2) / 3)
    tau, mre = rank_agreement(np.array([1.0, 2.0, np.nan]), np.array([2.0, 4.0, 1.0]))  # NaN rows are left out
    assert tau == pytest.approx(1.0) and mre == pytest.approx(0.5)


def test_eval_backend_real_measures_every_baseline(capsys, tmp_path):
    code = main(["eval", "ffnn", *SMALL_FFNN, "--devices", "cpu:2", "--backend", "real",
                 "--baselines", "round_robin,critical_path,heft,random", "--real-repeats", "1",
                 "--budget-seconds", "0.3", "--out", str(tmp_path)])
    text = capsys.readouterr().out
    assert code == 0
    data = json.loads((tmp_path / "eval.json").read_text())
    real = data["real"]
    assert data["n_devices"] == 2
    assert [r["name"] for r in real["rows"]] == [r["name"] for r in data["rows"]]
    for row, r in zip(data["rows"], real["rows"]):
        assert r["simulated"] == pytest.approx(row["makespan"]) and r["error"] is None
        assert r["measured_s"] > 0 and r["calibrated_s"] > 0
    sim = np.array([r["simulated"] for r in real["rows"]])
    cal = np.array([r["calibrated_s"] for r in real["rows"]])
    meas = np.array([r["measured_s"] for r in real["rows"]])
    for pred, key in ((sim, "kendall_tau_simulated"), (cal, "kendall_tau_calibrated")):
        expected = kendalltau(pred, meas).statistic
        assert real[key] == pytest.approx(expected) if np.isfinite(expected) else real[key] is None
    assert real["mean_relative_error_calibrated"] == pytest.approx(np.mean(np.abs(cal - meas) / meas))
    assert real["mean_relative_error_simulated"] == pytest.approx(np.mean(np.abs(sim - meas) / meas))  # seconds
    assert "Kendall tau" in text and "calibrated" in text and "measured" in text


def test_eval_device_spec_needs_backend_real(capsys, tmp_path):
    code = main(["eval", "ffnn", *SMALL_FFNN, "--devices", "cpu:2", "--baselines", "round_robin",
                 "--out", str(tmp_path)])
    assert code == 2 and "--backend real" in capsys.readouterr().err
