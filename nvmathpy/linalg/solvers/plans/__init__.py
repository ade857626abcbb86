"""The solver plans: the shared base class and one module per plan (LU, Cholesky, QR, Eigh,
SVD, Lstsq, one-shot solve, triangular solve).
"""
