"""The CPU matmul engine: BLAS through NumPy/SciPy, with the epilogue applied in one pass.

Candidates (``Candidate.params``):

- ``method``: ``"dot"`` (tiny plain products, batched ones included: the direct call of
  :mod:`.._tiny` - the compiled tiny kernel where it takes them, else NumPy's - nothing else),
  ``"matmul"`` (``numpy.matmul(out=)``, any batch/broadcast/1-D case; tiny products by the
  compiled tiny kernel, and a lone built-in ``bias``/``relu``/``relu_bias`` up to
  :data:`SMALL_FLOPS` by its ``bias_relu`` in one pass, see :attr:`_Kernel.bias_relu`),
  ``"gemm"`` (``?gemm`` of NumPy's own BLAS: ``alpha``, ``beta``, ``c`` and a leading bias
  addend of the epilogue are folded into BLAS, which accumulates onto the prefilled result),
  ``"split"`` (2-D only: worker threads each take a band of rows, run single-threaded BLAS on row panels and apply the epilogue to each panel while it
  is hot in cache),
  ``"fused"`` (2-D float32/float64 products with no epilogue or one of :data:`FUSED_EPILOGUES`,
  built in or written as a custom epilogue:
  the compiled GEMM of :mod:`nvmathpy.kernels.cpu_gemm`, which applies the epilogue to each
  tile before its only store).
- ``evaluator``: ``"ufunc"`` (in-place NumPy chain) or ``"numexpr"`` (one threaded pass);
  ``None`` when nothing is applied after the product.
- ``threads``: BLAS threads during the call (``None``: leave the library's setting); for
  ``"split"`` the number of worker threads (each running single-threaded BLAS), for
  ``"fused"`` the kernel's threads.
- ``panel``, ``chunk`` (``"split"`` only): rows per BLAS call, and rows per epilogue pass
  (small enough for the chunk and its scratch to stay in L2).

Only candidates that compute the same result are listed for a problem; the autotuner picks
among them by time.
"""

from __future__ import annotations

import os
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping

import numpy as np

from ....errors import MissingDependencyError
from ....execution import cpu_description
from ....plan import Candidate, Engine, Prepared, Problem
from ....kernels.cpu_eval import numexpr_supports
from ....kernels.cpu_gemm import fused_gemm, fused_gemm_available, others_running
from ....kernels.ir import Expr, input_
from ._cblas import gemm_call
from .._custom_epilogue import custom_program, needs_whole_result
from ._epilogue_c import c_available, c_supports, input_pattern
from ._epilogue_eval import compile_program, fold_addend, numexpr_available, prologue_steps
from ._program import Program
from ._threads import BLAS_THREADS, limit_threads, shared_pool
from .._layout import TINY_FLOPS, analyse_shapes
from .._tiny import BIAS_RELU_EPILOGUES, compiled_bias_relu, compiled_matmul, per_matrix_bound, tiny_product
from .._resolved import ResolvedEpilogue

__all__ = ["CpuMatmulEngine", "MatmulPrepared"]

#: Products below this size are offered a single-threaded BLAS candidate.
SMALL_FLOPS = 256**3
#: Rows per BLAS call of the "split" candidates.
SPLIT_PANELS = (256, 512, 128)
#: Bytes of one epilogue chunk (the chunk and a scratch buffer of its size stay in L2).
CHUNK_BYTES = 128 * 1024
#: Epilogues the fused GEMM applies to each tile before storing it (``None``: the bare product).
FUSED_EPILOGUES = (None, "bias", "relu", "relu_bias", "gelu", "gelu_bias")
#: Products with more multiply-adds than this are offered the fused GEMM. For float32
#: epilogues with every dimension >= 1024 it is the first choice: there a fused epilogue costs
#: less than the pass over the result it saves, and its bare product keeps up with OpenBLAS's;
#: elsewhere (float64, smaller float32 products) it is the second, for autotuning to time.
#:
#: For a moment after an OpenBLAS call OpenBLAS's worker still spins on a core, and the fused
#: GEMM's second thread, sharing it, makes the call much longer. So a call that starts more
#: than :data:`FUSED_GAP` after the plan's previous one first reads whether another thread of
#: the process is running (a small cost next to a product of this size), and if one is runs
#: NumPy's product and the compiled pass instead, which put that worker to use. Calls that follow
#: each other directly skip the check: a spinning worker then is most likely the one the
#: plan's own fallback woke, and falling back again would keep it spinning.
FUSED_FLOPS = 512**3
#: See :data:`FUSED_FLOPS` (seconds).
FUSED_GAP = 2e-3
_HALF = ("float16", "bfloat16")
_X = input_("x", "value")


