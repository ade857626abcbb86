"""The :class:`FFT` plan: one FFT problem, specified once, planned/tuned, executed many times.

A call flows through three passes, with the traced callbacks (:mod:`._callbacks`) fused in:

1. the *pre-pass* (:func:`~nvmathpy.fft._layout.make_stage`): crop / zero-pad / convert the
   operand into the engine's input - a prolog callback runs on this plan-owned copy;
2. the *engine*: the chosen library candidate (scipy.fft, ducc0, pyFFTW or mkl_fft on the
   CPU; cuFFT under the CUDA execution space, :mod:`._cuda_engine`, which does the pre-pass
   on the device itself);
3. the *post-pass*: an epilog callback, in place over the result, then conversion back into
   the caller's package.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import (
    InvalidOperandError,
    InvalidOptionError,
    PlanStateError,
)
from ..execution import ExecutionCUDA, as_execution, resolve_execution
from ..kernels.ir import inputs_of
from ..operands import Operand, unwrapper, wrap
from ..plan import as_options
from ._callbacks import _convert_input, check_inputs_used, make_callback
from ._engines_cpu import engine_for, fft_problem
from ._layout import DIRECTIONS, describe, make_stage
from ._libraries import LIBRARIES, RECYCLED_BELOW
from ._one_operand import OneOperandPlan

__all__ = ["FFT", "FFTOptions"]


#: Whether execute() may reuse a previous result that no one references any more (checked
#: with sys.getrefcount, as NumPy's own temporary elision does) - on CPython with the GIL
#: before 3.14, where reference counts are exact. It saves the page faults of a fresh
#: output allocation, a sizeable share of a large FFT's time (outputs under
#: :data:`~._libraries.RECYCLED_BELOW` are allocated: the allocator recycles those without page faults).
_SPARE_RESULTS = (
    sys.implementation.name == "cpython" and sys.version_info < (3, 14) and getattr(sys, "_is_gil_enabled", lambda: True)()
)


def _host_input(value: Any) -> Any:
    """A callback input as a host value (a CUDA array copied to a NumPy one)."""
    if isinstance(value, (int, float, complex, np.number)):
        return value
    operand = wrap(value, "callback_inputs")
    if operand.device == "cpu":
        return operand.array
    from ..cuda.runtime import import_cupy

    return import_cupy().asnumpy(operand.array)


def _raise_detached(*args: Any, **kwargs: Any) -> Any:
    raise PlanStateError("this plan has no operand bound; call reset_operand(x) first")


@dataclass(frozen=True)
class FFTOptions:
    """Options of an :class:`FFT` plan (also accepted as a plain dict).

    Parameters
    ----------
    engines
        Restrict the CPU libraries the plan may choose among, e.g. ``("ducc0",)``; names from
        ``"scipy"``, ``"pocketfft"`` (SciPy's compiled pocketfft called directly), ``"ducc0"``,
        ``"pyfftw"``, ``"mkl_fft"``. ``None`` (default) allows every
        installed one. Asking for one that is not installed raises
        :class:`~nvmathpy.errors.MissingDependencyError`.
    fftw_time_limit
        Seconds FFTW may spend planning one candidate at FFTW_MEASURE/PATIENT (it keeps the
        best plan found by then); ``None`` (default) sets no limit.
    half_precision
        CUDA only: compute in half precision on cuFFT (``CUDA_R_16F``/``CUDA_C_16F``), which it
        supports for power-of-2 lengths only (other lengths raise
        :class:`~nvmathpy.errors.InvalidOptionError`). Operands are rounded to float16; results
        come back as complex64/float32 as without the option. Default ``False``.

    Examples
    --------
    >>> FFTOptions(engines=["scipy"])
    FFTOptions(engines=('scipy',), fftw_time_limit=None, half_precision=False)
    """

    engines: tuple[str, ...] | None = None
    fftw_time_limit: float | None = None
    half_precision: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.half_precision, bool):
            raise InvalidOptionError(f"FFTOptions: half_precision must be True or False, got {self.half_precision!r}")
        limit = self.fftw_time_limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0):
            raise InvalidOptionError(f"FFTOptions: fftw_time_limit={limit!r} is not allowed; allowed: None or seconds > 0")
        if self.engines is None:
            return
        names = (self.engines,) if isinstance(self.engines, str) else tuple(self.engines)
        unknown = [n for n in names if n not in LIBRARIES]
        if unknown or not names:
            raise InvalidOptionError(
                f"FFTOptions: engines={self.engines!r} is not allowed; allowed: a non-empty subset of {list(LIBRARIES)}"
            )
        object.__setattr__(self, "engines", names)


class FFT(OneOperandPlan):
    """A planned FFT over the given axes of one operand.

    Parameters
    ----------
    x
        The operand: a NumPy array or PyTorch CPU tensor (run on the CPU, or with
        ``execution="cuda"`` copied to the GPU and the result back), or a CuPy array or PyTorch
        CUDA tensor (run on cuFFT, on the operand's device; the result is a new array there,
        possibly in the operand's memory order rather than C order).
    axes
        The axes to transform (any order, negative allowed); default: the last ``len(s)``
        axes, or all axes. For r2c/c2r the last listed axis is the real one.
    s
        Logical transform lengths along ``axes``: the input is cropped or zero-padded to them
        (``None``/``-1`` entries keep the input's length). For ``kind="c2r"`` they are the
        real output lengths, and the last entry is required.
    kind
        ``"c2c"``, ``"r2c"`` or ``"c2r"``; ``None`` infers c2c for complex and r2c for real data.
    norm
        ``"backward"`` (default; inverse scaled by 1/n), ``"ortho"`` or ``"forward"``.
    inplace
        Write the result into ``x`` (c2c on a complex operand of the planned lengths only).
    execution
        ``"cpu"``, ``ExecutionCPU(num_threads=...)`` (the thread budget), ``"cuda"``, or ``None``
        (follow the operand).
    options
        :class:`FFTOptions` or a dict.
    stream
        The CUDA stream for the CUDA engine; unused on the CPU.
    prolog
        ``prolog(v, ...)``, applied elementwise to the input before the transform: ``v`` is
        one element of ``x`` (cropped to ``s`` where that is shorter, converted to the
        compute dtype; zero padding is added after the prolog and stays zero). It runs on the
        plan's own copy - ``x`` is never modified. Not allowed with ``inplace=True``.
    epilog
        ``epilog(v, ...)``, applied elementwise to the result after the transform and its
        normalisation, in place, in one pass, in either direction.
    callback_inputs
        The callbacks' other parameters by name: a Python number, or an array broadcastable to
        the array the callback sees (the cropped operand for the prolog, the result for the
        epilog), copied at construction in the compute dtype. A parameter named ``k`` that is
        not in ``callback_inputs`` is the element's index along the last transformed axis
        (``axes[-1]``). Callbacks are traced once into nvmathpy's expression IR: Python
        operators, the NumPy ufuncs of :mod:`nvmathpy.kernels.trace` and ``np.where`` /
        ``np.clip``; an unsupported operation raises
        :class:`~nvmathpy.kernels.trace.UnsupportedOperationError` naming it, and on complex
        data ordering comparisons, ``maximum``/``minimum`` and casts are rejected (comparing
        ``k`` is fine). Constants inside a callback must be real Python numbers: pass complex
        ones through ``callback_inputs``. Under CUDA execution the callbacks run inside cuFFT as
        LTO callbacks (compiled with NVRTC for the device, cached on disk; not with
        ``half_precision``).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal((4, 6)) + 0j
    >>> with FFT(x, axes=[1]) as f:
    ...     _ = f.plan()
    ...     y = f.execute()
    ...     back = f.execute(direction="inverse")
    >>> np.allclose(y, np.fft.fft(x, axis=1))
    True
    >>> r = FFT(np.ones(8, dtype=np.float32)).plan().execute()
    >>> r.dtype, r.shape
    (dtype('complex64'), (5,))

    A window before and a filter after the transform:

    >>> v = np.random.default_rng(1).standard_normal(8)
    >>> w, filt = np.hanning(8), np.linspace(1, 0, 5)
    >>> f = FFT(v, prolog=lambda v, w: v * w, epilog=lambda v, filt: v * filt,
    ...         callback_inputs={"w": w, "filt": filt})
    >>> np.allclose(f.plan().execute(), np.fft.rfft(w * v) * filt)
    True
    >>> g = FFT(v + 0j, epilog=lambda v, k: np.where(k < 4, v, 0)).plan()
    >>> np.allclose(g.execute(), np.where(np.arange(8) < 4, np.fft.fft(v), 0))
    True
    """

    def __init__(
        self,
        x: Any,
        /,
        *,
        axes: Any = None,
        s: Any = None,
        kind: str | None = None,
        norm: str | None = "backward",
        inplace: bool = False,
        execution: Any = None,
        options: Any = None,
        stream: Any = None,
        prolog: Callable[..., Any] | None = None,
        epilog: Callable[..., Any] | None = None,
        callback_inputs: dict[str, Any] | None = None,
    ):
        super().__init__()
        self._options = as_options(options, FFTOptions)
        operand = wrap(x, "x")
        # host operands may run on CUDA: the engine copies them over and the result back
        host_to_cuda = operand.device == "cpu" and isinstance(as_execution(execution), ExecutionCUDA)
        space = resolve_execution(execution, "cuda" if host_to_cuda else operand.device, operand.device_id)
        layout = describe(operand.shape, operand.dtype, axes=axes, s=s, kind=kind, norm=norm)
        self._inplace = bool(inplace)
        if self._inplace:
            self._check_inplace(operand, layout)
            if prolog is not None:
                raise InvalidOptionError("prolog is not allowed with inplace=True (the prolog runs on a plan-owned copy)")
        cuda = isinstance(space, ExecutionCUDA)
        named = check_inputs_used(callback_inputs, prolog, epilog)
        if cuda:  # callback inputs may live on the device: traced and converted on the host
            named = {name: _host_input(value) for name, value in named.items()}
        region = tuple(min(n, m) for n, m in zip(operand.shape, layout.in_shape))
        self._prolog = make_callback(prolog, "prolog", named, region, layout.in_dtype, layout.axes[-1])
        self._epilog = make_callback(epilog, "epilog", named, layout.out_shape, layout.out_dtype, layout.axes[-1])
        if self._options.half_precision and not cuda:
            raise InvalidOptionError(
                "FFTOptions(half_precision=True) needs CUDA execution (CuPy or torch CUDA operands)")
        if self._options.half_precision and (prolog is not None or epilog is not None):
            raise InvalidOptionError(
                "FFTOptions(half_precision=True) cannot run prolog/epilog callbacks: cuFFT's LTO callbacks take "
                "single or double precision; drop half_precision or the callbacks")
        callbacks = {}  # the CUDA engine runs the callbacks inside cuFFT: (IR, inputs in the logical layout)
        for role, callback, shape, dtype in (("prolog", self._prolog, region, layout.in_dtype),
                                             ("epilog", self._epilog, layout.out_shape, layout.out_dtype)):
            if cuda and callback is not None:
                used = [name for name, kind in inputs_of(callback.expr).items() if kind != "value"]
                callbacks[role] = (callback.expr, {p: _convert_input(p, named[p], shape, dtype, role) for p in used})
        self._engine = self._make_engine(space, operand, layout, stream, callbacks) if cuda else engine_for(
            space, self._options.engines, self._options.fftw_time_limit)
        self._layout = layout
        # the CUDA engine crops, pads and converts on the device itself, and runs the callbacks in cuFFT
        self._stage = None if cuda else make_stage(layout, operand.shape, operand.dtype, fused=self._prolog)
        if cuda:
            self._epilog = None
        extra = {role: str(cb.expr) for role, cb in (("prolog", self._prolog), ("epilog", self._epilog)) if cb}
        self._problem = fft_problem(layout, self._engine.budget, self._inplace, **extra,
                                    **(self._cuda_fields(operand) if cuda else {}))
        self._user = x
        self._operand = operand
        self._signature = {
            what: getattr(operand, what) for what in ("package", "device", "device_id", "shape", "dtype", "strides")
        }
        self._unwrap = unwrapper(operand)
        # Results nobody holds any more are written over instead of allocating afresh (see
        # _SPARE_RESULTS); two are kept so that ``y = plan.execute()`` in a loop finds one.
        keep = _SPARE_RESULTS and not self._inplace and math.prod(layout.out_shape) * layout.out_dtype.itemsize >= RECYCLED_BELOW
        self._spares: list[Any] = [None, None] if keep else []
        #: autotune's private copy of an ``inplace`` operand (exists only during autotune).
        self._scratch: np.ndarray | None = None

    def _make_engine(self, space: ExecutionCUDA, operand: Operand, layout: Any, stream: Any,
                     callbacks: dict[str, Any]) -> Any:
        """The cuFFT engine, after the checks only CUDA needs (half precision, dense in-place operands)."""
        from ._cuda_engine import CudaFFTEngine, check_half_precision

        host = operand.device == "cpu"
        if not host and space.device_id != operand.device_id:
            raise InvalidOperandError(
                f"execution asks for cuda:{space.device_id} but x lives on cuda:{operand.device_id}; "
                "pass execution=None (follow the operand) or move x"
            )
        if self._options.half_precision:
            check_half_precision(layout, self._inplace)
        if self._inplace and not host and operand.array.copy(order="K").strides != operand.strides:
            raise InvalidOptionError(
                f"inplace=True on CUDA needs an operand without gaps (a dense array in any axis order); "
                f"x has shape {operand.shape} and strides {operand.strides}"
            )
        return CudaFFTEngine(device_id=space.device_id, stream=stream, package="cupy" if host else operand.package,
                             host=host, callbacks=callbacks)

    def _cuda_fields(self, operand: Operand) -> dict[str, Any]:
        from ._cuda_engine import cuda_fields

        return cuda_fields(operand.array, self._options.half_precision, host=operand.device == "cpu")

    @staticmethod
    def _check_inplace(operand: Operand, layout: Any) -> None:
        if layout.kind != "c2c" or operand.dtype != layout.in_dtype or operand.shape != layout.in_shape:
            raise InvalidOptionError(
                "inplace=True needs a c2c transform of a complex64/complex128 operand without padding or "
                f"cropping; got kind={layout.kind!r}, dtype {operand.dtype}, shape {operand.shape} -> {layout.in_shape}"
            )
        if not getattr(operand.array.flags, "writeable", True):  # CuPy arrays are always writeable
            raise InvalidOperandError("inplace=True needs a writeable operand; x is read-only")

    @property
    def kind(self) -> str:
        """``"c2c"``, ``"r2c"`` or ``"c2r"``."""
        return self._layout.kind

    @property
    def axes(self) -> tuple[int, ...]:
        """The transform axes (non-negative, in the given order)."""
        return self._layout.axes

    @property
    def result_shape(self) -> tuple[int, ...]:
        """The shape of what ``execute()`` returns in the kind's own direction."""
        return self._layout.out_shape

    def _bind(self, prepared: Any) -> Callable[..., Any]:
        return self._closure(prepared, self._operand.array, self._user)

    def _timing_call(self, prepared: Any) -> Callable[[], Any]:
        """What autotune times: with ``inplace``, the in-place run on a private copy of ``x``
        (made once per :meth:`autotune`), so that timing never writes into the caller's array."""
        if not self._inplace:
            return self._bind(prepared)
        if self._scratch is None:
            array = self._operand.array
            self._scratch = np.copy(array, order="K") if self._operand.device == "cpu" else array.copy(order="K")
        return self._closure(prepared, self._scratch, self._scratch)

    def autotune(
        self, *, effort: str = "measure", repeats: int = 5, budget_seconds: float | None = None, force: bool = False
    ) -> dict[str, float]:
        """As :meth:`nvmathpy.plan.Plan.autotune` (which it runs: a candidate that cannot be
        prepared or run is logged and skipped); with ``inplace`` the timed runs transform a
        private copy of ``x``, which is left untouched."""
        try:
            return super().autotune(effort=effort, repeats=repeats, budget_seconds=budget_seconds, force=force)
        finally:
            self._scratch = None

    def _closure(self, prepared: Any, x: np.ndarray, user: Any) -> Callable[..., Any]:
        """The run closure over ``prepared`` transforming ``x`` (returned as ``user`` when inplace)."""
        stage, unwrap, epilog = self._stage, self._unwrap, self._epilog
        calls = {"forward": prepared.forward, "inverse": prepared.inverse}
        calls[None] = calls[self._layout.natural_direction]
        out = x if self._inplace else None
        spares = self._spares if prepared.writes_out else []
        getrefcount = sys.getrefcount

        def run(direction: str | None = None) -> Any:
            fn = calls.get(direction)
            if fn is None:
                raise InvalidOptionError(f"execute: direction={direction!r} is not allowed; allowed: {list(DIRECTIONS)}")
            target = out
            for spare in spares:
                if spare is not None and getrefcount(spare) == 3:  # the list, this loop, the call
                    target = spare
                    break
            result = fn(x if stage is None else stage(x), target)
            if epilog is not None:
                epilog(result)
            if out is not None:
                return user
            if spares and target is None:
                spares[1], spares[0] = spares[0], result
            return result if unwrap is None else unwrap(result)

        return run

    def execute(self, direction: str | None = None) -> Any:
        """Run the transform on the current operand and return the result.

        Parameters
        ----------
        direction
            ``"forward"`` (negative exponent) or ``"inverse"``; ``None`` runs the kind's own
            direction (inverse for c2r, forward otherwise). For r2c, ``"inverse"`` computes
            ``ihfft``; for c2r, ``"forward"`` computes ``hfft``.

        Returns
        -------
        array
            A new array of the operand's package (``x`` itself when ``inplace``).
        """
        return self._run(direction)

    def _swap_operand(self, operand: Operand, user: Any) -> None:
        """Bind an operand already known to match (the one-call functions' cache key checks it)."""
        if self._inplace and not getattr(operand.array.flags, "writeable", True):
            raise InvalidOperandError("inplace=True needs a writeable operand; x is read-only")
        self._operand, self._user = operand, user
        self._rebind()

    def _detach(self) -> None:
        """Drop the references to the caller's arrays (a cached plan must not keep them alive)."""
        if self._prepared is not None:
            self._operand = self._user = None
            self._run = _raise_detached
            self._spares[:] = [None] * len(self._spares)

    def free(self) -> None:
        """Release everything the plan holds, kept results included. Idempotent."""
        self._spares[:] = [None] * len(self._spares)
        super().free()
