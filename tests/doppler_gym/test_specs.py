"""The spec grammar: value types, ranges, positional fields, round trips and error messages."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from doppler_gym.specs import Range, Spec, format_spec, format_value, parse_param, parse_spec, parse_value, spec_name


@pytest.mark.parametrize(("text", "value"), [
    ("4", 4), ("-3", -3), ("07", 7), ("1_000", 1000), (" 12 ", 12),
    ("0.2", 0.2), ("1e-3", 1e-3), ("inf", math.inf), ("-inf", -math.inf),
    ("true", True), ("FALSE", False), ("True", True),
    ("None", None), ("none", "none"),
    ("40..80", Range(40, 80)), ("0.5..2", Range(0.5, 2)), ("-3..-1", Range(-3, -1)), ("1e9..1e12", Range(1e9, 1e12)),
    ("'4'", "4"), ("'a,b'", "a,b"), ("0x10", 16), ("(1e9, 1e12)", (1e9, 1e12)), ("[64, 64]", [64, 64]),
    ("1f1b", "1f1b"), ("float16", "float16"), ("zb-h1", "zb-h1"), ("", ""), ("a b", "a b"),
    ("../runs", "../runs"), ("random:n_ops=40..80", "random:n_ops=40..80"), ("cuda:0", "cuda:0"),
])
def test_each_value_type(text, value):
    got = parse_value(text)
    assert got == value and type(got) is type(value)


def test_a_range_is_a_pair_and_keeps_int_ends():
    r = parse_value("8..14")
    assert isinstance(r, Range) and r == (8, 14) and type(r.lo) is int and type(r.hi) is int
    assert type(parse_value("8..14.0").hi) is float


def test_spec_forms():
    assert parse_spec("ffnn") == Spec("ffnn")
    assert parse_spec(" pipeline : stages=4 , microbatches=8,schedule=1f1b,unit_costs=true,") == Spec(
        "pipeline", (), {"stages": 4, "microbatches": 8, "schedule": "1f1b", "unit_costs": True})
    assert parse_spec("random:").params == {}
    assert parse_spec("random:n_ops=40..80,flops_range=(1e9, 1e12)").params == {
        "n_ops": Range(40, 80), "flops_range": (1e9, 1e12)}
    assert parse_spec("x:label='a,b',path=c:d=e").params == {"label": "a,b", "path": "c:d=e"}
    assert parse_spec("generated:200", max_args=1) == Spec("generated", ("200",))
    assert parse_spec("uniform:4x8:p100", max_args=2) == Spec("uniform", ("4x8", "p100"))
    assert parse_spec("uniform:0x4", max_args=1).args == ("0x4",)  # positional fields stay as written
    assert parse_spec("gen:5:seed=3", max_args=1) == Spec("gen", ("5",), {"seed": 3})
    assert spec_name(" pipeline :stages=4") == "pipeline" and spec_name("C:/graphs/x.json") == "C"


def test_parse_param_takes_the_whole_value():
    assert parse_param("flops_range=(1e9, 1e12)") == ("flops_range", (1e9, 1e12))
    assert parse_param(" layers = 4 ") == ("layers", 4)
    assert parse_param("graph_mix=random:n_ops=40..80;chainmm") == ("graph_mix", "random:n_ops=40..80;chainmm")


def test_spec_is_frozen_and_hashable():
    spec = parse_spec("ffnn:layers=4")
    with pytest.raises(AttributeError):
        spec.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.params["layers"] = 5  # type: ignore[index]
    assert hash(spec) == hash(parse_spec("ffnn:layers=4"))


@pytest.mark.parametrize(("text", "kwargs", "needles"), [  # what is wrong, then the fix
    ("pipeline:stages", {}, ["'stages' is not KEY=VALUE", "expected THE FORM"]),
    ("random:n_ops=9..3", {}, ["n_ops", "LO > HI", "write LO..HI with LO <= HI"]),
    (":x", {}, ["NAME before ':' is empty", "expected THE FORM"]),
    ("a::b", {"max_args": 2}, ["field between ':' is empty", "expected THE FORM"]),
    ("x:1n=2", {}, ["KEY '1n' is not a name", "expected THE FORM"]),
    ("x:a=1,a=2", {}, ["a is given twice", "give each KEY once"]),
    ("x:a='b", {}, ["quote ' is not closed", "expected THE FORM"]),
    ("x:a=1,b", {}, ["'b' is not KEY=VALUE", "expected THE FORM"]),
    ("generated:1:2", {"max_args": 1, "params": False}, ["'2' is one field too many", "expected THE FORM"]),
    ("generated:n=5", {"max_args": 1, "params": False},
     ["'n=5' is a KEY=VALUE parameter and this spec takes none", "expected THE FORM"]),
])
def test_every_error_names_the_spec_where_and_the_fix(text, kwargs, needles):
    with pytest.raises(ValueError) as err:
        parse_spec(text, "--thing", usage="THE FORM", **kwargs)
    message = str(err.value)
    assert message.startswith(f"--thing {text!r}")
    for needle in needles:
        assert needle in message


def test_errors_of_parse_param_and_bad_input_types():
    with pytest.raises(ValueError, match=r"--param 'layers': expected KEY=VALUE, e.g. --param layers=4"):
        parse_param("layers", "--param", example="--param layers=4")
    with pytest.raises(ValueError, match="is not a name"):
        parse_param("a-b=1", "--param")
    with pytest.raises(TypeError, match="--graph must be a spec string"):
        parse_spec(3, "--graph")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot be written"):
        format_value(object())
    with pytest.raises(ValueError, match="ARG 'a:b' cannot be written"):
        format_spec(Spec("x", ("a:b",)))
    with pytest.raises(ValueError, match="KEY 'a b' is not a name"):
        format_spec(Spec("x", (), {"a b": 1}))


def test_format_examples():
    assert format_spec(Spec("pipeline", (), {"stages": 4, "unit_costs": True, "schedule": "1f1b"})) == \
        "pipeline:stages=4,unit_costs=true,schedule=1f1b"
    assert format_spec(Spec("uniform", ("4x8", "p100"))) == "uniform:4x8:p100"
    assert format_value(Range(40, 80)) == "40..80"
    assert format_value("4") == "'4'" and format_value("none") == "none" and format_value(None) == "None"
    assert format_value("a,b") == "'a,b'" and format_value("") == "''"


# ---------------------------------------------------------------------- round trips
_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_./-]{0,12}", fullmatch=True)
_args = st.from_regex(r"[A-Za-z0-9_.x%-]{1,8}", fullmatch=True)
_keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
_numbers = st.integers(-10**12, 10**12) | st.floats(allow_nan=False)
_ranges = st.tuples(_numbers, _numbers).map(lambda p: Range(min(p), max(p)))
_values = (st.booleans() | st.none() | _numbers | st.text(max_size=12) | _ranges
           | st.lists(st.integers(), max_size=3) | st.tuples(st.floats(allow_nan=False), st.text(max_size=4)))


@given(name=_names, args=st.lists(_args, max_size=2), params=st.dictionaries(_keys, _values, max_size=4))
def test_format_then_parse_is_the_same_spec(name, args, params):
    spec = Spec(name, tuple(args), params)
    text = format_spec(spec)
    back = parse_spec(text, max_args=len(args))
    assert back == spec, text
    for key, value in params.items():
        assert type(back.params[key]) is type(value)
    assert format_spec(back) == text


@given(value=_values | st.floats())
def test_format_value_then_parse_value_is_the_same_value(value):
    back = parse_value(format_value(value))
    assert type(back) is type(value)
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(back)
    else:
        assert back == value
