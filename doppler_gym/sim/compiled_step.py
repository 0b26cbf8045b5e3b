"""``compiled_step``: the decorator of a kernel's inner step compiled on its own, without reference counting.

Numba counts references around every array argument of a compiled function that has loops, whether it is
inlined or called: one atomic increment and decrement per array (or array in a tuple) per call. In a step
called once per event or once per env, that costs more than the step itself (measured: the event loop's
priority grants took 1.5-2.6x as long through an inlined or a plain compiled function, 0.87-0.91x through
this one; the vector env's step of 64 envs 16-24 us with the counts around its SEL and PLC steps, 9-10 us
compiled so as a whole). Numba's ``_nrt=False`` compiles the function without them, and the functions it calls
with it. A step compiled so must neither allocate an array nor return or keep one, nor call a function that does
(it reads and writes its arguments' elements and slices them only); an allocation fails to compile. It may be
called from Python too (the vector env's step is).
"""

from __future__ import annotations

from numba import njit

compiled_step = njit(cache=True, _nrt=False)
