"""Vectorised solvers for large batches of tiny matrices (n <= 4), where a LAPACK call per
matrix costs far more than the arithmetic.

* :func:`closed_form` — adjugate formulas for n = 1..4 (inverse or solve; 4x4 through the
  2x2 minors of the top and bottom row pairs). Each matrix is first scaled by a power of
  two near ``1/max|entry|`` (the result is unscaled after), so tiny or huge entries neither
  underflow nor overflow. Matrices whose relative determinant is below ``sqrt(eps)``
  (ill-conditioned, singular, or non-finite), or whose result is not finite, are flagged so
  the caller re-solves them with pivoted LU, which also reports exact singularity.
* :func:`eliminate` — Gaussian elimination with partial pivoting, vectorised over the batch
  (any small n), flagging matrices with a zero pivot.

Both work on ``(B, n, n)`` stacks and return ``(result, flagged)`` where ``flagged`` is a
boolean mask over the batch.
"""

from __future__ import annotations

import numpy as np

__all__ = ["closed_form", "eliminate", "CLOSED_FORM_MAX", "ELIMINATION_MAX"]

CLOSED_FORM_MAX = 4
ELIMINATION_MAX = 4


def _minor(p: np.ndarray, q: np.ndarray, r: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``p q - r s`` with one temporary."""
    out = p * q
    out -= r * s
    return out


def _combine(*terms: tuple[float, np.ndarray, np.ndarray]) -> np.ndarray:
    """``sum(sign * x * y)`` over the terms."""
    sign, x, y = terms[0]
    out = x * y
    if sign < 0:
        np.negative(out, out=out)
    for sign, x, y in terms[1:]:
        if sign > 0:
            out += x * y
        else:
            out -= x * y
    return out


def _adjugate(e: np.ndarray, n: int) -> tuple[list[list[np.ndarray]], np.ndarray]:
    """The adjugate ``adj[i][j]`` (``= det * inverse[i][j]``) and the determinants, from the
    entries ``e`` (``(n*n, B)``, row-major, each row contiguous over the batch)."""
    if n == 1:
        return [[np.ones_like(e[0])]], e[0].copy()
    if n == 2:
        a00, a01, a10, a11 = e
        return [[a11, -a01], [-a10, a00]], _minor(a00, a11, a01, a10)
    if n == 3:
        a00, a01, a02, a10, a11, a12, a20, a21, a22 = e
        adj = [
            [_minor(a11, a22, a12, a21), _minor(a02, a21, a01, a22), _minor(a01, a12, a02, a11)],
            [_minor(a12, a20, a10, a22), _minor(a00, a22, a02, a20), _minor(a02, a10, a00, a12)],
            [_minor(a10, a21, a11, a20), _minor(a01, a20, a00, a21), _minor(a00, a11, a01, a10)],
        ]
        return adj, _combine((1, a00, adj[0][0]), (1, a01, adj[1][0]), (1, a02, adj[2][0]))
    a00, a01, a02, a03, a10, a11, a12, a13, a20, a21, a22, a23, a30, a31, a32, a33 = e
    s0, s1, s2 = _minor(a00, a11, a10, a01), _minor(a00, a12, a10, a02), _minor(a00, a13, a10, a03)
    s3, s4, s5 = _minor(a01, a12, a11, a02), _minor(a01, a13, a11, a03), _minor(a02, a13, a12, a03)
    c5, c4, c3 = _minor(a22, a33, a32, a23), _minor(a21, a33, a31, a23), _minor(a21, a32, a31, a22)
    c2, c1, c0 = _minor(a20, a33, a30, a23), _minor(a20, a32, a30, a22), _minor(a20, a31, a30, a21)
    det = _combine((1, s0, c5), (-1, s1, c4), (1, s2, c3), (1, s3, c2), (-1, s4, c1), (1, s5, c0))
    adj = [
        [_combine((1, a11, c5), (-1, a12, c4), (1, a13, c3)), _combine((-1, a01, c5), (1, a02, c4), (-1, a03, c3)),
         _combine((1, a31, s5), (-1, a32, s4), (1, a33, s3)), _combine((-1, a21, s5), (1, a22, s4), (-1, a23, s3))],
        [_combine((-1, a10, c5), (1, a12, c2), (-1, a13, c1)), _combine((1, a00, c5), (-1, a02, c2), (1, a03, c1)),
         _combine((-1, a30, s5), (1, a32, s2), (-1, a33, s1)), _combine((1, a20, s5), (-1, a22, s2), (1, a23, s1))],
        [_combine((1, a10, c4), (-1, a11, c2), (1, a13, c0)), _combine((-1, a00, c4), (1, a01, c2), (-1, a03, c0)),
         _combine((1, a30, s4), (-1, a31, s2), (1, a33, s0)), _combine((-1, a20, s4), (1, a21, s2), (-1, a23, s0))],
        [_combine((-1, a10, c3), (1, a11, c1), (-1, a12, c0)), _combine((1, a00, c3), (-1, a01, c1), (1, a02, c0)),
         _combine((-1, a30, s3), (1, a31, s1), (-1, a32, s0)), _combine((1, a20, s3), (-1, a21, s1), (1, a22, s0))],
    ]
    return adj, det


def closed_form(a: np.ndarray, b: np.ndarray | None, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``A^{-1} b`` (or ``A^{-1}`` when ``b`` is None) by the adjugate, for n <= 4.

    ``a`` is ``(B, n, n)``, ``b`` ``(B, n, k)``; ``out`` (optional) receives the result
    (``(B, n, n)`` or ``(B, n, k)``). The entries are first gathered into contiguous rows
    over the batch (one copy), so every formula step is one vectorised operation on
    contiguous memory. Flagged matrices hold garbage in the result.
    """
    count, n = a.shape[0], a.shape[-1]
    e = np.ascontiguousarray(a.reshape(count, n * n).T)
    if np.may_share_memory(e, a):  # a single matrix or n == 1: no copy was made
        e = e.copy()
    scale = np.abs(e).max(axis=0)
    # Scale each matrix by a power of two near 1/max|entry| (exact), so the adjugate and
    # determinant neither underflow nor overflow; 0, inf and NaN scales keep exponent 0.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inv_scale = np.ldexp(np.ones_like(scale), -np.frexp(scale)[1])
        e *= inv_scale
        adj, det = _adjugate(e, n)
        # The scaled entries are below 1 in magnitude, so the scaled |det| is at most the
        # relative determinant: every matrix with a relative determinant below sqrt(eps)
        # is flagged (with the few up to 2^n times above it); NaN flags too.
        flagged = ~(np.abs(det) > np.sqrt(np.finfo(a.dtype).eps))
        inv_det = inv_scale / det  # inf or NaN only where flagged or overflowing
        if b is None:
            flagged |= ~np.isfinite(inv_det)
            result = np.empty((n, n, count), a.dtype)
            for i in range(n):
                for j in range(n):
                    np.multiply(adj[i][j], inv_det, out=result[i, j])
        else:
            k = b.shape[-1]
            rows = np.ascontiguousarray(b.reshape(count, n * k).T).reshape(n, k, count)
            result = np.empty((n, k, count), np.result_type(a, b))
            term = np.empty((k, count), result.dtype)
            for i in range(n):
                acc = result[i]
                np.multiply(adj[i][0], rows[0], out=acc)
                for j in range(1, n):
                    acc += np.multiply(adj[i][j], rows[j], out=term)
                acc *= inv_det
            # a non-finite inverse determinant or b entry, or an overflow, shows up here
            flagged |= ~np.isfinite(result).all(axis=(0, 1))
    if out is None:
        return result.transpose(2, 0, 1).copy(), flagged
    np.copyto(out, result.transpose(2, 0, 1))
    return out, flagged


def eliminate(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Solve ``A x = b`` for a ``(B, n, n)`` stack by vectorised Gaussian elimination with
    partial pivoting (into ``out`` when given); matrices with an exactly zero (or
    non-finite) pivot are flagged."""
    count, n = a.shape[0], a.shape[-1]
    m = np.concatenate([a, b], axis=2).astype(np.result_type(a, b), copy=False)
    rows = np.arange(count)
    flagged = np.zeros(count, bool)
    for k in range(n):
        piv = np.argmax(np.abs(m[:, k:, k]), axis=1) + k
        swap = piv != k
        if swap.any():
            top = m[rows, piv].copy()
            m[rows, piv] = m[:, k]
            m[:, k] = top
        pivot = m[:, k, k]
        bad = ~np.isfinite(pivot) | (pivot == 0)
        if bad.any():
            flagged |= bad
            pivot = np.where(bad, 1, pivot)
        if k + 1 < n:
            factors = m[:, k + 1:, k] / pivot[:, None]
            m[:, k + 1:, k + 1:] -= factors[:, :, None] * m[:, k, None, k + 1:]
        m[:, k, k] = pivot
    x = m[:, :, n:]
    for i in range(n - 1, -1, -1):
        if i + 1 < n:
            x[:, i] -= np.einsum("bj,bjk->bk", m[:, i, i + 1:n], x[:, i + 1:])
        x[:, i] /= m[:, i, i, None]
    if out is None:
        return x, flagged
    out[...] = x
    return out, flagged
