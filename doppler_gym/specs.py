"""Instance specs: the one grammar of the strings that name a graph, a trace, a cluster or a model.

A spec names a thing and, optionally, its parameters, the way CompilerGym's benchmark URIs do::

    spec    := NAME [":" ARG]* [":" KEY "=" VALUE ["," KEY "=" VALUE]*]

    ffnn                                  NAME
    pipeline:stages=4,microbatches=8      NAME and KEY=VALUE parameters
    random:n_ops=40..80,levels=3          a range parameter (a training mix draws from it)
    generated:200                         NAME and one positional ARG (a job count)
    uniform:4x8:p100                      NAME and two positional ARGs (a shape, a GPU type)

- ``NAME`` is the text before the first ``:`` (spaces around it dropped); it must not be empty.
- An ``ARG`` is a ``:``-separated field without ``=``; it stays a string as written (the caller
  reads it: a count, a shape). The caller says how many it takes (``max_args``).
- The first field holding an ``=`` starts the parameters: ``KEY=VALUE`` items separated by ``,``
  (empty items are skipped; a ``,`` inside quotes or brackets does not separate), each ``KEY`` a
  Python identifier given once. A ``VALUE`` may hold ``:`` and ``=``.
- A ``VALUE`` (spaces around it dropped) is read by :func:`parse_value`, in this order:

  ====================================  ==========================  ===========================
  written                               value                       e.g.
  ====================================  ==========================  ===========================
  ``true`` / ``false`` (any case)       ``bool``                    ``unit_costs=true``
  what ``int()`` reads                  ``int``                     ``layers=4``, ``seed=07``
  what ``float()`` reads                ``float``                   ``edge_prob=0.2``, ``inf``
  ``LO..HI``, both ends numbers         :class:`Range` (LO <= HI)   ``n_ops=40..80``
  any other Python literal              what ``ast.literal_eval``   ``None``, ``'a,b'``, ``0x10``,
                                        reads                       ``(1e9,1e12)``
  anything else                         ``str`` as written          ``schedule=1f1b``, ``none``
  ====================================  ==========================  ===========================

  so a string that would read as something else is quoted (``name='4'``), and ``none`` stays
  the string ``"none"`` (an optimizer name); ``None`` is Python's ``None``.

:func:`format_spec` writes a :class:`Spec` back so that :func:`parse_spec` reads the same spec.
Errors are ``ValueError`` naming the spec, where it came from and the form to write.

>>> parse_spec("pipeline:stages=4,schedule=1f1b,unit_costs=true")
Spec(name='pipeline', args=(), params={'stages': 4, 'schedule': '1f1b', 'unit_costs': True})
>>> parse_spec("random:n_ops=40..80").params["n_ops"]
Range(lo=40, hi=80)
>>> format_spec(parse_spec("generated:200", max_args=1))
'generated:200'
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

__all__ = ["Range", "Spec", "format_spec", "format_value", "parse_param", "parse_spec", "parse_value", "spec_name"]

_KEYWORDS = {"true": True, "false": False}
_QUOTES = "'\""
_OPEN, _CLOSE = "([{", ")]}"
_NEEDS_QUOTES = set(",'\"()[]{}\\")


class Range(NamedTuple):
    """A closed interval ``LO..HI`` of a parameter, ``lo <= hi`` (both ints: draws are ints)."""

    lo: int | float
    hi: int | float


@dataclass(frozen=True)
class Spec:
    """One parsed spec.

    Attributes:
        name: the text before the first ``:``, stripped (a workload, trace or preset name, a path).
        args: the positional fields, stripped strings as written (e.g. ``("200",)``).
        params: ``KEY -> value`` in the order written (read-only); values as :func:`parse_value`
            reads them.
    """

    name: str
    args: tuple[str, ...] = ()
    params: Mapping[str, object] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def __repr__(self) -> str:
        return f"Spec(name={self.name!r}, args={self.args!r}, params={dict(self.params)!r})"


def spec_name(text: str) -> str:
    """The ``NAME`` of a spec string (the text before the first ``:``, stripped), without checking the rest."""
    return str(text).partition(":")[0].strip()


def parse_spec(text: str, where: str = "spec", *, max_args: int = 0, params: bool = True,
               usage: str | None = None) -> Spec:
    """The :class:`Spec` that ``text`` writes (grammar in the module docstring).

    Args:
        text: the spec string, e.g. ``"pipeline:stages=4,microbatches=8"``.
        where: how the caller names ``text`` in error messages (``"--trace"``, ``"graph_mix[0]"``).
        max_args: how many positional ``ARG`` fields the caller takes (``0``: none).
        params: whether the caller takes ``KEY=VALUE`` parameters.
        usage: the form to suggest in errors (default: built from ``max_args`` and ``params``),
            e.g. ``"NAME:KEY=VALUE,KEY=VALUE, e.g. pipeline:stages=4"``.

    Raises:
        ValueError: an empty NAME or field, more ARGs than ``max_args``, parameters where none are
            taken, an item without ``=``, a KEY that is not an identifier or given twice, a range
            with LO > HI; the message names ``where``, ``text`` and the form to write.
        TypeError: ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise TypeError(f"{where} must be a spec string such as {_usage(max_args, params, usage)}; "
                        f"got {type(text).__name__}")
    form = _usage(max_args, params, usage)

    def fail(problem: str) -> ValueError:
        return ValueError(f"{where} {text!r}: {problem}; expected {form}")

    name, sep, rest = text.partition(":")
    name = name.strip()
    if not name:
        raise fail("the NAME before ':' is empty")
    args: list[str] = []
    pairs: dict[str, object] = {}
    while sep:
        field_text, sep, tail = rest.partition(":")
        if "=" in field_text:
            if not params:
                raise fail(f"{field_text.strip()!r} is a KEY=VALUE parameter and this spec takes none")
            pairs = _parse_params(rest, where, text, form)
            break
        arg = field_text.strip()
        if not arg:
            if sep or args:  # an empty field between two ':' (a trailing ':' alone is allowed)
                raise fail("a field between ':' is empty")
            break
        if len(args) >= max_args:
            what = "is not KEY=VALUE" if params else "is one field too many"
            raise fail(f"{arg!r} {what}")
        args.append(arg)
        rest = tail
    return Spec(name, tuple(args), pairs)


