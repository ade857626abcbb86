"""Kernels for large batches of tiny problems (n <= 32): GEMM, LU solve and Cholesky solve.

Besides the one-shot solvers, :func:`tiny_factor_kernel` factors a batch in place (LU with
LAPACK's pivots, or Cholesky) and :func:`tiny_factored_solve_kernel` solves with such factors
(``op(A) X = B`` in place in ``X``), for plans that keep their factors.

Several problems share one thread block; each problem gets ``n`` threads (one per row, or per
row of ``D`` for the GEMM) and its own slice of shared memory, and the sizes are compile-time
constants, so every loop is short and fixed. Matrices are batched row-major with run-time
leading dimensions and batch strides; the inputs are never written.

The GEMM can apply the built-in epilogues ``bias``, ``relu``, ``gelu`` (tanh approximation),
``relu_bias`` and ``gelu_bias`` before its store; the bias is read through ``(batch, row,
column)`` element strides, 0 where it broadcasts.

The solvers take ``A`` ``(batch, n, n)`` (or its transpose in memory, ``trans_a``) and ``B``
``(batch, n, nrhs)`` and write ``X``
``(batch, n, nrhs)`` and ``info`` (int32 per problem): 0, or the 1-based index of the first zero
pivot (LU with partial pivoting) or of the first diagonal that is not positive (Cholesky, which
reads the lower triangle of ``A``), so a plan can name the failing batch element. After a
nonzero ``info`` the problem's ``X`` is not meaningful.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidOptionError
from .emit_cuda import PRELUDE, STORAGE_TYPES
from .launch import KernelParam

__all__ = ["TinyKernel", "tiny_gemm_kernel", "tiny_solve_kernel", "tiny_factor_kernel", "tiny_factored_solve_kernel",
           "GEMM_EPILOGUES", "MAX_N", "MAX_RHS"]

MAX_N = 32
MAX_RHS = 64
#: The built-in epilogues the tiny GEMM applies before its store.
GEMM_EPILOGUES = ("bias", "relu", "gelu", "relu_bias", "gelu_bias")
_TARGET_THREADS = 128
_MAX_SMEM = 40 * 1024


@dataclass(frozen=True)
class TinyKernel:
    """A generated tiny-batched kernel.

    Attributes
    ----------
    name, source : str
        The ``extern "C"`` entry point and the complete CUDA C source.
    params : tuple[KernelParam, ...]
        In signature order.
    per_block : int
        Problems per block.
    threads : int
        Threads per block (1-D).
    smem_bytes : int
        Static shared memory per block.
    """

    name: str
    source: str
    params: tuple[KernelParam, ...]
    per_block: int
    threads: int
    smem_bytes: int

    def launch_dims(self, batch: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """``(grid, block)`` for ``batch`` problems."""
        return (max(1, -(-batch // self.per_block)), 1, 1), (self.threads, 1, 1)


def _check_dtype(dtype: str) -> tuple[str, str]:
    if dtype not in ("float32", "float64"):
        raise InvalidOptionError(f"tiny batched kernels take dtype float32 or float64, got {dtype!r}")
    return STORAGE_TYPES[dtype][0], "f64" if dtype == "float64" else "f32"


def _check_size(what: str, value: int, limit: int) -> None:
    if not 1 <= value <= limit:
        raise InvalidOptionError(f"{what} must be between 1 and {limit} for tiny batched kernels, got {value}")


def _per_block(rows: int, smem_per_problem: int) -> int:
    return max(1, min(_TARGET_THREADS // rows, _MAX_SMEM // smem_per_problem))


def _operand(name: str, ctype: str, const: bool = True) -> tuple[list[str], list[KernelParam]]:
    decl = [f"{'const ' if const else ''}{ctype}* __restrict__ {name}", f"long long ld{name}",
            f"long long stride_{name}"]
    return decl, [KernelParam((name, None), "ptr"), KernelParam((f"ld{name}", None), "i64"),
                  KernelParam((f"stride_{name}", None), "i64")]


def _kernel(name: str, parts: list[tuple[list[str], list[KernelParam]]], body: list[str], per_block: int,
            rows: int, smem: int) -> TinyKernel:
    signature = [d for decl, _ in parts for d in decl]
    params = tuple(p for _, ps in parts for p in ps)
    threads = per_block * rows
    source = "\n".join([
        PRELUDE,
        f'extern "C" __global__ void __launch_bounds__({threads}, 1) {name}(',
        "    " + ",\n    ".join(signature) + ") {",
        f"  const int slot = threadIdx.x / {rows}, r = threadIdx.x % {rows};",
        f"  const long long p = (long long)blockIdx.x * {per_block} + slot;",
        "  const bool active = p < batch;",
        *("  " + line for line in body),
        "}",
        "",
    ])
    return TinyKernel(name, source, params, per_block, threads, smem)


def tiny_gemm_kernel(dtype: str, m: int, n: int, k: int, *, trans_a: bool = False, trans_b: bool = False,
                     with_c: bool = False, epilogue: str | None = None, name: str = "nvm_tiny_gemm") -> TinyKernel:
    """Generate batched ``D = epilogue(alpha * op(A) @ op(B) [+ beta * C])`` for fixed tiny
    ``m, n, k <= 32``.

    Each problem has ``m`` threads; thread ``r`` computes row ``r`` of ``D`` from the problem's
    ``A`` and ``B`` staged in shared memory. ``trans_a``/``trans_b`` mean ``A`` is stored
    ``(batch, k, m)`` and ``B`` ``(batch, n, k)``. ``epilogue`` is ``None`` or one of
    :data:`GEMM_EPILOGUES`; the bias ones add parameters ``bias, bias_batch_stride,
    bias_row_stride, bias_col_stride`` after ``alpha``/``beta``.

    Examples
    --------
    >>> kern = tiny_gemm_kernel("float64", 8, 8, 8)
    >>> kern.per_block, kern.threads, kern.launch_dims(100)[0]
    (16, 128, (7, 1, 1))
    """
    ctype, scalar = _check_dtype(dtype)
    for what, value in (("m", m), ("n", n), ("k", k)):
        _check_size(what, value, MAX_N)
    if epilogue is not None and epilogue not in GEMM_EPILOGUES:
        raise InvalidOptionError(f"the tiny GEMM applies epilogue None or one of {list(GEMM_EPILOGUES)}, "
                                 f"got {epilogue!r}")
    size = 8 if dtype == "float64" else 4
    per_block = _per_block(m, (m * k + k * n) * size)
    parts = [_operand("a", ctype), _operand("b", ctype)] + ([_operand("c", ctype)] if with_c else [])
    parts += [_operand("d", ctype, const=False),
              (["long long batch", f"{ctype} alpha"] + ([f"{ctype} beta"] if with_c else []),
               [KernelParam(("batch", None), "i64"), KernelParam(("alpha", None), scalar)]
               + ([KernelParam(("beta", None), scalar)] if with_c else []))]
    has_bias = epilogue is not None and epilogue.endswith("bias")
    if has_bias:
        roles = ("batch_stride", "row_stride", "col_stride")
        parts.append(([f"const {ctype}* __restrict__ bias"] + [f"long long bias_{role}" for role in roles],
                      [KernelParam(("bias", None), "ptr")] + [KernelParam((f"bias_{role}", None), "i64")
                                                             for role in roles]))
    a_src = "A[kk * lda + r]" if trans_a else "A[r * lda + kk]"
    b_src = "B[j * ldb + kk]" if trans_b else "B[kk * ldb + j]"
    c_term = " + beta * c[p * stride_c + r * ldc + j]" if with_c else ""
    body = [
        f"__shared__ {ctype} As[{per_block}][{m}][{k + 1}];",
        f"__shared__ {ctype} Bs[{per_block}][{k}][{n + 1}];",
        "if (active) {",
        "  const auto* A = a + p * stride_a;",
        "  const auto* B = b + p * stride_b;",
        f"  for (int kk = 0; kk < {k}; ++kk) As[slot][r][kk] = {a_src};",
        f"  for (int e = r; e < {k * n}; e += {m}) {{",
        f"    const int kk = e / {n}, j = e % {n};",
        f"    Bs[slot][kk][j] = {b_src};",
        "  }",
        "}",
        "__syncthreads();",
        "if (active) {",
        f"  for (int j = 0; j < {n}; ++j) {{",
        f"    {ctype} s = 0;",
        "#pragma unroll",
        f"    for (int kk = 0; kk < {k}; ++kk) s = fma(As[slot][r][kk], Bs[slot][kk][j], s);",
        f"    {ctype} v = alpha * s{c_term};",
        *(["    v += bias[p * bias_batch_stride + r * bias_row_stride + j * bias_col_stride];"] if has_bias else []),
        *_activation(epilogue, ctype),
        "    d[p * stride_d + r * ldd + j] = v;",
        "  }",
        "}",
    ]
    smem = per_block * (m * (k + 1) + k * (n + 1)) * size
    return _kernel(name, parts, body, per_block, m, smem)


def _activation(epilogue: str | None, ctype: str) -> list[str]:
    """Lines applying the epilogue's activation to ``v`` (GELU: ``x * sigmoid(2u)``, the tanh form)."""
    if epilogue is None or epilogue == "bias":
        return []
    if epilogue.startswith("relu"):
        return [f"    v = v > 0 ? v : ({ctype})0;"]
    return [f"    v = v / (({ctype})1 + exp(({ctype})-1.5957691216057308 * (v + ({ctype})0.044715 * v * v * v)));"]