def compute_dtype_of(dtype_name: str) -> np.dtype:
    """float16/bfloat16 compute (and accumulate) in float32; other dtypes in themselves."""
    return np.dtype(np.float32) if dtype_name in _HALF else np.dtype(dtype_name)


# -- prepared candidates -------------------------------------------------------------------------


class MatmulPrepared(Prepared):
    """A prepared CPU candidate: ``kernel(a, b, c, inputs, out)`` computes the product and
    epilogue on native NumPy operands and returns the result (or ``(result, aux)``)."""

    def __init__(self, candidate: Candidate, kernel: Callable[..., Any]):
        super().__init__(candidate)
        self.kernel = kernel

    def free(self) -> None:
        self.kernel = None
        super().free()


def _rows(arr: Any, lo: int, hi: int, m: int) -> Any:
    """Rows ``lo:hi`` of an operand broadcast against an ``(m, n)`` block (as is if it has none)."""
    if isinstance(arr, np.ndarray) and arr.ndim >= 2 and arr.shape[-2] == m and m > 1:
        return arr[..., lo:hi, :]
    return arr


class _Spec:
    """What a kernel needs: the problem key, the scalars (the key holds only their kinds) and
    the plan's resolved epilogue (the key holds only its key)."""

    def __init__(self, problem: Problem, alpha: Any, beta: Any, resolved: ResolvedEpilogue | None):
        self.resolved = resolved
        #: The custom epilogue's expression, or ``None``.
        self.custom: Expr | None = resolved.expr if resolved is not None else None
        self.shape = analyse_shapes(tuple(problem.get("a_shape")), tuple(problem.get("b_shape")))
        self.dtype_name = problem.get("dtype")
        self.compute = compute_dtype_of(self.dtype_name)
        self.half = self.dtype_name in _HALF
        self.a_layout, self.b_layout = problem.get("a_layout"), problem.get("b_layout")
        self.a_ndim, self.b_ndim = len(problem.get("a_shape")), len(problem.get("b_shape"))
        self.alpha, self.beta = alpha, beta
        self.has_c = problem.get("c_shape") is not None
        self.epilogue = resolved.definition if resolved is not None else None
        self.inputs = {name: np.dtype(dt) if dt not in _HALF else None for name, (_, dt) in
                       (problem.get("inputs") or [])}
        self.threads = problem.get("num_threads")
        m, n = self.shape.m, self.shape.n
        shapes = {name: shape for name, (shape, _) in (problem.get("inputs") or [])}
        if self.has_c:
            shapes["c"] = problem.get("c_shape")
        #: How each input broadcasts against the result (for compiled epilogues).
        self.patterns = {name: input_pattern(shape, m, n) for name, shape in shapes.items()}

    @property
    def flops(self) -> int:
        s = self.shape
        batch = int(np.prod(s.batch)) if s.batch else 1
        return batch * s.m * s.n * s.k

    @property
    def plain(self) -> bool:
        """Nothing but the product: no epilogue, alpha = 1, no c."""
        return self.epilogue is None and self.custom is None and self.alpha == 1 and not self.has_c

    @property
    def two_d(self) -> bool:
        return self.a_ndim == 2 and self.b_ndim == 2


