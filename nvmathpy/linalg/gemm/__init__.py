"""Matrix products with fused epilogues: the Matmul plan and the epilogue definitions at this
level, the CPU engine in :mod:`.cpu` and the CUDA engine in :mod:`.cuda` below.
"""