def _lu(n: int, nrhs: int, t: str, pivots_out: bool) -> str:
    """LU with partial pivoting of ``S`` in place (multipliers below the diagonal), the row
    interchanges and ``L^{-1}`` applied to the right-hand sides ``R`` (``nrhs > 0``) as it goes;
    ``pivots_out`` stores LAPACK's 1-based ``ipiv`` of each column in ``piv_out``."""
    record = f"    if (active) piv_out[p * {n} + kc] = best + 1;\n" if pivots_out else ""
    swap_r = (f"    for (int j = r; j < {nrhs}; j += {n}) {{\n"
              f"      const {t} y = R[slot][kc][j]; R[slot][kc][j] = R[slot][pr][j]; R[slot][pr][j] = y;\n"
              "    }\n") if nrhs else ""
    update_r = f"    for (int j = 0; j < {nrhs}; ++j) R[slot][r][j] -= l * R[slot][kc][j];\n" if nrhs else ""
    return f"""
for (int kc = 0; kc < {n}; ++kc) {{
  if (r == 0) {{  // partial pivoting: the largest magnitude in column kc at or below the diagonal
    int best = kc;
    for (int i = kc + 1; i < {n}; ++i)
      if (fabs(S[slot][i][kc]) > fabs(S[slot][best][kc])) best = i;
    piv[slot] = best;
{record}    if (S[slot][best][kc] == 0 && info[slot] == 0) info[slot] = kc + 1;
  }}
  __syncthreads();
  const int pr = piv[slot];
  if (pr != kc) {{
    const {t} x = S[slot][kc][r]; S[slot][kc][r] = S[slot][pr][r]; S[slot][pr][r] = x;
{swap_r}  }}
  __syncthreads();
  const {t} pivot = S[slot][kc][kc];
  if (r > kc && pivot != 0) {{
    const {t} l = S[slot][r][kc] / pivot;
    S[slot][r][kc] = l;
    for (int j = kc + 1; j < {n}; ++j) S[slot][r][j] -= l * S[slot][kc][j];
{update_r}  }}
  __syncthreads();
}}
"""