class CpuMatmulEngine(Engine):
    """Matmul on the host through NumPy/SciPy BLAS.

    ``alpha`` and ``beta`` are the plan's scalars: the problem (the wisdom key) holds only
    their kinds, so one tuned winner serves every value. ``epilogue`` is the plan's
    :class:`~.._resolved.ResolvedEpilogue` (``None``: no epilogue); the problem holds only its key.
    """

    name = "cpu-blas"

    def __init__(self, alpha: Any = 1.0, beta: Any = None, epilogue: ResolvedEpilogue | None = None):
        self.alpha, self.beta, self.epilogue = alpha, beta, epilogue

    def device(self) -> dict[str, Any]:
        """The host description plus the numexpr version (it changes the evaluator ranking)."""
        try:
            import numexpr

            version = numexpr.__version__
        except ImportError:
            version = None
        return {**cpu_description(), "numexpr": version}

    def candidates(self, problem: Problem) -> list[Candidate]:
        spec = _Spec(problem, self.alpha, self.beta, self.epilogue)
        threads = spec.threads
        if spec.plain and not spec.half and threads is None and (spec.flops <= TINY_FLOPS or _batch_of_tiny(spec)):
            return [Candidate.of("dot", method="dot", evaluator=None, threads=None),
                    Candidate.of("matmul", method="matmul", evaluator=None, threads=None)]
        evaluators: list[str | None]
        if spec.plain and not spec.half:
            evaluators = [None]
        else:
            evaluators = ["ufunc"]
            if (numexpr_available() and spec.compute in (np.float32, np.float64) and not spec.half
                    and (spec.custom is None or numexpr_supports(spec.custom))):
                evaluators.append("numexpr")
            if _c_ok(spec):
                evaluators.append("c")
        gemm_ok = spec.two_d and not spec.half and spec.a_layout in ("C", "F") and spec.b_layout in ("C", "F")
        # gemm folds alpha, beta, c and a bias into BLAS (NumPy's own, through CBLAS)
        methods = ["matmul", "gemm"] if gemm_ok else ["matmul"]
        # the bias costs no pass of its own: gemm first - but not on tiny products, where the
        # ctypes call of CBLAS costs more than the pass it saves, nor where the tiny kernel's
        # bias_relu makes the whole epilogue one pass (bench_matmul.py --only small)
        if gemm_ok and _has_addend(spec) and spec.flops > TINY_FLOPS and not _one_pass_bias_relu(spec):
            methods.reverse()
        cores = threads or os.cpu_count() or 1
        chunk = max(4, CHUNK_BYTES // (max(1, spec.shape.n) * spec.compute.itemsize))
        big = spec.flops > SMALL_FLOPS
        whole = spec.custom is not None and needs_whole_result(spec.custom)  # row indices need whole results
        chunk_ok = spec.two_d and (not spec.plain or spec.half) and spec.shape.m >= 2 * chunk and not whole
        split_ok = spec.two_d and cores > 1 and spec.shape.m >= 256 and big and not whole
        out: list[Candidate] = []

        def add(method: str, evaluator: str | None, t: int | None, **extra: int) -> None:
            if method == "gemm" and spec.epilogue is None and spec.custom is None:
                evaluator = None  # alpha/beta/c alone need no evaluator after ?gemm
            if evaluator is None:
                extra.pop("chunk", None)
                extra.pop("workers", None)
            cand = Candidate.of(method, method=method, evaluator=evaluator, threads=t, **extra)
            if cand not in out:
                out.append(cand)

        # heuristic order: on large 2-D results the cache-blocked epilogue on every core first,
        # then whole-result passes, the other method, and the variants; the hot-panel split
        # (fast on an idle machine, fragile when other processes take a core) comes last
        if "c" in evaluators and big:  # one compiled pass (the result read and written once)
            add(_c_method(spec, methods), "c", threads)
        if chunk_ok and big and methods[0] == "matmul":
            add(methods[0], "ufunc", threads, chunk=chunk, workers=cores)
        for method in methods:
            for evaluator in evaluators:
                add(method, evaluator, threads)
        if "c" in evaluators and cores > 1 and spec.shape.m >= 2 * cores:  # compiled passes in row bands
            for method in methods:
                add(method, "c", threads, workers=cores)
        if chunk_ok:  # numexpr threads itself: it gets no worker threads of ours
            for method in methods:
                for evaluator in evaluators:
                    for workers in sorted({cores, 1}) if evaluator == "ufunc" else [1] if evaluator != "c" else []:
                        add(method, evaluator, threads, chunk=chunk, workers=workers)
        if threads is None and cores > 1 and not big:
            for method in methods:
                for evaluator in evaluators:
                    add(method, evaluator, 1)
        if split_ok and evaluators != [None]:  # hot panels pay off only with work after the product
            for evaluator in evaluators:
                if evaluator == "ufunc":
                    for panel in SPLIT_PANELS:
                        add("split", evaluator, cores, panel=panel, chunk=chunk)
        if _fused_ok(spec) and spec.flops > FUSED_FLOPS:
            large = min(spec.shape.m, spec.shape.n, spec.shape.k) >= 1024
            first = not spec.plain and spec.compute == np.float32 and large
            out.insert(0 if first else 1, Candidate.of("fused", method="fused", evaluator=None, threads=cores))
        return out

    def prepare(self, problem: Problem, candidate: Candidate, extra: Mapping[str, Any] | None = None) -> Prepared:
        spec = _Spec(problem, self.alpha, self.beta, self.epilogue)
        params = candidate.params
        method = params["method"]
        if method == "dot":
            return MatmulPrepared(candidate, _dot_kernel)
        if method == "fused":
            return MatmulPrepared(candidate, _FusedKernel(spec, params["threads"]))
        workers = params.get("workers", 1) if method != "split" else params["threads"]
        pool = shared_pool() if workers > 1 else None
        if method == "split":
            kernel = _SplitKernel(spec, params["evaluator"], params["panel"], params.get("chunk"), pool, workers)
        else:
            kernel = _Kernel(spec, method, params["evaluator"], params.get("chunk"), workers, pool)
        run: Callable[..., Any] = kernel
        if params["threads"] is not None and method != "split":
            run = limit_threads(params["threads"], kernel)
        return MatmulPrepared(candidate, run)


def _c_ok(spec: _Spec) -> bool:
    """Whether a compiled (C) epilogue pass is offered: 2-D real results computed in their own
    dtype, a C compiler at hand, and no operation the C emitter lacks."""
    if not (spec.two_d and not spec.half and spec.compute in (np.float32, np.float64)):
        return False
    steps = (("d", spec.custom),) if spec.custom is not None else spec.epilogue.steps if spec.epilogue else ()
    if not steps and spec.alpha == 1 and not spec.has_c:  # nothing elementwise to do
        return False
    return c_supports(steps) and c_available()


def _fused_epilogue(spec: _Spec) -> tuple[str | None, str | None] | None:
    """``(epilogue, bias input)`` as the fused GEMM computes this problem's epilogue (a custom
    one that is exactly a built-in form, :attr:`~.._resolved.ResolvedEpilogue.native`, included),
    or ``None`` when it cannot: another epilogue, or a bias that is not one value per column."""
    if spec.custom is not None:
        if spec.resolved.native is None:
            return None
        name, bias = spec.resolved.native.name, spec.resolved.native_bias
    else:
        name = spec.epilogue.name if spec.epilogue is not None else None
        bias = "bias" if name is not None and name.endswith("bias") else None
    if name not in FUSED_EPILOGUES or (bias is not None and spec.patterns.get(bias) != "col"):
        return None
    return name, bias


def _fused_ok(spec: _Spec) -> bool:
    """Whether the fused GEMM computes this problem: a 2-D C- or F-ordered float32/float64
    product with ``alpha = 1``, no ``c``, and an epilogue :func:`_fused_epilogue` takes."""
    return (spec.two_d and not spec.half and spec.compute in (np.float32, np.float64)
            and spec.alpha == 1 and not spec.has_c and spec.a_layout in ("C", "F") and spec.b_layout in ("C", "F")
            and _fused_epilogue(spec) is not None and fused_gemm_available(spec.compute))


def _has_addend(spec: _Spec) -> bool:
    """Whether the epilogue starts with an addend ``?gemm`` can take (see :func:`fold_addend`)."""
    if spec.custom is not None:
        return fold_addend((("d", spec.custom),))[0] is not None
    return spec.epilogue is not None and fold_addend(spec.epilogue.steps)[0] is not None


def _c_method(spec: _Spec, methods: list[str]) -> str:
    """The product method to run before one compiled pass: ``"matmul"`` where the pass has work
    of its own (an activation after the bias), so it adds the bias too, reading the result once,
    where ``"gemm"`` would first write the broadcast bias into it on one thread; otherwise the
    heuristic's first method (a lone bias folded into ``?gemm`` needs no pass at all).
    ``benchmarks/bench_matmul.py --only epilogues`` times both."""
    if "matmul" not in methods or spec.epilogue is None or spec.custom is not None:
        return methods[0]
    rest = tuple(step for step in fold_addend(spec.epilogue.steps)[1] if step != ("d", _X))
    return "matmul" if rest else methods[0]


def _batch_of_tiny(spec: _Spec) -> bool:
    """A batch of products each within the compiled tiny kernel's bound, where it is built: its
    one loop over the batch (:func:`.._tiny.batch_of_tiny`)."""
    s = spec.shape
    return (bool(s.batch) and spec.dtype_name in ("float32", "float64", "complex64", "complex128")
            and s.m * s.k * s.n <= per_matrix_bound(np.dtype(spec.dtype_name)) and compiled_matmul() is not None)


def _bias_relu_of(spec: _Spec) -> tuple[str | None, bool] | None:
    """``(bias input or None, relu)`` where the whole epilogue is a built-in ``bias``, ``relu`` or
    ``relu_bias`` (``alpha = 1``, no ``c``), else ``None``. Whether the bias itself is taken (one
    value per column, the result's dtype) the kernel says per call."""
    edef = spec.epilogue
    if edef is None or spec.custom is not None or spec.alpha != 1 or spec.has_c:
        return None
    return BIAS_RELU_EPILOGUES.get(edef.name)


def _one_pass_bias_relu(spec: _Spec) -> bool:
    """Whether ``numpy.matmul`` and the tiny kernel's ``bias_relu`` (built) compute this problem's
    whole epilogue in one pass (see :attr:`_Kernel.bias_relu`): a built-in ``bias``/``relu``/
    ``relu_bias`` up to ``SMALL_FLOPS``, its bias one value per column."""
    found = _bias_relu_of(spec) if spec.flops <= SMALL_FLOPS and not spec.half else None
    if found is None or compiled_bias_relu() is None:
        return False
    bias = found[0]
    return bias is None or spec.patterns.get(bias) == "col" or spec.shape.n == 1


def _dot_kernel(a: np.ndarray, b: np.ndarray, c: Any, inputs: Any, out: Any) -> Any:
    if out is not None:
        return np.matmul(a, b, out=out)
    result = tiny_product(a, b)
    return np.matmul(a, b, order="C") if result is None else result  # batches tiny_flops overestimates


class _Kernel:
    """``numpy.matmul`` or SciPy ``?gemm``, then the epilogue program: on the whole result, or
    (2-D results, ``chunk`` set) in row chunks small enough to stay in L2 while every step
    runs over them, spread over ``workers`` threads (NumPy releases the GIL)."""

    def __init__(self, spec: _Spec, method: str, evaluator: str | None, chunk: int | None = None,
                 workers: int = 1, pool: ThreadPoolExecutor | None = None):
        self.spec = spec
        self.method = method
        self.result_shape = spec.shape.result
        self.result_dtype = np.dtype(spec.dtype_name) if not spec.half else _half_dtype(spec.dtype_name)
        self.copy_a = spec.a_layout == "strided" or spec.half
        self.copy_b = spec.b_layout == "strided" or spec.half
        edef = spec.epilogue
        steps = edef.steps if edef is not None else ()
        custom = spec.custom
        self.addend: str | None = None
        if method == "gemm":  # ?gemm adds alpha, beta c, and an addend of the epilogue's first step
            if custom is not None:
                self.addend, folded = fold_addend((("d", custom),))
                custom = folded[0][1]
            else:
                self.addend, steps = fold_addend(steps)
            steps = tuple(step for step in steps if step != ("d", _X))
        else:
            steps = prologue_steps(spec.alpha, spec.beta, spec.has_c) + steps
        self.aux = edef.aux if edef is not None else ()
        self.reductions = edef.reductions if edef is not None else ()
        self.program: Program | None = None
        self.chunk, self.workers, self.pool = chunk, workers, pool
        self.scratch: list[list[np.ndarray]] = []
        self.work = np.empty(self.result_shape, np.float32) if spec.half else None
        input_dtypes = {n: (dt if dt is not None else spec.compute) for n, dt in spec.inputs.items()}
        input_dtypes["c"] = spec.compute
        if evaluator == "c" and (steps or (custom is not None and custom != _X)):
            try:
                self.program = compile_program(
                    tuple(steps) + ((("d", custom),) if custom is not None and custom != _X else ()),
                    outputs=self.aux, compute_dtype=spec.compute, result_is_work=True, input_dtypes=input_dtypes,
                    backend="c", input_patterns=spec.patterns, workers=workers, pool=pool)
            except MissingDependencyError as exc:  # compiled kernels are a speed-up, never a requirement
                warnings.warn(f"nvmathpy: the compiled epilogue is not available ({exc}); using NumPy's",
                              RuntimeWarning, stacklevel=2)
                evaluator = "ufunc"
        if self.program is not None:  # compiled above
            pass
        elif custom is not None and custom != _X:
            self.program = custom_program(custom, steps, compute_dtype=spec.compute, input_dtypes=input_dtypes,
                                          backend=evaluator or "ufunc")
        elif steps or spec.half:
            self.program = compile_program(
                steps, outputs=self.aux, compute_dtype=spec.compute, result_is_work=not spec.half,
                input_dtypes=input_dtypes, backend=evaluator or "ufunc",
            )
        if self.program is not None:
            block = self.result_shape if chunk is None else (chunk, spec.shape.n)
            self.scratch = [self.program.scratch(block, spec.compute) for _ in range(workers)]
        if method == "gemm":
            self._gemm = gemm_call(spec.compute, spec.alpha, spec.beta, spec.has_c, self.addend is not None,
                                   spec.a_layout, spec.b_layout)
        #: Whether a call without ``out`` tries the compiled tiny kernel for the product (it
        #: allocates the result itself; ``numpy.matmul`` where it does not take the operands).
        self.tiny = (method == "matmul" and not (spec.half or self.copy_a or self.copy_b)
                     and (spec.flops <= TINY_FLOPS or _batch_of_tiny(spec)))
        #: ``(bias input or None, relu)`` where the epilogue is ``bias``, ``relu`` or ``relu_bias``
        #: alone on a product up to SMALL_FLOPS by ``numpy.matmul`` (or the tiny kernel): the tiny
        #: kernel's ``bias_relu`` applies it in place, in one pass (on one thread, as NumPy's ufuncs).
        self.bias_relu = (_bias_relu_of(spec) if method == "matmul" and self.work is None and spec.flops <= SMALL_FLOPS
                          else None)

    def _bias_relu_done(self, result: np.ndarray, inputs: Mapping[str, Any]) -> bool:
        """Whether the tiny kernel's ``bias_relu`` applied the whole epilogue to ``result`` (in
        place); false where this plan's epilogue is not one it applies, the kernel is not built,
        or it does not take the bias (not one contiguous value per column of the result's dtype)."""
        if self.bias_relu is None or (bias_relu := compiled_bias_relu()) is None:
            return False
        bias, relu = self.bias_relu
        return bias_relu(result, None if bias is None else inputs[bias], relu) is not NotImplemented

    def begin(self, a: np.ndarray, b: np.ndarray, c: Any, inputs: Mapping[str, Any], out: Any,
              product: np.ndarray | None = None) -> tuple:
        """Operands ready for BLAS (copied only if they must be), and the evaluator's
        environment: the result ``d`` (``product`` where the product is computed already), the
        working product ``x``, aux outputs and inputs."""
        spec = self.spec
        if self.copy_a:
            a = a.astype(spec.compute, order="C") if spec.half else np.ascontiguousarray(a)
        if self.copy_b:
            b = b.astype(spec.compute, order="C") if spec.half else np.ascontiguousarray(b)
        result = product if product is not None else np.empty(self.result_shape, self.result_dtype) \
            if out is None else out
        aux = {name: np.empty(self.result_shape, np.bool_ if name == "relu_aux" else self.result_dtype)
               for name in self.aux}
        env = {**inputs, **aux, "x": result if self.work is None else self.work, "d": result}
        if c is not None:
            env["c"] = c
        return a, b, env, aux

    def epilogue_rows(self, env: dict, lo: int, hi: int, scratch: list[np.ndarray]) -> None:
        """Run the program over rows ``lo:hi`` of a 2-D result, ``chunk`` rows at a time."""
        m, chunk, program = self.spec.shape.m, self.chunk, self.program
        for r in range(lo, hi, chunk):
            s = min(hi, r + chunk)
            program.run({k: _rows(v, r, s, m) for k, v in env.items()}, [x[: s - r] for x in scratch])

    def finish(self, env: dict, aux: dict, a: np.ndarray, b: np.ndarray) -> Any:
        """The result, or ``(result, aux)`` with the reductions added."""
        for name, what in self.reductions:
            aux[name] = _reduce(what, env["d"], a, b, self.spec, self.result_dtype)
        return (env["d"], aux) if aux else env["d"]

    def __call__(self, a: np.ndarray, b: np.ndarray, c: Any, inputs: Mapping[str, Any], out: Any) -> Any:
        product = None
        if self.tiny and out is None and (kernel := compiled_matmul()) is not None:
            product = kernel(a, b)
            if product is NotImplemented:
                product = None
            elif self._bias_relu_done(product, inputs):
                return product
        a, b, env, aux = self.begin(a, b, c, inputs, out, product)
        if product is not None:
            pass
        elif self.method == "gemm":
            self._gemm(a, b, c, env.get(self.addend), env["x"])
        else:
            np.matmul(a, b, out=env["x"])
            if self._bias_relu_done(env["x"], inputs):
                return env["x"]
        if self.program is None:
            pass
        elif self.chunk is None:
            self.program.run(env, self.scratch[0])
        elif self.pool is None:
            self.epilogue_rows(env, 0, self.spec.shape.m, self.scratch[0])
        else:
            _in_bands(self.pool, self.spec.shape.m, self.workers,
                      lambda lo, hi, i: self.epilogue_rows(env, lo, hi, self.scratch[i]))
        return self.finish(env, aux, a, b)


def _in_bands(pool: ThreadPoolExecutor, m: int, workers: int, work: Callable[[int, int, int], None]) -> None:
    """Run ``work(lo, hi, index)`` on ``workers`` bands of rows ``0:m`` in ``pool``."""
    band = -(-m // workers)
    futures = [pool.submit(work, lo, min(m, lo + band), i) for i, lo in enumerate(range(0, m, band))]
    for f in futures:
        f.result()


def _half_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(np.float16)


def _reduce(what: str, result: np.ndarray, a: np.ndarray, b: np.ndarray, spec: _Spec, dtype: np.dtype) -> np.ndarray:
    """The bias-gradient reductions of :data:`~nvmathpy.linalg.epilogues.REDUCTIONS`."""
    s = spec.shape
    compute = spec.compute
    if what == "result_rows":
        summed, shape = result.reshape(s.batch + (s.m, s.n)).sum(axis=-2, dtype=compute), s.batch + (s.n,)
    elif what == "a_k":
        a2 = a.reshape(a.shape[:-1] + (1, a.shape[-1])) if a.ndim == 1 else a
        summed, shape = a2.sum(axis=-1, dtype=compute), s.batch + (s.m,)
    else:
        b2 = b.reshape(b.shape + (1,)) if b.ndim == 1 else b
        summed, shape = b2.sum(axis=-2, dtype=compute), s.batch + (s.n,)
    if summed.shape == shape and summed.flags.c_contiguous:  # a fresh array of its own
        return summed.astype(dtype, copy=False)
    return np.broadcast_to(summed, shape).astype(dtype, order="C")  # a copy: not the read-only view


class _FusedKernel:
    """The compiled GEMM with the bias and activation applied to each tile (see :func:`_fused_ok`),
    or NumPy's product and the compiled pass when another thread of the process is running at the
    start of a call that does not directly follow the previous one (see :data:`FUSED_FLOPS`)."""

    def __init__(self, spec: _Spec, threads: int):
        name, self.bias = _fused_epilogue(spec) or (None, None)
        self.gemm = fused_gemm(spec.compute)
        self.dtype = spec.compute
        self.shape = spec.shape.result
        self.activation = {"relu": "relu", "relu_bias": "relu", "gelu": "gelu", "gelu_bias": "gelu"}.get(name)
        self.threads = threads
        self.workspace = self.gemm.workspace(spec.shape.n, spec.shape.k)  # the plan's: kept over calls
        fallback = _Kernel(spec, "matmul", "c")  # the bias in the pass: no prefill (see _c_method)
        self.fallback = fallback if spec.threads is None else limit_threads(spec.threads, fallback)
        self.last_end = -1.0
        #: The clock the fall-back rule reads (seconds); the plan's own, so tests can drive it.
        self.clock = time.perf_counter

    def __call__(self, a: np.ndarray, b: np.ndarray, c: Any, inputs: Mapping[str, Any], out: Any) -> Any:
        start = self.clock()
        if self.threads > 1 and start - self.last_end > FUSED_GAP and others_running():
            result = self.fallback(a, b, c, inputs, out)
        else:
            result = np.empty(self.shape, self.dtype) if out is None else out
            bias = None if self.bias is None else np.ascontiguousarray(inputs[self.bias], self.dtype).reshape(-1)
            self.gemm(a, b, result, bias, self.activation, self.threads, self.workspace)
        self.last_end = self.clock()
        return result


class _SplitKernel:
    """2-D products split into row bands, one per worker thread; each worker runs
    single-threaded BLAS on row panels and applies the epilogue to each panel while hot."""

    def __init__(self, spec: _Spec, evaluator: str | None, panel: int, chunk: int | None,
                 pool: ThreadPoolExecutor | None, workers: int):
        self.inner = _Kernel(spec, "matmul", evaluator, chunk=chunk, workers=workers)
        self.m = spec.shape.m
        self.panel = panel
        self.pool = pool
        self.workers = workers
        BLAS_THREADS.prepare()

    def __call__(self, a: np.ndarray, b: np.ndarray, c: Any, inputs: Mapping[str, Any], out: Any) -> Any:
        inner = self.inner
        a, b, env, aux = inner.begin(a, b, c, inputs, out)
        work = env["x"]

        def band(lo: int, hi: int, index: int) -> None:
            for p in range(lo, hi, self.panel):
                q = min(hi, p + self.panel)
                np.matmul(a[p:q], b, out=work[p:q])
                if inner.program is not None:
                    inner.epilogue_rows(env, p, q, inner.scratch[index])

        before = BLAS_THREADS.limit(1)
        try:
            _in_bands(self.pool, self.m, self.workers, band)
        finally:
            BLAS_THREADS.restore(before)
        return inner.finish(env, aux, a, b)
