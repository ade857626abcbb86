"""A register-resident batched LU solver for very small systems: one thread per system.

:func:`tiny_register_solve_kernel` generates ``X = A^{-1} B`` for a stack of ``n x n`` systems
with ``nrhs`` right-hand sides each, where the whole system (``n * (n + nrhs)`` values) fits in
one thread's registers (:func:`register_solve_fits`). Each warp owns 32 consecutive systems:

1. the warp copies its systems' ``A`` and ``B`` from global memory into its own slice of shared
   memory, lane ``l`` taking elements ``l, l + 32, ...`` of the warp's span, so a contiguous
   stack (C order, or F order through ``trans_a``) is read with coalesced loads;
2. each lane moves its own system into registers (the slices are padded to an odd number of
   elements per system, so these reads are free of bank conflicts), and factors it with partial
   pivoting while applying the row interchanges and ``L^{-1}`` to its right-hand sides, then
   back-substitutes with ``U``: every index is a compile-time constant (the pivot row is chosen
   by selects), so nothing leaves the registers between factor and solve;
3. the solutions go back through the same shared memory and out with coalesced stores.

``info`` (int32 per system) is written as :func:`.tiny_batched.tiny_solve_kernel` writes it: 0,
or the 1-based column of the first zero pivot. A system that fails also raises the 64-bit
``flag`` with ``atomicMax`` to ``(epoch << 32) | (2^32 - 1 - index)``: after a launch with a given
``epoch`` the flag's high word equals that epoch exactly when some system failed, and its low
word then names the first failing system, so one 8-byte read answers "did anything fail" and the
flag never needs clearing between launches (the caller increases ``epoch``).
"""

from __future__ import annotations

from ..errors import InvalidOptionError
from .emit_cuda import PRELUDE
from .launch import KernelParam
from .tiny_batched import TinyKernel

__all__ = ["REGISTER_MAX_N", "REGISTER_MAX_RHS", "REGISTER_WORDS", "register_solve_fits", "tiny_register_solve_kernel"]

#: The 32-bit registers a thread may spend on its system's values (``A`` and ``B``): ptxas needs
#: room beside them for addresses and the interchanges' temporaries within its 255 registers.
REGISTER_WORDS = 144
#: The largest ``n`` and right-hand-side count: beyond them the interchanges' select chains crowd
#: ptxas's registers even within :data:`REGISTER_WORDS` (the NVRTC tests check the edges).
REGISTER_MAX_N, REGISTER_MAX_RHS = 8, 4
_WARP = 32
_MAX_WARPS = 4
_MAX_SMEM = 40 * 1024
_SM_SMEM, _SM_REGISTERS = 227 * 1024, 65536  # sm_90's shared memory and registers per SM


