"""PyTorch integration: nvmathpy's fused matmul as a ``torch.library`` custom operator.

Importing this module registers these operators in the ``nvmathpy`` namespace:

``torch.ops.nvmathpy.matmul(a, b, bias, epilogue, save_aux) -> (out, aux)``
    ``out = act(a @ b + bias)`` through :func:`nvmathpy.linalg.matmul` with a fused epilogue
    (``epilogue`` one of :data:`EPILOGUES`; ``"none"`` for the plain product). With
    ``save_aux`` the forward runs the ``*_aux`` epilogue and ``aux`` is what the backward
    needs: the boolean mask ``z > 0`` for relu, the pre-activation ``z`` for gelu (an empty
    tensor otherwise).
``torch.ops.nvmathpy.matmul_bgradb(a, b) -> (out, bgrad)``
    ``a @ b`` and, fused into the same call (the ``bgradb`` epilogue), ``b`` summed over its
    rows: the backward uses it to get the weight and bias gradients in one product.

``torch.ops.nvmathpy.matmul_custom(a, b, epilogue, inputs) -> out``
    ``out = f(a @ b, *inputs)`` for a custom (traced Python) epilogue ``f``. The operator's
    schema is static, so ``epilogue`` is the traced expression IR as text
    (:mod:`nvmathpy.kernels.ir_text`) and ``inputs`` the list of its input tensors in the
    IR's order (scalars as 0-d tensors). Its backward differentiates the IR symbolically
    (:mod:`nvmathpy.kernels.ir_grad`): with ``z = a @ b`` recomputed through the plain
    operator, ``dZ = grad * df/dz(z, inputs)``, then ``dA = dZ B^T`` and ``dB`` from one
    bgradb product whose column sums are also the gradient of any per-column input that
    enters like a bias (``df/dinput == df/dz``); other inputs get ``sum(grad * df/dinput)``
    reduced to their shape. The derivative expressions are evaluated with plain torch
    operations built from the IR: they run on the tensors' own device, trace under
    ``torch.compile``, and are themselves differentiable, so double backward works.

``torch.ops.nvmathpy.matmul_dact(dz, w, aux, activation, bgrad) -> (out, bgrad)``
    ``(dz @ w) * act'(z)`` from the forward's aux with the ``drelu``/``dgelu`` epilogues, and
    with ``bgrad`` its sum over rows (``*_bgrad``): the step of :class:`MLP`'s backward.

All have fake (meta) implementations, so ``torch.compile(fullgraph=True)`` traces through
them without a graph break, and ``matmul`` has an autograd formula (``register_autograd``):
for ``Y = act(X W + bias)`` with ``dZ = dY * act'(z)`` (from the saved aux),
``dX = dZ W^T`` and ``(dW, dbias) = (X^T dZ, sum_rows(dZ))`` from one ``bgradb`` product.

The user-facing pieces are :func:`matmul`, :class:`Linear` (one fused layer, per-op autograd)
and :class:`MLP` (a whole stack as one autograd node, so its backward can fuse ``act'`` and
the bias gradients into the products).
"""

from __future__ import annotations

from ..errors import MissingDependencyError

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise MissingDependencyError("nvmathpy.torch needs PyTorch: pip install torch") from exc

from ._api import Linear, matmul  # noqa: E402
from ._mlp import MLP  # noqa: E402
from ._ops import EPILOGUES  # noqa: E402

__all__ = ["EPILOGUES", "matmul", "Linear", "MLP"]