_CHOLESKY = """
for (int kc = 0; kc < {n}; ++kc) {{
  if (r == kc) {{
    const {t} diagonal = S[slot][kc][kc];
    if (!(diagonal > 0) && info[slot] == 0) info[slot] = kc + 1;
    S[slot][kc][kc] = sqrt(diagonal);
  }}
  __syncthreads();
  if (r > kc) S[slot][r][kc] /= S[slot][kc][kc];
  __syncthreads();
  if (r > kc)
    for (int j = kc + 1; j <= r; ++j) S[slot][r][j] -= S[slot][r][kc] * S[slot][j][kc];
  __syncthreads();
}}
"""


def _substitution(n: int, nrhs: int, backward: bool, coefficient: str) -> str:
    """Triangular solve of the right-hand sides ``R`` in place: row ``kc`` is divided by the
    diagonal, then removed from the rows after it (``coefficient`` is the factor's entry at
    row ``r``, column ``kc`` of the triangle being solved)."""
    loop = f"for (int kc = {n} - 1; kc >= 0; --kc)" if backward else f"for (int kc = 0; kc < {n}; ++kc)"
    return f"""{loop} {{
  if (r == kc)
    for (int j = 0; j < {nrhs}; ++j) R[slot][r][j] /= S[slot][r][r];
  __syncthreads();
  if (r {'<' if backward else '>'} kc)
    for (int j = 0; j < {nrhs}; ++j) R[slot][r][j] -= {coefficient} * R[slot][kc][j];
  __syncthreads();
}}
"""


