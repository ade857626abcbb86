"""One line to switch existing code to nvmathpy: :func:`patch`, :func:`unpatch`, :func:`patched`.

Four namespaces can be patched, each on its own:

- ``"scipy.linalg"``: the functions of :mod:`nvmathpy.scipy.linalg` replace SciPy's.
- ``"numpy.linalg"``: the functions of :mod:`nvmathpy.linalg` that are NumPy's exactly
  (:data:`NUMPY_LINALG_PATCHED`: those that pass NumPy's own linalg tests when patched in
  and are not slower than NumPy's on small matrices).
- ``"numpy.fft"``: the transforms of :mod:`nvmathpy.fft` replace NumPy's (the ``*freq`` and
  ``*shift`` helpers stay NumPy's: nothing to accelerate there, and nvmathpy's call NumPy's).
- ``"scipy.fft"``: :mod:`nvmathpy.scipy.fft` becomes SciPy's global uarray backend, with
  SciPy's own backend registered as the fallback for what nvmathpy declines. The module's
  attributes stay SciPy's multimethods: a name bound before patching dispatches to the new
  backend already, a ``scipy.fft.set_backend`` context a caller opens still wins, and declined
  calls (FHT, CuPy arrays, ...) still reach SciPy.

How a function namespace is patched: each replaced attribute of the peer module (say
``scipy.linalg.solve``) is set to a *twin* of nvmathpy's function: a new function object with
the same code, globals, defaults and closure (no call overhead), named where it is installed
(``scipy.linalg.solve``: pickle finds it there), whose ``__wrapped__`` is nvmathpy's function. Names bound earlier by ``from scipy.linalg import solve`` in the globals of
already-imported modules are swapped for the twin too, except in the peer's own package (SciPy's
or NumPy's internals keep their functions, which nvmathpy's own fallbacks call) and in nvmathpy.
Modules imported while patched bind the twins through the patched attributes. :func:`unpatch`
puts the original object back wherever a module's globals hold a twin, so it restores
everything the patch changed, and nothing else: a name bound from nvmathpy directly is left
alone. References kept elsewhere (class attributes, default arguments, containers, namespaces
given to ``exec`` that are not modules) are not swapped. nvmathpy's own modules never reach a
function the patch replaces through the peer's module (a patched call would recurse):
``tests/test_patch.py`` checks it.

The patch is process-wide, as module attributes are. A lock makes every change atomic;
:func:`patched` contexts nest and overlap across threads: a namespace stays patched while a
context that patched it is open, or until :func:`unpatch` is called for it. Each change is
logged (INFO) on the ``nvmathpy`` logger. Importing this module imports neither NumPy nor
SciPy; patching imports the peer it patches.

Examples
--------
>>> import scipy.linalg, nvmathpy
>>> with nvmathpy.patched("scipy.linalg"):
...     print(scipy.linalg.solve.__wrapped__ is nvmathpy.scipy.linalg.solve, nvmathpy.patched_namespaces())
True ('scipy.linalg',)
>>> scipy.linalg.solve.__wrapped__
Traceback (most recent call last):
AttributeError: 'function' object has no attribute '__wrapped__'
>>> nvmathpy.patched_namespaces()
()
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import logging
import sys
import threading
from types import FunctionType, ModuleType
from typing import Any, Callable, Iterator

from ._logging import logger

__all__ = ["NAMESPACES", "NUMPY_LINALG_EXACT", "NUMPY_LINALG_PATCHED", "patch", "unpatch", "patched",
           "patched_namespaces"]

#: The namespaces :func:`patch` knows, in the order it patches them.
NAMESPACES = ("scipy.linalg", "numpy.linalg", "numpy.fft", "scipy.fft")

#: The :mod:`nvmathpy.linalg` functions that are NumPy's exactly: they pass NumPy's own
#: ``linalg/tests/test_linalg.py`` patched in (``tests/test_patch.py`` runs it with all of them).
#: The others differ at edges that suite checks: NumPy computes float32/complex64 operands in
#: double precision and rounds the result, nvmathpy in single precision (``inv``, ``svd``,
#: ``lstsq``: the suite's 5-decimal checks see the difference); ``cholesky`` accepts float16;
#: ``lstsq`` also differs on ``rcond=-1`` and on the error of incompatible shapes. ``qr`` runs
#: SciPy's LAPACK build, whose float32 ``?orgqr`` is less accurate than NumPy's on some CPUs
#: (on AMD EPYC with OpenBLAS' Haswell kernels ``Q @ R`` of the suite's 3x2 float32 matrix
#: misses its 6-decimal check, as ``scipy.linalg.qr``'s does).
NUMPY_LINALG_EXACT = ("solve", "det", "slogdet", "eigh", "eigvalsh", "svdvals")

#: What ``patch("numpy.linalg")`` installs: the exact functions that are not slower than NumPy's
#: on the small matrices most calls see (one small matrix takes one compiled call, a
#: determinant below the plans' order NumPy's gufunc itself). ``eigh``/``eigvalsh`` and
#: ``svdvals`` stay NumPy's: from order 32 on they are the same LAPACK routines on SciPy's
#: build, no faster than NumPy's and slower in some runs (``benchmarks/bench_patch.py``
#: measures all of them beside NumPy's).
NUMPY_LINALG_PATCHED = ("solve", "det", "slogdet")

_LOCK = threading.RLock()
_FFT_DOMAIN = "numpy.scipy.fft"
_Undo = Callable[[], None]


class _Activation:
    """One namespace while patched: how to undo it, whether :func:`patch` asked for it, and
    how many open :func:`patched` contexts hold it."""

    def __init__(self, namespace: str, undo: _Undo) -> None:
        self.namespace, self.undo = namespace, undo
        self.explicit, self.holders = False, 0


_ACTIVE: dict[str, _Activation] = {}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _twin(function: FunctionType, module: str, name: str) -> FunctionType:
    """A new function object running ``function``'s code with its globals, defaults and closure:
    an identity of its own at no call cost. Its ``__wrapped__`` is ``function``; it is named
    ``module.name``, where it is installed, so that pickle finds it there."""
    twin = FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__,
                        function.__closure__)
    twin.__kwdefaults__ = function.__kwdefaults__
    functools.update_wrapper(twin, function)
    twin.__module__, twin.__qualname__ = module, name
    return twin


def _swap(replacements: dict[int, tuple[Any, Any]], skip: Callable[[str], bool]) -> list[str]:
    """In the globals of every imported module that ``skip`` does not name, replace each value
    ``old`` with ``new`` (``replacements`` maps ``id(old)`` to ``(old, new)``); the names of
    the modules changed, as ``module.name``."""
    changed = []
    for module_name, module in list(sys.modules.items()):
        if not isinstance(module, ModuleType) or skip(module_name):
            continue
        namespace = module.__dict__
        for key, value in list(namespace.items()):
            pair = replacements.get(id(value))
            if pair is not None and pair[0] is value:
                namespace[key] = pair[1]
                changed.append(f"{module_name}.{key}")
    return changed


def _functions(namespace: str, peer_name: str, source_name: str,
               select: Callable[[ModuleType, ModuleType], list[str]]) -> _Undo:
    """Replace the functions ``select(source, peer)`` names in module ``peer_name`` (and the
    names bound to them elsewhere) by twins of ``source_name``'s; the undo."""
    peer, source = importlib.import_module(peer_name), importlib.import_module(source_name)
    forward: dict[int, tuple[Any, Any]] = {}
    backward: dict[int, tuple[Any, Any]] = {}
    for name in select(source, peer):
        original, new = getattr(peer, name, None), getattr(source, name)
        if original is None or original is new or not isinstance(new, FunctionType):
            continue
        twin = _twin(new, peer_name, name)
        setattr(peer, name, twin)
        forward[id(original)], backward[id(twin)] = (original, twin), (twin, original)
    root = peer_name.partition(".")[0]
    elsewhere = _swap(forward, lambda module: _within(module, root) or _within(module, "nvmathpy"))
    logger.info("patched %s: %d functions now nvmathpy's (%s); %d names bound elsewhere swapped",
                namespace, len(backward), source_name, len(elsewhere))
    if elsewhere and logger.isEnabledFor(logging.DEBUG):
        logger.debug("patched %s in: %s", namespace, ", ".join(elsewhere))

    def undo() -> None:
        restored = _swap(backward, lambda module: False)
        logger.info("unpatched %s: %d references restored to the originals", namespace, len(restored))

    return undo


