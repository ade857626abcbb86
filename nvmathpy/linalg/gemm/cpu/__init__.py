"""The CPU matmul engine: BLAS through NumPy/SciPy, and the epilogue evaluators (NumPy,
numexpr, generated C) that apply an epilogue in one pass over the result.
"""
