"""Kernels for large batches of tiny problems (n <= 32): GEMM, LU solve and Cholesky solve.

Several problems share one thread block; each problem gets ``n`` threads (one per row, or per
row of ``D`` for the GEMM) and its own slice of shared memory, and the sizes are compile-time
constants, so every loop is short and fixed. Matrices are batched row-major with run-time
leading dimensions and batch strides; the inputs are never written.

The solvers take ``A`` ``(batch, n, n)`` and ``B`` ``(batch, n, nrhs)`` and write ``X``
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

__all__ = ["TinyKernel", "tiny_gemm_kernel", "tiny_solve_kernel", "MAX_N"]

MAX_N = 32
_MAX_RHS = 64
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
                     with_c: bool = False, name: str = "nvm_tiny_gemm") -> TinyKernel:
    """Generate batched ``D = alpha * op(A) @ op(B) [+ beta * C]`` for fixed tiny ``m, n, k <= 32``.

    Each problem has ``m`` threads; thread ``r`` computes row ``r`` of ``D`` from the problem's
    ``A`` and ``B`` staged in shared memory. ``trans_a``/``trans_b`` mean ``A`` is stored
    ``(batch, k, m)`` and ``B`` ``(batch, n, k)``.

    Examples
    --------
    >>> kern = tiny_gemm_kernel("float64", 8, 8, 8)
    >>> kern.per_block, kern.threads, kern.launch_dims(100)[0]
    (16, 128, (7, 1, 1))
    """
    ctype, scalar = _check_dtype(dtype)
    for what, value in (("m", m), ("n", n), ("k", k)):
        _check_size(what, value, MAX_N)
    size = 8 if dtype == "float64" else 4
    per_block = _per_block(m, (m * k + k * n) * size)
    parts = [_operand("a", ctype), _operand("b", ctype)] + ([_operand("c", ctype)] if with_c else [])
    parts += [_operand("d", ctype, const=False),
              (["long long batch", f"{ctype} alpha"] + ([f"{ctype} beta"] if with_c else []),
               [KernelParam(("batch", None), "i64"), KernelParam(("alpha", None), scalar)]
               + ([KernelParam(("beta", None), scalar)] if with_c else []))]
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
        f"    d[p * stride_d + r * ldd + j] = alpha * s{c_term};",
        "  }",
        "}",
    ]
    smem = per_block * (m * (k + 1) + k * (n + 1)) * size
    return _kernel(name, parts, body, per_block, m, smem)


_LU = """
for (int kc = 0; kc < {n}; ++kc) {{
  if (r == 0) {{  // partial pivoting: the largest magnitude in column kc at or below the diagonal
    int best = kc;
    for (int i = kc + 1; i < {n}; ++i)
      if (fabs(S[slot][i][kc]) > fabs(S[slot][best][kc])) best = i;
    piv[slot] = best;
    if (S[slot][best][kc] == 0 && info[slot] == 0) info[slot] = kc + 1;
  }}
  __syncthreads();
  const int pr = piv[slot];
  if (pr != kc) {{
    const {t} x = S[slot][kc][r]; S[slot][kc][r] = S[slot][pr][r]; S[slot][pr][r] = x;
    for (int j = r; j < {nrhs}; j += {n}) {{
      const {t} y = R[slot][kc][j]; R[slot][kc][j] = R[slot][pr][j]; R[slot][pr][j] = y;
    }}
  }}
  __syncthreads();
  const {t} pivot = S[slot][kc][kc];
  if (r > kc && pivot != 0) {{
    const {t} l = S[slot][r][kc] / pivot;
    for (int j = kc + 1; j < {n}; ++j) S[slot][r][j] -= l * S[slot][kc][j];
    for (int j = 0; j < {nrhs}; ++j) R[slot][r][j] -= l * R[slot][kc][j];
  }}
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


def tiny_solve_kernel(dtype: str, n: int, nrhs: int, *, method: str = "lu", name: str = "nvm_tiny_solve") -> TinyKernel:
    """Generate a batched solver of ``A X = B`` for fixed ``n <= 32`` and ``nrhs <= 64``.

    Parameters
    ----------
    method : {"lu", "cholesky"}
        LU with partial pivoting (any nonsingular ``A``), or Cholesky (symmetric positive
        definite ``A``; only its lower triangle is read).

    The kernel's parameters are ``a, lda, stride_a, b, ldb, stride_b, x, ldx, stride_x, info,
    batch``; ``info`` is an int32 array of ``batch`` entries.

    Examples
    --------
    >>> kern = tiny_solve_kernel("float64", 8, 1, method="cholesky")
    >>> kern.threads, [p.key[0] for p in kern.params][-2:]
    (128, ['info', 'batch'])
    """
    if method not in ("lu", "cholesky"):
        raise InvalidOptionError(f"method must be 'lu' or 'cholesky', got {method!r}")
    ctype, _ = _check_dtype(dtype)
    _check_size("n", n, MAX_N)
    _check_size("nrhs", nrhs, _MAX_RHS)
    size = 8 if dtype == "float64" else 4
    flags = 8 if method == "lu" else 4  # info (and the pivot row) per problem
    per_block = _per_block(n, (n * (n + 1) + n * nrhs) * size + flags)
    parts = [_operand("a", ctype), _operand("b", ctype), _operand("x", ctype, const=False),
             (["int* __restrict__ info_out", "long long batch"],
              [KernelParam(("info", None), "ptr"), KernelParam(("batch", None), "i64")])]
    algorithm = (_LU if method == "lu" else _CHOLESKY).format(n=n, nrhs=nrhs, t=ctype)
    if method == "lu":  # the factorization already applied L to the right-hand sides
        algorithm += _substitution(n, nrhs, True, "S[slot][r][kc]")
    else:  # L y = b, then L^T x = y
        algorithm += _substitution(n, nrhs, False, "S[slot][r][kc]") + _substitution(n, nrhs, True, "S[slot][kc][r]")
    body = [
        f"__shared__ {ctype} S[{per_block}][{n}][{n + 1}];",
        f"__shared__ {ctype} R[{per_block}][{n}][{nrhs}];",
        f"__shared__ int info[{per_block}]{f', piv[{per_block}]' if method == 'lu' else ''};",
        f"for (int j = 0; j < {n}; ++j) S[slot][r][j] = active ? a[p * stride_a + r * lda + j] : ({ctype})(r == j);",
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