def _scipy_fft_backends(uarray: ModuleType) -> tuple[Any, bool, bool, bool] | None:
    """scipy.fft's global backend as ``(backend, coerce, only, try_last)``, read from uarray's
    state (a private layout, checked in SciPy 1.17); ``None`` where it cannot be read."""
    try:
        (backend, coerce, only), _registered, try_last = uarray.get_state()._pickle()[0][_FFT_DOMAIN]
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        return None
    return backend, coerce, only, try_last


_SCIPY_FFT_FALLBACK: list[bool] = []  # non-empty once SciPy's backend is registered as the fallback


def _scipy_fft() -> _Undo:
    """Make nvmathpy SciPy's global FFT backend (SciPy's registered behind it); the undo."""
    import scipy.fft as sfft
    from scipy._lib import _uarray as uarray

    from .scipy import fft as backend

    before = _scipy_fft_backends(uarray)
    sfft.set_global_backend(backend)
    if not _SCIPY_FFT_FALLBACK:  # registered once per process: uarray cannot unregister one backend
        sfft.register_backend("scipy")
        _SCIPY_FFT_FALLBACK.append(True)
    logger.info("patched scipy.fft: global backend nvmathpy.scipy.fft, SciPy's behind it")

    def undo() -> None:
        previous, coerce, only, try_last = before if before is not None else ("scipy", False, False, True)
        sfft.set_global_backend(previous, coerce=coerce, only=only, try_last=try_last)
        logger.info("unpatched scipy.fft: global backend %s", getattr(previous, "__name__", previous))

    return undo


