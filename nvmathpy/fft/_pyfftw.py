"""pyFFTW (FFTW 3) as one of the CPU FFT libraries (:mod:`._libraries`): its import, FFTW's
wisdom (imported from a plan's stored extra, forgotten, measured for calibration) and
:class:`PyfftwLibrary`, whose plans run on the caller's arrays where FFTW takes them."""

from __future__ import annotations

import base64
import sys
from typing import Any, Mapping

import numpy as np

from .._fftw_binding import bind_pyfftw_first
from ..plan import Candidate
from ._layout import Layout, scale_factor
from ._library_base import Call, FFTPrepared, Library, into

__all__ = ["RECYCLED_BELOW", "PyfftwLibrary", "forget_fftw_wisdom", "import_fftw_wisdom", "import_pyfftw",
           "measured_fftw_wisdom", "plans_from_wisdom_only"]


def import_pyfftw() -> Any:
    """Import pyFFTW without its dask interface, unless dask.array is loaded already.

    ``import pyfftw`` imports ``pyfftw.interfaces``, which imports ``dask.array`` when dask is
    installed (a slow import, which loads scipy.fftpack too) for ``pyfftw.interfaces.dask_fft``, which
    nvmathpy never uses; the FFTW plans need only the core. ``dask.array.fft`` is hidden for
    the import (pyFFTW skips that interface when it cannot be imported), so the first FFT
    that runs on FFTW does not pay for it. ``import pyfftw.interfaces.dask_fft`` still
    works afterwards.

    pyFFTW's compiled module is loaded first so that its FFTW calls bind to the FFTW libraries it
    ships, whatever else the process loads (:func:`nvmathpy._fftw_binding.bind_pyfftw_first`).
    """
    module = sys.modules.get("pyfftw")
    if module is not None:
        return module
    bind_pyfftw_first()
    hide = "dask.array.fft" not in sys.modules
    if hide:
        sys.modules["dask.array.fft"] = None  # type: ignore[assignment]  # "not importable" to the import system
    try:
        import pyfftw
    finally:
        if hide and sys.modules.get("dask.array.fft", 0) is None:
            del sys.modules["dask.array.fft"]
    return pyfftw


#: FFTW wisdom texts this process has imported already, so a hit imports each once.
_IMPORTED_FFTW_WISDOM: set[tuple] = set()
#: Up to this many bytes per array, a plan on one thread copies through its own buffers: two
#: copies within the core's cache cost less than binding the caller's arrays (pyFFTW checks
#: each ``update_arrays``). Not calibrated per machine (a fraction of a microsecond either way).
_COPIED_UP_TO = 1 << 13
#: Arrays smaller than this many bytes come back from the allocator without page faults (glibc
#: recycles freed blocks of this size from its heap); larger ones are mapped afresh.
RECYCLED_BELOW = 1 << 20
_FFTW_FLAGS = {"estimate": "FFTW_ESTIMATE", "measure": "FFTW_MEASURE", "patient": "FFTW_PATIENT"}


#: The order of pyfftw.export_wisdom()'s tuple.
_FFTW_PRECISIONS = ("double", "single", "long")


def import_fftw_wisdom(extra: Mapping[str, Any] | None) -> None:
    """Import the FFTW wisdom stored in a wisdom entry's ``extra`` (once per process).

    Only the precision the problem runs in is stored and imported: FFTW's import has a cost
    per precision, which a wisdom hit pays once.
    """
    stored = (extra or {}).get("fftw_wisdom")
    if not stored:
        return
    key = tuple(sorted(stored.items()))
    if key in _IMPORTED_FFTW_WISDOM:
        return
    pyfftw = import_pyfftw()
    pyfftw.import_wisdom(tuple(base64.b64decode(stored.get(p, "")) for p in _FFTW_PRECISIONS))
    _IMPORTED_FFTW_WISDOM.add(key)


def forget_fftw_wisdom() -> None:
    """Forget FFTW's in-process wisdom, what nvmathpy imported included (a wisdom entry's hit
    then imports its wisdom again), as in a new process; nothing without pyFFTW.

    Examples
    --------
    >>> forget_fftw_wisdom() is None
    True
    """
    try:
        import_pyfftw().forget_wisdom()
    except ImportError:
        return
    _IMPORTED_FFTW_WISDOM.clear()


