"""The per-op fields a roofline cost model reads: ``io_bytes`` and ``precisions``."""

import numpy as np
import pytest

from doppler_gym.graph.io_json import graph_from_dict, graph_to_dict
from doppler_gym.graph.types import PRECISIONS, DataflowGraph


def _graph(**fields) -> DataflowGraph:
    return DataflowGraph(src=[0], dst=[1], flops=[1.0, 2.0], out_bytes=[3.0, 4.0], **fields)


def test_defaults_are_zero_traffic_and_no_precision():
    g = _graph()
    assert g.io_bytes.tolist() == [0.0, 0.0]
    assert g.precisions is None


def test_json_round_trip_keeps_both_fields():
    g = _graph(io_bytes=[5.0, 0.0], precisions=["bf16", "fp32"])
    data = graph_to_dict(g)
    assert "io_bytes" not in data["ops"][1]  # zeros are not written
    h = graph_from_dict(data)
    assert h.io_bytes.tolist() == [5.0, 0.0]
    assert h.precisions == ("bf16", "fp32")


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"precisions": ("bf17", "fp32")}, "bf17"),
        ({"precisions": ("bf16",)}, "precisions has 1 entries"),
        ({"io_bytes": [1.0, np.nan]}, "io_bytes"),
        ({"io_bytes": [1.0, -2.0]}, "io_bytes"),
    ],
)
def test_bad_values_name_the_field(fields, match):
    with pytest.raises(ValueError, match=match):
        _graph(**fields)


def test_precision_on_some_ops_only_is_refused_in_json():
    data = graph_to_dict(_graph(precisions=("bf16", "fp8")))
    del data["ops"][0]["precision"]
    with pytest.raises(ValueError, match="precision"):
        graph_from_dict(data)
    assert set(PRECISIONS) >= {"bf16", "fp8"}
