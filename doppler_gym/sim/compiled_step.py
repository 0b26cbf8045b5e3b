"""``compiled_step``: the decorator of a kernel's inner step compiled on its own, without reference counting.

Numba counts references around every array argument of a compiled function that has loops, whether it is
inlined or called: one atomic increment and decrement per array (or array in a tuple) per call. In a step
called once per event or once per env, that costs more than the step itself (measured: the event loop's
priority grants took 1.5-2.6x as long through an inlined or a plain compiled function, 0.87-0.91x through
this one; the vector env's SEL and PLC steps 22-24 us per 64 envs against 17 us). Numba's ``_nrt=False``
compiles the function without them. A step compiled so must neither allocate an array nor return or keep
one (it reads and writes its arguments' elements and slices them only); an allocation fails to compile.
"""

from __future__ import annotations

from numba import njit

compiled_step = njit(cache=True, _nrt=False)