def _min_blocks(threads: int, smem: int, words: int, nrhs: int) -> int:
    """The blocks per SM to ask ptxas for (``__launch_bounds__``' second argument).

    One right-hand side (the common batched solve): as many blocks as shared memory lets reside,
    while each thread keeps 48 registers beyond its system's values for addresses and
    temporaries. Several: 1, so ptxas may use all 255 registers (their interchanges and
    substitutions keep more values alive than a fixed margin covers; the NVRTC tests compile
    every variant and check that none spills)."""
    if nrhs > 1:
        return 1
    need = min(255, words + 48)
    blocks = min(32, _SM_SMEM // smem)
    while blocks > 1 and _SM_REGISTERS // (blocks * threads) < need:
        blocks -= 1
    return max(1, blocks)


def _words(dtype: str) -> int:
    if dtype not in ("float32", "float64"):
        raise InvalidOptionError(f"the register tiny solver takes dtype float32 or float64, got {dtype!r}")
    return 2 if dtype == "float64" else 1


def register_solve_fits(dtype: str, n: int, nrhs: int) -> bool:
    """Whether one thread can hold an ``n x n`` system with ``nrhs`` right-hand sides in registers.

    Examples
    --------
    >>> register_solve_fits("float64", 8, 1), register_solve_fits("float64", 9, 1)
    (True, False)
    >>> register_solve_fits("float32", 8, 4), register_solve_fits("float32", 8, 5)
    (True, False)
    """
    return (1 <= n <= REGISTER_MAX_N and 1 <= nrhs <= REGISTER_MAX_RHS
            and n * (n + nrhs) * _words(dtype) <= REGISTER_WORDS)


def _odd(count: int) -> int:
    """``count`` rounded up to an odd number: the per-system stride of the shared slices."""
    return count if count % 2 else count + 1


def _lu_lines(n: int, nrhs: int) -> list[str]:
    """Fully unrolled LU with partial pivoting of ``m`` applied to ``y``, then ``U`` back-substitution."""
    lines: list[str] = []
    for kc in range(n):
        if kc + 1 < n:
            lines.append(f"{{  // column {kc}: the first largest magnitude at or below the diagonal is the pivot")
            lines.append(f"  int pr = {kc}; T best = fabs(m[{kc}][{kc}]);")
        else:
            lines.append(f"{{  // column {kc}, the last: its diagonal is the pivot")
        for i in range(kc + 1, n):
            lines.append(f"  if (fabs(m[{i}][{kc}]) > best) {{ best = fabs(m[{i}][{kc}]); pr = {i}; }}")
        # the interchange, column by column: the pivot row's entry is picked by a chain of selects
        # and the old row kc's entry dropped into row pr (compile-time indices only)
        for cell in [f"m[{{r}}][{j}]" for j in range(kc, n)] + [f"y[{{r}}][{c}]" for c in range(nrhs)]:
            if kc + 1 == n:
                break
            chain = " ".join(f"if (pr == {i}) {{ v = {cell.format(r=i)}; {cell.format(r=i)} = {cell.format(r=kc)}; }}"
                             for i in range(kc + 1, n))
            lines.append(f"  {{ T v = {cell.format(r=kc)}; {chain} {cell.format(r=kc)} = v; }}")
        lines.append(f"  const T pivot = m[{kc}][{kc}];")
        lines.append(f"  if (pivot == (T)0) {{ if (info == 0) info = {kc + 1}; }}")
        if kc + 1 < n:
            lines.append("  else {")
            lines.append("    const T inv = (T)1 / pivot;")
            for i in range(kc + 1, n):
                updates = [f"m[{i}][{j}] = fma(-l, m[{kc}][{j}], m[{i}][{j}]);" for j in range(kc + 1, n)]
                updates += [f"y[{i}][{c}] = fma(-l, y[{kc}][{c}], y[{i}][{c}]);" for c in range(nrhs)]
                lines.append(f"    {{ const T l = m[{i}][{kc}] * inv; {' '.join(updates)} }}")
            lines.append("  }")
        lines.append("}")
    for i in range(n - 1, -1, -1):
        for c in range(nrhs):
            terms = "".join(f" s = fma(-m[{i}][{j}], y[{j}][{c}], s);" for j in range(i + 1, n))
            lines.append(f"{{ T s = y[{i}][{c}];{terms} y[{i}][{c}] = s / m[{i}][{i}]; }}")
    return lines


def tiny_register_solve_kernel(dtype: str, n: int, nrhs: int, *, trans_a: bool = False,
                               name: str = "nvm_tiny_reg_solve") -> TinyKernel:
    """Generate the register-resident batched LU solver of ``A X = B`` (see the module docstring).

    Parameters
    ----------
    dtype : {"float32", "float64"}
    n, nrhs : int
        Compile-time sizes; :func:`register_solve_fits` must hold.
    trans_a : bool
        ``A`` is stored transposed: element ``(r, j)`` of system ``p`` is at
        ``a[p * stride_a + j * lda + r]``.
    name : str
        The ``extern "C"`` entry point.

    Returns
    -------
    TinyKernel
        Parameters ``a, lda, stride_a, b, ldb, stride_b, x, ldx, stride_x, info, flag, epoch,
        batch``; ``x`` and ``b`` are row-major (``(r, j)`` at ``r * ld + j``), ``flag`` one
        ``unsigned long long``.

    Examples
    --------
    >>> kern = tiny_register_solve_kernel("float64", 8, 1)
    >>> kern.threads, kern.per_block, [p.key[0] for p in kern.params][-4:]
    (64, 64, ['info', 'flag', 'epoch', 'batch'])
    """
    words = _words(dtype)
    if not register_solve_fits(dtype, n, nrhs):
        raise InvalidOptionError(f"a {n}x{n} system with {nrhs} right-hand sides does not fit in one thread's "
                                 f"registers ({REGISTER_WORDS} words) in {dtype}")
    ctype = "double" if dtype == "float64" else "float"
    nn, nk = n * n, n * nrhs
    sa, sb = _odd(nn), _odd(nk)
    per_warp = _WARP * (sa + sb) * 4 * words
    warps = max(1, min(_MAX_WARPS, _MAX_SMEM // per_warp))
    threads = warps * _WARP
    a_global = "c * lda + r" if trans_a else "r * lda + c"
    a_span = f"const int r = i % {n}, c = i / {n};" if trans_a else f"const int r = i / {n}, c = i % {n};"
    a_own = "c * {n} + r" if trans_a else "r * {n} + c"
    params = tuple(KernelParam((key, None), kind) for key, kind in (
        ("a", "ptr"), ("lda", "i64"), ("stride_a", "i64"), ("b", "ptr"), ("ldb", "i64"), ("stride_b", "i64"),
        ("x", "ptr"), ("ldx", "i64"), ("stride_x", "i64"), ("info", "ptr"), ("flag", "ptr"), ("epoch", "i64"),
        ("batch", "i64")))
    body = [
        f"typedef {ctype} T;",
        f"__shared__ T sa[{warps}][{_WARP * sa}];",
        f"__shared__ T sb[{warps}][{_WARP * sb}];",
        f"const int warp = threadIdx.x / {_WARP}, lane = threadIdx.x % {_WARP};",
        f"const long long p0 = ((long long)blockIdx.x * {warps} + warp) * {_WARP};",
        "T* const A = sa[warp];",
        "T* const B = sb[warp];",
        "#pragma unroll",
        f"for (int t = 0; t < {nn}; ++t) {{  // coalesced: lane l takes elements l, l + 32, ... of the warp's span",
        f"  const int e = t * {_WARP} + lane, s = e / {nn}, i = e % {nn};",
        f"  {a_span}",
        f"  if (p0 + s < batch) A[s * {sa} + i] = a[(p0 + s) * stride_a + {a_global}];",
        "}",
        "#pragma unroll",
        f"for (int t = 0; t < {nk}; ++t) {{",
        f"  const int e = t * {_WARP} + lane, s = e / {nk}, i = e % {nk}, r = i / {nrhs}, c = i % {nrhs};",
        f"  if (p0 + s < batch) B[s * {sb} + i] = b[(p0 + s) * stride_b + r * ldb + c];",
        "}",
        "__syncthreads();",
        f"T m[{n}][{n}], y[{n}][{nrhs}];",
        "#pragma unroll",
        f"for (int r = 0; r < {n}; ++r) {{",
        "#pragma unroll",
        f"  for (int c = 0; c < {n}; ++c) m[r][c] = A[lane * {sa} + {a_own.format(n=n)}];",
        "#pragma unroll",
        f"  for (int c = 0; c < {nrhs}; ++c) y[r][c] = B[lane * {sb} + r * {nrhs} + c];",
        "}",
        "int info = 0;",
        *_lu_lines(n, nrhs),
        "#pragma unroll",
        f"for (int r = 0; r < {n}; ++r)",
        "#pragma unroll",
        f"  for (int c = 0; c < {nrhs}; ++c) B[lane * {sb} + r * {nrhs} + c] = y[r][c];",
        "__syncthreads();",
        "#pragma unroll",
        f"for (int t = 0; t < {nk}; ++t) {{",
        f"  const int e = t * {_WARP} + lane, s = e / {nk}, i = e % {nk}, r = i / {nrhs}, c = i % {nrhs};",
        f"  if (p0 + s < batch) x[(p0 + s) * stride_x + r * ldx + c] = B[s * {sb} + i];",
        "}",
        "const long long p = p0 + lane;",
        "if (p < batch) {",
        "  info_out[p] = info;",
        "  if (info != 0)",
        "    atomicMax(flag, ((unsigned long long)(unsigned)epoch << 32) | (0xffffffffull - (unsigned long long)p));",
        "}",
    ]
    signature = (f"const T_* __restrict__ a, long long lda, long long stride_a, const T_* __restrict__ b, long long ldb, "
                 f"long long stride_b, T_* __restrict__ x, long long ldx, long long stride_x, int* __restrict__ info_out, "
                 f"unsigned long long* __restrict__ flag, long long epoch, long long batch").replace("T_", ctype)
    source = "\n".join([
        PRELUDE,
        f'extern "C" __global__ void __launch_bounds__({threads}, {_min_blocks(threads, warps * per_warp, n * (n + nrhs) * words, nrhs)}) '
        f'{name}({signature}) {{',
        *("  " + line for line in body),
        "}",
        "",
    ])
    return TinyKernel(name, source, params, threads, threads, warps * per_warp)
