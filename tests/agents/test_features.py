"""agents.features: the numpy features of the direct decoder against the policy's torch ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.features import (
    N_DEV_INPUTS,
    N_SEL_INPUTS,
    device_inputs,
    device_inputs_np,
    eft_gap,
    eft_gap_np,
    sel_inputs,
    sel_inputs_np,
    speed_terms_np,
)

TOL = {"rtol": 1e-6, "atol": 1e-6}  # float32 rounding of log1p / division in torch vs numpy


def _device_batch(seed: int, k: int = 4, nd: int = 6, pad: int = 2):
    g = torch.Generator().manual_seed(seed)
    dfeat = torch.rand(k, nd + pad, 7, generator=g) * 3.0
    dfeat[0, :, 4] = 0.5  # equal earliest starts: a zero-variance column
    dfeat[:, :, 5] += 0.1  # relative speeds > 0
    count, load = torch.rand(k, nd + pad, generator=g), torch.rand(k, nd + pad, generator=g)
    comp = torch.rand(k, generator=g) * 0.1
    comp[0] = 0.0  # a compute-free op: the gap's floor and cap
    valid = torch.zeros(k, nd + pad, dtype=torch.bool)
    valid[:, :nd] = True
    return dfeat, count, load, comp, valid, nd


@pytest.mark.parametrize("seed", [0, 1])
def test_device_inputs_and_gap_agree_with_the_torch_definition(seed):
    dfeat, count, load, comp, valid, nd = _device_batch(seed)
    with torch.no_grad():
        want_in = device_inputs(dfeat, valid, count, load).numpy()
        want_gap = eft_gap(dfeat, comp, valid).numpy()
    assert want_in.shape[-1] == N_DEV_INPUTS
    np.testing.assert_array_equal(want_in[:, nd:], 0.0)  # padding devices
    np.testing.assert_array_equal(want_gap[:, nd:], 0.0)
    real = dfeat[:, :nd].numpy()  # numpy: real devices only
    got_in = device_inputs_np(real, count[:, :nd].numpy(), load[:, :nd].numpy())
    got_gap = eft_gap_np(real, comp.numpy())
    assert got_in.dtype == got_gap.dtype == np.float32
    np.testing.assert_allclose(got_in, want_in[:, :nd], **TOL)
    np.testing.assert_allclose(got_gap, want_gap[:, :nd], **TOL)
    np.testing.assert_array_equal(eft_gap_np(real, comp.numpy(), speed_terms_np(real)), got_gap)


def test_sel_inputs_agree_with_the_torch_definition_and_one_episode_with_the_batch():
    rng = np.random.default_rng(0)
    k, n = 3, 9
    feats = rng.random((k, n, 5)).astype(np.float32)
    feats[1, :, 2] = 0.25  # equal features over the ready ops: a zero-variance column
    ready = rng.random((k, n)) < 0.5
    ready[:, 0] = True
    frac = rng.random((k, 2)).astype(np.float32)
    rows, ops = np.nonzero(ready)
    with torch.no_grad():
        want = sel_inputs(torch.from_numpy(feats), torch.from_numpy(ready), torch.from_numpy(frac),
                          torch.from_numpy(rows), torch.from_numpy(ops)).numpy()
    sizes = ready.sum(1)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    x64 = feats[rows, ops].astype(np.float64)
    got = sel_inputs_np(x64, starts, sizes.astype(np.float64)[:, None], frac[:, 0], frac[:, 1],
                        np.repeat(np.arange(k), sizes))
    assert got.shape == (rows.size, N_SEL_INPUTS) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, **TOL)
    for r in range(k):  # one episode alone gives its rows of the batch, bit for bit
        one = sel_inputs_np(x64[starts[r] : starts[r] + sizes[r]], np.zeros(1, np.intp), float(sizes[r]),
                            frac[r, 0], frac[r, 1])
        np.testing.assert_array_equal(one, got[starts[r] : starts[r] + sizes[r]])