def tiny_solve_kernel(dtype: str, n: int, nrhs: int, *, method: str = "lu", trans_a: bool = False,
                      name: str = "nvm_tiny_solve") -> TinyKernel:
    """Generate a batched solver of ``A X = B`` for fixed ``n <= 32`` and ``nrhs <= 64``.

    Parameters
    ----------
    method : {"lu", "cholesky"}
        LU with partial pivoting (any nonsingular ``A``), or Cholesky (symmetric positive
        definite ``A``; only its lower triangle is read).
    trans_a : bool
        ``A`` is stored transposed: element ``(r, j)`` of problem ``p`` is at
        ``a[p * stride_a + j * lda + r]`` (a column-major matrix, e.g. an F-ordered stack).

    The kernel's parameters are ``a, lda, stride_a, b, ldb, stride_b, x, ldx, stride_x, info,
    batch``; ``info`` is an int32 array of ``batch`` entries.

    Examples
    --------
    >>> kern = tiny_solve_kernel("float64", 8, 1, method="cholesky")
    >>> kern.threads, [p.key[0] for p in kern.params][-2:]
    (128, ['info', 'batch'])
    """
    _check_method(method)
    ctype, _ = _check_dtype(dtype)
    _check_size("n", n, MAX_N)
    _check_size("nrhs", nrhs, MAX_RHS)
    size = 8 if dtype == "float64" else 4
    flags = 8 if method == "lu" else 4  # info (and the pivot row) per problem
    per_block = _per_block(n, (n * (n + 1) + n * nrhs) * size + flags)
    parts = [_operand("a", ctype), _operand("b", ctype), _operand("x", ctype, const=False),
             (["int* __restrict__ info_out", "long long batch"],
              [KernelParam(("info", None), "ptr"), KernelParam(("batch", None), "i64")])]
    algorithm = _lu(n, nrhs, ctype, False) if method == "lu" else _CHOLESKY.format(n=n, t=ctype)
    if method == "lu":  # the factorization already applied L to the right-hand sides
        algorithm += _substitution(n, nrhs, True, "S[slot][r][kc]")
    else:  # L y = b, then L^T x = y
        algorithm += _substitution(n, nrhs, False, "S[slot][r][kc]") + _substitution(n, nrhs, True, "S[slot][kc][r]")
    a_index = "j * lda + r" if trans_a else "r * lda + j"
    body = [
        f"__shared__ {ctype} S[{per_block}][{n}][{n + 1}];",
        f"__shared__ {ctype} R[{per_block}][{n}][{nrhs}];",
        f"__shared__ int info[{per_block}]{f', piv[{per_block}]' if method == 'lu' else ''};",
        f"for (int j = 0; j < {n}; ++j) S[slot][r][j] = active ? a[p * stride_a + {a_index}] : ({ctype})(r == j);",
        f"for (int j = 0; j < {nrhs}; ++j) R[slot][r][j] = active ? b[p * stride_b + r * ldb + j] : ({ctype})0;",
        "if (r == 0) info[slot] = 0;",
        "__syncthreads();",
        *algorithm.strip("\n").splitlines(),
        "if (active) {",
        f"  for (int j = 0; j < {nrhs}; ++j) x[p * stride_x + r * ldx + j] = R[slot][r][j];",
        "  if (r == 0) info_out[p] = info[slot];",
        "}",
    ]
    smem = per_block * ((n * (n + 1) + n * nrhs) * size + flags)
    return _kernel(name, parts, body, per_block, n, smem)


