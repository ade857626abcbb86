"""The CUDA solver engine: cuSOLVER/cuBLAS routes, layout arithmetic, tiny generated kernels,
device operands, and the CUDA plans and one-call functions.
"""