def measured_fftw_wisdom(layout: Layout, threads: int, time_limit: float) -> tuple[FFTPrepared, dict[str, Any]]:
    """The FFTW plan of ``layout`` at FFTW_MEASURE on ``threads`` threads (a complex transform's
    backward plan made too), planned under ``time_limit`` seconds per direction from no wisdom,
    and what a build needs to make it again from wisdom only: ``{"fftw_wisdom": {precision:
    text}, "fftw_time_limit": time_limit}`` (FFTW's wisdom of these plans alone: the process's
    FFTW wisdom is forgotten first)."""
    forget_fftw_wisdom()
    measured = Candidate.of("pyfftw", threads=threads, effort="measure")
    prepared = PyfftwLibrary().build(layout, measured, time_limit=time_limit)
    if layout.kind == "c2c":
        prepared.inverse(np.zeros(layout.out_shape, layout.out_dtype))  # plans the backward transform
    return prepared, prepared.wisdom_extra()


def plans_from_wisdom_only(layout: Layout, threads: int, extra: Mapping[str, Any]) -> bool:
    """Whether FFTW plans ``layout`` at FFTW_MEASURE on ``threads`` threads from the wisdom of
    ``extra`` alone (the process's other FFTW wisdom forgotten first): FFTW does not reuse the
    wisdom of a search its time limit cut short."""
    forget_fftw_wisdom()
    try:
        only = Candidate.of("pyfftw", threads=threads, effort="measure", wisdom="only")
        PyfftwLibrary().build(layout, only, extra)
    except RuntimeError:
        return False
    return True


class _FFTWPrepared(FFTPrepared):
    def wisdom_extra(self) -> dict[str, Any]:
        # Even an FFTW_ESTIMATE candidate is stored with the process's wisdom: FFTW plans an
        # ESTIMATE request from MEASURE wisdom when it has some (as after autotune timed the
        # MEASURE candidate), and without it the same candidate can be many times slower.
        pyfftw = import_pyfftw()
        precision = self.state["precision"]
        text = pyfftw.export_wisdom()[_FFTW_PRECISIONS.index(precision)]
        # FFTW does not reuse wisdom of a time-limited search when planning without the limit.
        return {"fftw_wisdom": {precision: base64.b64encode(text).decode("ascii")}, "fftw_time_limit": self.state["time_limit"]}


