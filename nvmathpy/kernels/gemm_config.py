"""Tile configurations of the generated GEMM kernels (compile-time sizes) and the offered sets."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TileConfig", "SIMT_CONFIGS", "MMA_CONFIGS"]


@dataclass(frozen=True)
class TileConfig:
    """Compile-time tile sizes.

    Attributes
    ----------
    block_m, block_n, block_k : int
        The block's tile of ``D`` and the depth of one shared-memory k-tile.
    thread_m, thread_n : int
        ``"simt"``: each thread's register tile (threads = ``block_m*block_n/(thread_m*thread_n)``).
    warps_m, warps_n : int
        ``"wmma"``/``"twin"``: the warp grid (threads = ``32*warps_m*warps_n``); each warp's tile
        must be a multiple of 16 in both directions.
    """

    block_m: int
    block_n: int
    block_k: int
    thread_m: int = 4
    thread_n: int = 4
    warps_m: int = 2
    warps_n: int = 2

    def label(self, variant: str) -> str:
        """A short name, e.g. ``"64x64x16_t4x4"`` (simt) or ``"64x64x32_w2x2"``."""
        inner = f"t{self.thread_m}x{self.thread_n}" if variant == "simt" else f"w{self.warps_m}x{self.warps_n}"
        return f"{self.block_m}x{self.block_n}x{self.block_k}_{inner}"


#: Tile configurations the scalar kernel is offered with (the first is the default).
SIMT_CONFIGS = (
    TileConfig(64, 64, 16, 4, 4),
    TileConfig(128, 64, 16, 8, 4),
    TileConfig(64, 64, 32, 4, 4),
    TileConfig(128, 128, 8, 8, 8),
    TileConfig(32, 32, 16, 2, 2),
)
#: Tile configurations the tensor-core kernel (and its twin) is offered with.
MMA_CONFIGS = (
    TileConfig(64, 64, 32, warps_m=2, warps_n=2),
    TileConfig(128, 64, 32, warps_m=4, warps_n=2),
    TileConfig(64, 128, 32, warps_m=2, warps_n=4),
    TileConfig(128, 64, 32, warps_m=2, warps_n=2),
    TileConfig(64, 64, 16, warps_m=2, warps_n=2),
)
