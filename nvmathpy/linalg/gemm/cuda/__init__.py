"""The CUDA matmul engine: cuBLASLt (specification, descriptors, hot path, FP8), custom
epilogues as generated kernels, the tiny batched GEMM and NumPy operands run on a GPU.
"""