class PyfftwLibrary(Library):
    """pyFFTW (FFTW 3): plans made at a planner effort, on SIMD-aligned buffers.

    FFTW plans are bound to arrays of one alignment and strides: an input that is not
    C-contiguous and aligned as the plan needs is copied into the plan's aligned buffer first (as
    ``pyfftw.builders`` objects do), and so are c2r inputs (FFTW destroys them).
    ``inplace`` results are copied into the operand.
    The backward c2c plan is built on first use of the inverse direction. ``time_limit``
    bounds FFTW's planning (seconds; FFTW keeps the best plan found by then).
    """

    name = "pyfftw"
    module = "pyfftw"

    def build(self, layout, candidate, extra=None, time_limit: float | None = None):
        pyfftw = import_pyfftw()
        import_fftw_wisdom(extra)
        if extra and extra.get("fftw_time_limit") is not None:
            time_limit = extra["fftw_time_limit"]  # plan as the wisdom was made, so it applies
        params = candidate.params
        # a candidate of stored wisdom plans from it only: FFTW fails at once where it holds no plan
        flags = (_FFTW_FLAGS[params["effort"]],) + (("FFTW_WISDOM_ONLY",) if params.get("wisdom") else ())
        threads, axes = params["threads"], layout.axes
        align = pyfftw.simd_alignment
        in_buf = pyfftw.empty_aligned(layout.in_shape, layout.in_dtype, n=align)
        out_buf = pyfftw.empty_aligned(layout.out_shape, layout.out_dtype, n=align)

        def make(direction: str, flags: tuple[str, ...] = flags) -> Any:
            return pyfftw.FFTW(
                in_buf, out_buf, axes=axes, direction=direction, flags=flags, threads=threads,
                planning_timelimit=time_limit,
            )  # fmt: skip

        def make_inverse() -> Any:  # on first use; from wisdom only, FFTW_ESTIMATE where it holds none
            try:
                return make(sign[layout.kind][1])
            except RuntimeError:
                if "FFTW_WISDOM_ONLY" not in flags:
                    raise
                return make(sign[layout.kind][1], ("FFTW_ESTIMATE",))

        sign = {"c2c": ("FFTW_FORWARD", "FFTW_BACKWARD"), "r2c": ("FFTW_FORWARD",) * 2, "c2r": ("FFTW_BACKWARD",) * 2}
        plans: dict[str, Any] = {"forward": make(sign[layout.kind][0])}
        if layout.kind != "c2c":
            plans["inverse"] = plans["forward"]
        # FFTW runs on the caller's input where it is contiguous and aligned as the plan needs
        # (pyFFTW's ``input_alignment``: often less than the buffers' SIMD alignment, e.g.
        # NumPy's 16 bytes suffice where the buffers have 32), into a fresh output (see bound):
        # a copy in and out of the plan's buffers costs more, most of all where the plan's
        # threads read and write what another core's cache holds. A c2r input is copied first
        # (FFTW destroys it).
        copy_in = layout.kind == "c2r"
        copied = threads == 1 and max(in_buf.nbytes, out_buf.nbytes) <= _COPIED_UP_TO
        aligned, out_shape, out_dtype = pyfftw.empty_aligned, layout.out_shape, layout.out_dtype
        # A fresh output the allocator recycles is NumPy's own (pyFFTW's aligned allocation
        # costs more Python than the SIMD alignment beyond the plan's saves there); larger
        # outputs, mapped afresh anyway, get the buffers' alignment.
        empty = (lambda: np.empty(out_shape, out_dtype)) if out_buf.nbytes < RECYCLED_BELOW else (
            lambda: aligned(out_shape, out_dtype, n=align))

        def binds(fftw: Any, a: np.ndarray, result: np.ndarray) -> bool:
            """Whether the plan takes ``a`` and ``result`` (``update_arrays`` checks their
            strides and alignment), then bound to them."""
            try:
                fftw.update_arrays(a, result)
                return True
            except ValueError:
                return False

        def bound(fftw: Any, a: np.ndarray, out: np.ndarray | None, refused: np.ndarray | None = None) -> np.ndarray:
            """The array FFTW writes, bound to it with the input: ``a`` where the plan takes it,
            else a copy of it in the plan's input buffer; ``out`` where the plan takes it, else
            a fresh array (``empty``'s, or the buffers' alignment where the plan needs more).
            ``refused``: a fresh output the plan already refused beside ``a`` (not tried again)."""
            result = refused if refused is not None else empty() if out is None else out
            if refused is None and binds(fftw, a, result):
                return result
            if out is None and result.ctypes.data % fftw.output_alignment:  # NumPy's, less aligned than the plan's
                result = aligned(out_shape, out_dtype, n=align)
                if binds(fftw, a, result):
                    return result
            if a is not in_buf:
                np.copyto(in_buf, a)
            if not binds(fftw, in_buf, result):
                result = aligned(out_shape, out_dtype, n=align)
                fftw.update_arrays(in_buf, result)
            return result

        def runner(direction: str, conj_in: bool, conj_out: bool) -> Call:
            scale = scale_factor(layout, direction)

            def run(a, out=None):
                fftw = plans.get(direction)
                if fftw is None:
                    fftw = plans[direction] = make_inverse()
                if conj_in:
                    np.conjugate(a, out=in_buf)
                    a = in_buf
                elif copy_in or a is out:
                    np.copyto(in_buf, a)
                    a = in_buf
                result = bound(fftw, a, out)
                fftw.execute()
                fftw.update_arrays(in_buf, out_buf)  # keep no reference to the caller's arrays
                if out is not None and result is not out:
                    result = into(out, result)
                if conj_out:
                    np.conjugate(result, out=result)
                if scale != 1.0:
                    np.multiply(result, scale, out=result)
                return result

            if conj_in or conj_out or scale != 1.0 or copy_in or direction not in plans:
                return run

            def run_copied(a, out=None):  # the common case of a tiny plan on one thread
                np.copyto(in_buf, a)
                plans[direction].execute()
                return out_buf.copy() if out is None else into(out, out_buf)

            def run_plain(a, out=None):  # the common case: nothing to convert, a fresh output
                if out is not None:
                    return run(a, out)
                fftw, result = plans[direction], empty()
                try:
                    fftw.update_arrays(a, result)
                except ValueError:
                    result = bound(fftw, a, None, result)
                fftw.execute()
                fftw.update_arrays(in_buf, out_buf)
                return result

            return run_copied if copied else run_plain

        hermitian_in = layout.kind == "c2r"
        fwd = runner("forward", conj_in=hermitian_in, conj_out=False)
        inv = runner("inverse", conj_in=False, conj_out=layout.kind == "r2c")
        return _FFTWPrepared(candidate, fwd, inv, plans=plans, buffers=(in_buf, out_buf), precision=layout.precision, time_limit=time_limit)