def _unit_substitution(n: int, nrhs: int, backward: bool, coefficient: str) -> str:
    """Like :func:`_substitution` for a unit-diagonal triangle (no division)."""
    loop = f"for (int kc = {n} - 1; kc >= 0; --kc)" if backward else f"for (int kc = 0; kc < {n}; ++kc)"
    return f"""{loop} {{
  if (r {'<' if backward else '>'} kc)
    for (int j = 0; j < {nrhs}; ++j) R[slot][r][j] -= {coefficient} * R[slot][kc][j];
  __syncthreads();
}}
"""


def _swaps(n: int, nrhs: int, reverse: bool) -> str:
    """LAPACK's row interchanges (1-based ``piv``) applied to ``R`` in order, or in reverse order."""
    loop = f"for (int kc = {n} - 1; kc >= 0; --kc)" if reverse else f"for (int kc = 0; kc < {n}; ++kc)"
    return f"""{loop} {{
  const int pr = active ? piv[p * {n} + kc] - 1 : kc;
  if (pr != kc && pr >= 0 && pr < {n})
    for (int j = r; j < {nrhs}; j += {n}) {{
      const auto y = R[slot][kc][j]; R[slot][kc][j] = R[slot][pr][j]; R[slot][pr][j] = y;
    }}
  __syncthreads();
}}
"""


def _check_method(method: str) -> None:
    if method not in ("lu", "cholesky"):
        raise InvalidOptionError(f"method must be 'lu' or 'cholesky', got {method!r}")


def tiny_factor_kernel(dtype: str, n: int, *, method: str = "lu", trans_a: bool = False,
                       name: str = "nvm_tiny_factor") -> TinyKernel:
    """Generate a batched in-place factorization for fixed ``n <= 32``.

    ``"lu"``: ``P A = L U`` with partial pivoting, ``L``'s multipliers below the diagonal and
    ``U`` on and above it (LAPACK's ``getrf`` layout), LAPACK's 1-based pivots in ``piv`` (int32,
    ``(batch, n)``). ``"cholesky"``: ``A = L L^T`` from the lower triangle, ``L`` written over the
    lower triangle, the strict upper triangle left as it was. ``info`` as for
    :func:`tiny_solve_kernel`. ``trans_a``: element ``(r, j)`` is at ``a[p * stride_a + j * lda + r]``.

    The parameters are ``a, lda, stride_a, [piv], info, batch``.

    Examples
    --------
    >>> [p.key[0] for p in tiny_factor_kernel("float32", 5).params]
    ['a', 'lda', 'stride_a', 'piv', 'info', 'batch']
    """
    _check_method(method)
    ctype, _ = _check_dtype(dtype)
    _check_size("n", n, MAX_N)
    size = 8 if dtype == "float64" else 4
    lu = method == "lu"
    flags = 8 if lu else 4
    per_block = _per_block(n, n * (n + 1) * size + flags)
    parts = [_operand("a", ctype, const=False)]
    if lu:
        parts.append((["int* __restrict__ piv_out"], [KernelParam(("piv", None), "ptr")]))
    parts.append((["int* __restrict__ info_out", "long long batch"],
                  [KernelParam(("info", None), "ptr"), KernelParam(("batch", None), "i64")]))
    algorithm = _lu(n, 0, ctype, True) if lu else _CHOLESKY.format(n=n, t=ctype)
    a_index = "j * lda + r" if trans_a else "r * lda + j"
    body = [
        f"__shared__ {ctype} S[{per_block}][{n}][{n + 1}];",
        f"__shared__ int info[{per_block}]{f', piv[{per_block}]' if lu else ''};",
        f"for (int j = 0; j < {n}; ++j) S[slot][r][j] = active ? a[p * stride_a + {a_index}] : ({ctype})(r == j);",
        "if (r == 0) info[slot] = 0;",
        "__syncthreads();",
        *algorithm.strip("\n").splitlines(),
        "if (active) {",
        f"  for (int j = 0; j < {n if lu else 'r + 1'}; ++j) a[p * stride_a + {a_index}] = S[slot][r][j];",
        "  if (r == 0) info_out[p] = info[slot];",
        "}",
    ]
    return _kernel(name, parts, body, per_block, n, per_block * (n * (n + 1) * size + flags))


