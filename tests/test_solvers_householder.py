"""Householder reflectors applied in blocks (nvmathpy/linalg/solvers/cpu/_householder.py), against
LAPACK forming the same ``Q`` (``?orgqr`` / ``?ungqr``); the ``?sytrd`` storages are covered
through the eigensolver (tests/test_solvers_blocked_eigh.py)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from nvmathpy.linalg.solvers.cpu import _householder as householder
from nvmathpy.linalg.solvers.cpu._householder import reflectors, reflectors_available

pytestmark = pytest.mark.skipif(not reflectors_available(np.float64), reason="NumPy's BLAS exports no LAPACK here")


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("shape", [(1, 1), (9, 4), (40, 40), (77, 31)])
@pytest.mark.parametrize("block", [1, 3, 128])
def test_forward_forms_the_q_of_a_qr_factorization(dtype, shape, block, monkeypatch):
    monkeypatch.setattr(householder, "BLOCK", block)
    rng = np.random.default_rng(sum(shape) + block)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    a = np.asfortranarray(a.astype(dtype))
    geqrf, orgqr = sla.get_lapack_funcs(("geqrf", "orgqr"), (a,))
    qr, tau, _, _ = geqrf(a)
    m, k = shape[0], min(shape)
    q = np.asfortranarray(np.eye(m, dtype=dtype))
    reflectors(dtype).forward(qr, tau, q, count=k, offset=0)
    ref = orgqr(qr, tau, lwork=max(1, 64 * m))[0]
    tol = 1e-12 if dtype in ("float64", "complex128") else 1e-4
    assert np.abs(q[:, :k] - ref[:, :k]).max() < tol
    assert np.abs(q.conj().T @ q - np.eye(m)).max() < tol
