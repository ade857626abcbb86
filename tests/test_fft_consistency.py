"""Results that must agree bit for bit: one logical problem whatever the operand's memory
layout (each CPU library), and a real input's ``fft`` with its ``rfft`` (both namespaces)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft

import nvmathpy.fft as nfft
import nvmathpy.scipy.fft as nsfft
from nvmathpy.fft import FFT
from nvmathpy.fft._libraries import installed_libraries


def _layouts(x: np.ndarray) -> list[np.ndarray]:
    """``x`` C-ordered, Fortran-ordered, and as a reversed (negative-stride) view of a copy."""
    reversed_copy = np.ascontiguousarray(x[::-1])[::-1]
    return [x, np.asfortranarray(x), reversed_copy]


@pytest.mark.parametrize("library", installed_libraries())
@pytest.mark.parametrize("kind,dtype", [("c2c", np.complex128), ("c2c", np.complex64), ("r2c", np.float64),
                                        ("c2r", np.complex128)])
@pytest.mark.parametrize("axes", [None, (0,), (2,), (0, 2), (2, 0, 1)])
def test_same_bits_for_every_layout(library: str, kind: str, dtype: type, axes: tuple[int, ...] | None) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 7, 13))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(x.shape)
    x = x.astype(dtype)
    s = None if kind != "c2r" else [x.shape[axis] for axis in (axes or range(x.ndim))]  # c2r: lengths required
    results = [FFT(v, axes=axes, s=s, kind=kind, options={"engines": (library,)}).plan().execute()
               for v in _layouts(x)]
    for other in results[1:]:
        assert np.array_equal(results[0], other)


@pytest.mark.parametrize("namespace", [nfft, nsfft], ids=["numpy", "scipy"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.longdouble, np.int32, np.bool_])
@pytest.mark.parametrize("n", [None, 1, 2, 9, 20])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_real_fft_first_half_is_rfft(namespace, dtype: type, n: int | None, norm: str | None) -> None:
    """SciPy's ``fft`` of real input: its first half equals ``rfft``'s (``np.array_equal``);
    NumPy's is the complex transform of the input made complex (its first half equals ``rfft``'s
    to rounding, as NumPy's own)."""
    x = (np.random.default_rng(3).standard_normal((5, 12)) * 3).astype(dtype)
    reference = (np.fft if namespace is nfft else scipy.fft).fft(x, n=n, axis=0, norm=norm)
    got = namespace.fft(x, n=n, axis=0, norm=norm)
    if namespace is nsfft:
        kept = (n or x.shape[0]) // 2 + 1
        assert np.array_equal(got[:kept], namespace.rfft(x, n=n, axis=0, norm=norm))
    assert got.dtype == reference.dtype and got.shape == reference.shape
    tol = 2e-3 if np.dtype(dtype).itemsize <= 4 and np.dtype(dtype).kind == "f" else 1e-12
    assert np.linalg.norm(got - reference) <= tol * np.linalg.norm(reference)


def test_real_fft_of_a_list_and_into_out() -> None:
    x = [1.0, 0.0, 0.0, 0.0]
    assert nfft.fft(x).tolist() == np.fft.fft(x).tolist()
    out = np.empty(4, np.complex64)
    assert nfft.fft(np.asarray(x), out=out) is out and np.array_equal(out, np.ones(4))
    with pytest.raises(ValueError, match="has wrong shape"):
        nfft.fft(np.asarray(x), out=np.empty(5, complex))