def tiny_factored_solve_kernel(dtype: str, n: int, nrhs: int, *, method: str = "lu", transpose: bool = False,
                               trans_a: bool = False, trans_x: bool = False,
                               name: str = "nvm_tiny_factored_solve") -> TinyKernel:
    """Generate a batched solve with the factors of :func:`tiny_factor_kernel`, in place in ``X``.

    ``"lu"`` solves ``A X = B`` (or ``A^T X = B`` with ``transpose``) from ``L``, ``U`` and the
    pivots; ``"cholesky"`` solves ``A X = B`` from ``L`` (the lower triangle). ``trans_a`` and
    ``trans_x`` say the factors and ``X`` are stored column-major (element ``(r, j)`` at
    ``j * ld + r``), as cuSOLVER keeps them.

    The parameters are ``a, lda, stride_a, [piv], x, ldx, stride_x, batch``.

    Examples
    --------
    >>> [p.key[0] for p in tiny_factored_solve_kernel("float64", 4, 2, method="cholesky").params]
    ['a', 'lda', 'stride_a', 'x', 'ldx', 'stride_x', 'batch']
    """
    _check_method(method)
    ctype, _ = _check_dtype(dtype)
    _check_size("n", n, MAX_N)
    _check_size("nrhs", nrhs, MAX_RHS)
    size = 8 if dtype == "float64" else 4
    lu = method == "lu"
    per_block = _per_block(n, (n * (n + 1) + n * nrhs) * size)
    parts = [_operand("a", ctype)]
    if lu:
        parts.append((["const int* __restrict__ piv"], [KernelParam(("piv", None), "ptr")]))
    parts += [_operand("x", ctype, const=False), (["long long batch"], [KernelParam(("batch", None), "i64")])]
    if lu and not transpose:  # P^T L U x = b: interchanges, L (unit), then U
        algorithm = (_swaps(n, nrhs, False) + _unit_substitution(n, nrhs, False, "S[slot][r][kc]")
                     + _substitution(n, nrhs, True, "S[slot][r][kc]"))
    elif lu:  # U^T L^T P x = b: U^T, L^T (unit), then the interchanges in reverse
        algorithm = (_substitution(n, nrhs, False, "S[slot][kc][r]")
                     + _unit_substitution(n, nrhs, True, "S[slot][kc][r]") + _swaps(n, nrhs, True))
    else:  # L y = b, then L^T x = y
        algorithm = _substitution(n, nrhs, False, "S[slot][r][kc]") + _substitution(n, nrhs, True, "S[slot][kc][r]")
    a_index = "j * lda + r" if trans_a else "r * lda + j"
    x_index = "j * ldx + r" if trans_x else "r * ldx + j"
    body = [
        f"__shared__ {ctype} S[{per_block}][{n}][{n + 1}];",
        f"__shared__ {ctype} R[{per_block}][{n}][{nrhs}];",
        f"for (int j = 0; j < {n}; ++j) S[slot][r][j] = active ? a[p * stride_a + {a_index}] : ({ctype})(r == j);",
        f"for (int j = 0; j < {nrhs}; ++j) R[slot][r][j] = active ? x[p * stride_x + {x_index}] : ({ctype})0;",
        "__syncthreads();",
        *algorithm.strip("\n").splitlines(),
        "if (active)",
        f"  for (int j = 0; j < {nrhs}; ++j) x[p * stride_x + {x_index}] = R[slot][r][j];",
    ]
    return _kernel(name, parts, body, per_block, n, per_block * (n * (n + 1) + n * nrhs) * size)