def parse_param(text: str, where: str = "parameter", example: str = "layers=4") -> tuple[str, object]:
    """``"KEY=VALUE"`` -> ``(KEY, value)``: one parameter, its VALUE read by :func:`parse_value`
    (the whole text after the first ``=``, commas included: ``flops_range=(1e9, 1e12)``).

    Raises:
        ValueError: no ``=``, or a KEY that is not a Python identifier; the message names
            ``where`` and ``text`` and shows ``example``.
    """
    key, sep, value = str(text).partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"{where} {text!r}: expected KEY=VALUE, e.g. {example}")
    if not key.isidentifier():
        raise ValueError(f"{where} {text!r}: KEY {key!r} is not a name (letters, digits and _, not starting with a "
                         f"digit); expected KEY=VALUE, e.g. {example}")
    return key, parse_value(value, f"{where} {text!r}")


def parse_value(text: str, where: str = "value") -> object:
    """The value that ``text`` writes (the table of the module docstring).

    Raises:
        ValueError: a range ``LO..HI`` with ``LO > HI`` (or a NaN end); the message names ``where``.
    """
    text = str(text).strip()
    keyword = _KEYWORDS.get(text.lower())
    if keyword is not None:
        return keyword
    number = _number(text)
    if number is not None:
        return number
    lo_text, dots, hi_text = text.partition("..")
    if dots:
        lo, hi = _number(lo_text), _number(hi_text)
        if lo is not None and hi is not None:
            if not lo <= hi:
                raise ValueError(f"{where}: the range {text!r} has LO > HI; write LO..HI with LO <= HI, e.g. 40..80")
            return Range(lo, hi)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def format_value(value: object) -> str:
    """``value`` written so that :func:`parse_value` reads it back (``True`` -> ``"true"``,
    ``Range(1, 5)`` -> ``"1..5"``, a string that would read as something else -> quoted).

    Raises:
        ValueError: a value no spec can write (one whose ``repr`` is not a Python literal).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Range):
        return f"{format_value(value.lo)}..{format_value(value.hi)}"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, str):
        plain = (value and value == value.strip() and not (_NEEDS_QUOTES & set(value))
                 and _same(parse_value(value), value))
        return value if plain else repr(value)
    text = repr(value)
    try:
        same = _same(ast.literal_eval(text), value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        same = False
    if not same:
        raise ValueError(f"spec value {value!r} ({type(value).__name__}) cannot be written in a spec; use a "
                         f"bool, int, float, str, None, Range or a Python literal (tuple, list, dict)")
    return text


def format_spec(spec: Spec) -> str:
    """The spec string of ``spec``: ``NAME[:ARG...][:KEY=VALUE,...]``; ``parse_spec(format_spec(s)) == s``.

    Raises:
        ValueError: a NAME or ARG that the grammar cannot hold (empty, with ``:`` or ``=``, or with
            spaces around it), a KEY that is not an identifier, or a value :func:`format_value` cannot write.
    """
    for part, what in ((spec.name, "NAME"), *((a, "ARG") for a in spec.args)):
        if not part or part != part.strip() or ":" in part or (what == "ARG" and "=" in part):
            raise ValueError(f"Spec {spec!r}: {what} {part!r} cannot be written in a spec; it must be non-empty, "
                             f"without ':'{' or =' if what == 'ARG' else ''} and without spaces around it")
    bad = [k for k in spec.params if not (isinstance(k, str) and k.isidentifier())]
    if bad:
        raise ValueError(f"Spec {spec!r}: KEY {bad[0]!r} is not a name (letters, digits and _)")
    text = ":".join((spec.name, *spec.args))
    if spec.params:
        text += ":" + ",".join(f"{k}={format_value(v)}" for k, v in spec.params.items())
    return text


# ---------------------------------------------------------------------- helpers
def _usage(max_args: int, params: bool, usage: str | None) -> str:
    if usage is not None:
        return usage
    form = "NAME" + "[:ARG]" * max_args
    return form + "[:KEY=VALUE,KEY=VALUE...], e.g. pipeline:stages=4,microbatches=8" if params else form


def _parse_params(text: str, where: str, spec: str, form: str) -> dict[str, object]:
    """``"a=1,b=x"`` -> ``{"a": 1, "b": "x"}`` (the parameter field of ``spec``)."""
    out: dict[str, object] = {}
    for item in _split(text, ",", where, spec, form):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"{where} {spec!r}: {item!r} is not KEY=VALUE; expected {form}")
        if not key.isidentifier():
            raise ValueError(f"{where} {spec!r}: KEY {key!r} is not a name (letters, digits and _, not starting "
                             f"with a digit); expected {form}")
        if key in out:
            raise ValueError(f"{where} {spec!r}: {key} is given twice; give each KEY once")
        out[key] = parse_value(value, f"{where} {spec!r}, {key}")
    return out


def _split(text: str, sep: str, where: str, spec: str, form: str) -> list[str]:
    """``text`` split at each ``sep`` outside quotes and brackets."""
    parts, start, depth, quote, i = [], 0, 0, "", 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in _QUOTES:
            quote = c
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(depth - 1, 0)
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    if quote:
        raise ValueError(f"{where} {spec!r}: a quote {quote} is not closed; expected {form}")
    parts.append(text[start:])
    return parts


def _number(text: str) -> int | float | None:
    """``int(text)``, else ``float(text)``, else ``None``."""
    text = text.strip()
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None


def _same(a: object, b: object) -> bool:
    """Equal and of the same type (NaN equals NaN), recursively for containers."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b