def _install(namespace: str) -> _Undo:
    if namespace == "scipy.linalg":
        return _functions(namespace, "scipy.linalg", "nvmathpy.scipy.linalg", lambda source, peer: list(source.__all__))
    if namespace == "numpy.linalg":
        return _functions(namespace, "numpy.linalg", "nvmathpy.linalg", lambda source, peer: list(NUMPY_LINALG_PATCHED))
    if namespace == "numpy.fft":
        return _functions(namespace, "numpy.fft", "nvmathpy.fft", lambda source, peer: [
            name for name in source.__all__ if name in peer.__all__ and not name.endswith(("freq", "shift"))])
    return _scipy_fft()


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _requested(namespaces: tuple[Any, ...], default: Callable[[], tuple[str, ...]]) -> tuple[str, ...]:
    for name in namespaces:
        if not isinstance(name, str) or name not in NAMESPACES:
            raise ValueError(f"unknown namespace {name!r}; allowed: {', '.join(map(repr, NAMESPACES))}")
    return tuple(name for name in NAMESPACES if name in namespaces) if namespaces else default()


def _available() -> tuple[str, ...]:
    return tuple(name for name in NAMESPACES if _installed(name.partition(".")[0]))


def _activate(namespace: str) -> _Activation:
    """The namespace's activation, patching it first if it is not patched (lock held)."""
    active = _ACTIVE.get(namespace)
    if active is None:
        active = _ACTIVE[namespace] = _Activation(namespace, _install(namespace))
    return active


def patch(*namespaces: str) -> None:
    """Make existing code run nvmathpy: patch ``namespaces`` (default: all of
    :data:`NAMESPACES` whose library is installed) until :func:`unpatch`.

    Patching a patched namespace does nothing. See the module's description for what is
    replaced where.

    Parameters
    ----------
    *namespaces
        Any of ``"scipy.linalg"``, ``"numpy.linalg"``, ``"numpy.fft"``, ``"scipy.fft"``.

    Raises
    ------
    ValueError
        For a name that is not one of those (the message lists them).

    Examples
    --------
    >>> import numpy as np, nvmathpy
    >>> nvmathpy.patch("numpy.fft")
    >>> np.fft.rfft.__wrapped__ is nvmathpy.fft.rfft
    True
    >>> nvmathpy.unpatch("numpy.fft")
    >>> np.fft.rfft.__module__
    'numpy.fft'
    """
    with _LOCK:
        for namespace in _requested(namespaces, _available):
            _activate(namespace).explicit = True


def unpatch(*namespaces: str) -> None:
    """Restore ``namespaces`` (default: every patched one) to their original functions, at
    once, even where an open :func:`patched` context patched them. Unpatching a namespace that
    is not patched does nothing.

    Raises
    ------
    ValueError
        For a name that is not one of :data:`NAMESPACES`.

    Examples
    --------
    >>> import nvmathpy
    >>> nvmathpy.patch("scipy.linalg"); nvmathpy.unpatch()
    >>> nvmathpy.patched_namespaces()
    ()
    """
    with _LOCK:
        for namespace in _requested(namespaces, patched_namespaces):
            active = _ACTIVE.pop(namespace, None)
            if active is not None:
                active.undo()


@contextlib.contextmanager
def patched(*namespaces: str) -> Iterator[None]:
    """A context (or decorator) in which ``namespaces`` (default: all installed) are patched.

    On exit it unpatches what it patched, unless another open context or :func:`patch` still
    holds it; a namespace patched before it opened stays patched.

    Raises
    ------
    ValueError
        For a name that is not one of :data:`NAMESPACES`.

    Examples
    --------
    >>> import numpy as np, nvmathpy
    >>> with nvmathpy.patched("numpy.linalg"):
    ...     with nvmathpy.patched("numpy.linalg", "numpy.fft"):
    ...         inner = nvmathpy.patched_namespaces()
    ...     outer = nvmathpy.patched_namespaces()
    >>> inner, outer, nvmathpy.patched_namespaces()
    (('numpy.linalg', 'numpy.fft'), ('numpy.linalg',), ())
    """
    with _LOCK:
        held = []
        try:
            for namespace in _requested(namespaces, _available):
                held.append(_activate(namespace))
                held[-1].holders += 1
        except BaseException:
            _release(held)
            raise
    try:
        yield
    finally:
        with _LOCK:
            _release(held)


def _release(held: list[_Activation]) -> None:
    """Let go of the activations a context held; undo each that nothing holds any more (lock held)."""
    for active in reversed(held):
        active.holders -= 1
        if active.holders == 0 and not active.explicit and _ACTIVE.get(active.namespace) is active:
            del _ACTIVE[active.namespace]
            active.undo()


def patched_namespaces() -> tuple[str, ...]:
    """The namespaces patched now, in :data:`NAMESPACES`' order.

    Examples
    --------
    >>> import nvmathpy
    >>> nvmathpy.patched_namespaces()
    ()
    """
    with _LOCK:
        return tuple(name for name in NAMESPACES if name in _ACTIVE)
