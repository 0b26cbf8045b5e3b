"""An independent SimPy port of the DOPPLER authors' simulator (their ``env/cost.py``): the reference oracle.

``dg.SimConfig.reference()`` promises to reproduce that simulator exactly, same-time event order
included. This module rebuilds the authors' event structure on the real ``simpy`` package so the tests
(``tests/doppler_gym/sim/test_reference_parity.py``) and ``benchmarks/bench_sim.py`` can compare
against it. It is slow on purpose (one Python generator per op and per edge): an oracle, not a
simulator to place with. ``simpy`` is a development dependency (the ``dev`` extra), imported when a
run starts; without it :func:`simpy_trace` raises an ``ImportError`` that says how to install it.

The model, as the authors wrote it:

* One ``simpy.Resource(capacity=1)`` per device that has at least one op (a FIFO single server).
* One *transfer* process per edge ``u -> w``: wait for ``u``'s finish event, then a pure delay of
  ``comm[u]`` if ``u`` and ``w`` sit on different devices, else a delay of 0 (still a timeout event).
  There is no link resource, so transfers never contend.
* One *compute* process per op: wait for ``AllOf`` the transfer processes of its in-edges, request
  the op's device, hold it for ``comp[op]``, release it (leaving the ``with`` block), then trigger the
  op's finish event.
* Processes are created in this order, which fixes SimPy's event ids and so the order of events that
  share a timestamp: the transfer processes in networkx ``G.edges`` order (by producer op, then edge
  id: the authors convert a DGL graph built in file order), then the compute processes in op-id order.
* The clock runs until the event queue is empty; the makespan is the final clock / 1e10.

Costs are float64 exactly as stored in the graph (the paper files' integers are exact in float64).
Times are reported in paper units: raw clock / ``TIME_DIVISOR``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

TIME_DIVISOR = 1e10  # raw cost units per paper time unit (the authors divide env.now by 1e10)


@dataclass
class PortTrace:
    """Result of one SimPy run, in paper units (raw time / 1e10).

    Attributes:
        makespan: final simulation clock / 1e10.
        start: ``(n_ops,) float64`` time each op acquired its device.
        end: ``(n_ops,) float64`` time each op released its device.
        ready: ``(n_ops,) float64`` time all inputs of each op had arrived (the ``AllOf`` fired).
        arrive: ``(n_edges,) float64`` time each edge's transfer process finished its delay.
        log: when ``record=True``, ``(step, raw_time, what, id)`` tuples in the order the processes
            observed them; ``what`` is one of ``"ready"``, ``"start"``, ``"end"`` (op id) or
            ``"arrive"`` (edge id). ``step`` is the number of SimPy events processed so far, so two
            entries with the same raw time can still be ordered. Empty otherwise.
    """

    makespan: float
    start: np.ndarray
    end: np.ndarray
    ready: np.ndarray
    arrive: np.ndarray
    log: list[tuple[int, float, str, int]] = field(default_factory=list)


def _import_simpy():
    """The ``simpy`` module, or an ``ImportError`` naming the package and the extra that installs it."""
    try:
        import simpy
    except ImportError as exc:
        raise ImportError(
            "doppler_gym.sim.simpy_reference needs the simpy package (a development dependency): "
            "pip install simpy, or install doppler-gym with its dev extra: pip install -e '.[dev]'"
        ) from exc
    return simpy


def simpy_trace(graph, assignment, record: bool = False) -> PortTrace:
    """Run the authors' SimPy model on ``graph`` placed by ``assignment``.

    Args:
        graph: a ``DataflowGraph`` (``src``, ``dst``, ``flops`` = comp column, ``out_bytes`` = comm).
        assignment: ``(n_ops,)`` integer device id of each op (any non-negative ids).
        record: also return the ordered event log (slower; for debugging mismatches).

    Returns:
        A :class:`PortTrace` in paper units.
    """
    simpy = _import_simpy()
    src = np.asarray(graph.src, dtype=np.int64)
    dst = np.asarray(graph.dst, dtype=np.int64)
    comp = [float(c) for c in np.asarray(graph.flops, dtype=np.float64)]
    comm = [float(c) for c in np.asarray(graph.out_bytes, dtype=np.float64)]
    dev = [int(d) for d in np.asarray(assignment).reshape(-1)]
    n = len(comp)
    if len(dev) != n:
        raise ValueError(f"assignment has {len(dev)} entries but the graph has {n} ops")

    env = simpy.Environment()
    start = np.zeros(n)
    end = np.zeros(n)
    ready = np.zeros(n)
    arrive = np.zeros(src.shape[0])
    log: list[tuple[int, float, str, int]] = []
    steps = [0]

    def note(what: str, ident: int) -> None:
        if record:
            log.append((steps[0], float(env.now), what, ident))

    finished = [env.event() for _ in range(n)]
    devices = {d: simpy.Resource(env, capacity=1) for d in sorted(set(dev))}

    def transfer(edge: int, producer_done: simpy.Event, delay: float):
        yield producer_done
        yield env.timeout(delay)
        arrive[edge] = env.now
        note("arrive", edge)

    def compute(op: int, inputs: list[simpy.Process]):
        yield simpy.AllOf(env, inputs)
        ready[op] = env.now
        note("ready", op)
        with devices[dev[op]].request() as req:
            yield req
            start[op] = env.now
            note("start", op)
            yield env.timeout(comp[op])
            end[op] = env.now
            note("end", op)
        finished[op].succeed()

    # Transfer processes in networkx G.edges order: by producer, then by edge id.
    edge_order = np.lexsort((np.arange(src.shape[0]), src))
    transfers: dict[int, simpy.Process] = {}
    for k in edge_order.tolist():
        u, w = int(src[k]), int(dst[k])
        delay = comm[u] if dev[u] != dev[w] else 0.0
        transfers[k] = env.process(transfer(k, finished[u], delay))

    # Inputs of each op in the same (producer, edge id) order as G.in_edges on the networkx copy.
    # (AllOf fires on its last input whatever the order; the order is kept only for fidelity.)
    inputs: list[list[simpy.Process]] = [[] for _ in range(n)]
    for k in edge_order.tolist():
        inputs[int(dst[k])].append(transfers[k])
    for op in range(n):
        env.process(compute(op, inputs[op]))

    while env.peek() < float("inf"):
        env.step()
        steps[0] += 1

    return PortTrace(
        makespan=float(env.now) / TIME_DIVISOR,
        start=start / TIME_DIVISOR,
        end=end / TIME_DIVISOR,
        ready=ready / TIME_DIVISOR,
        arrive=arrive / TIME_DIVISOR,
        log=log,
    )


def simpy_makespan(graph, assignment) -> float:
    """Makespan of ``assignment`` on the authors' SimPy model, in paper units (raw / 1e10)."""
    return simpy_trace(graph, assignment).makespan
