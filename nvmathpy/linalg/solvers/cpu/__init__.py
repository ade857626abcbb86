"""The CPU solver engine and every LAPACK/BLAS variant it chooses among: SciPy's LAPACK,
NumPy's OpenBLAS, recursive and look-ahead factorizations, blocked eigh, Householder
blocks, compiled and closed-form small solvers and the compiled C extension.
"""
