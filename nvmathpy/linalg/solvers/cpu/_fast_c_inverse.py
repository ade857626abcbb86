"""The compiled extension's inverses (C, appended after :mod:`._fast_c_solve`, whose typedefs,
``with_rcond`` and ``PUT`` they use): ``inv_gen``, ``inv_pos``, ``inv_sym`` and ``inv_tri`` of
one matrix, with their condition estimates, as :func:`scipy.linalg.inv` makes them for a
general, Hermitian positive definite, symmetric/Hermitian and triangular matrix.
"""

from __future__ import annotations

__all__ = ["SOURCE", "METHODS"]

SOURCE = r"""
typedef void (*potri_t)(char *, int *, void *, int *, int *);
typedef void (*trtri_t)(char *, char *, int *, void *, int *, int *);
/* real: (norm, uplo, diag, n, a, lda, rcond, work, iwork, info); complex: ... work, rwork, info */
typedef void (*trcon_t)(char *, char *, char *, int *, void *, int *, void *, void *, void *, int *);
typedef void (*sytri_t)(char *, int *, void *, int *, int *, void *, int *);
typedef void (*getri_t)(int *, void *, int *, int *, void *, int *, int *);

/* Fill the triangle of the n x n Fortran-ordered matrix of dtype t at c that LAPACK left
   (below the diagonal where upper, else above) with the other one mirrored, conjugated where
   conj: the whole symmetric or Hermitian matrix. */
static void mirror(int t, char *c, npy_intp n, int upper, int conj) {
    npy_intp es = ITEMSIZE[t];
    for (npy_intp j = 0; j < n; ++j) {
        for (npy_intp i = j + 1; i < n; ++i) {
            char *stored = upper ? c + (i * n + j) * es : c + (j * n + i) * es;     /* (j, i) / (i, j) */
            char *other = upper ? c + (j * n + i) * es : c + (i * n + j) * es;
            PUT(other, stored)
            if (conj && t == 2) ((float *)other)[1] = -((float *)other)[1];
            if (conj && t == 3) ((double *)other)[1] = -((double *)other)[1];
        }
    }
}

/* The inverses' operands: a (args[0], see square_operand) and the flags args[1..count-1], each
   a truth value, in flags; the finiteness check (the last flag) done. Returns the dtype index,
   -1 to decline the call, -2 with an exception set. */
static int inverse_operands(PyObject *const *args, int count, npy_intp *n, int *cview, int *flags) {
    int t = square_operand(args[0], n, cview);
    if (t < 0) return -1;
    for (int i = 1; i < count; ++i)
        if ((flags[i - 1] = truth(args[i])) < 0) return -1;
    if (flags[count - 2] && !all_finite(t, PyArray_DATA((PyArrayObject *)args[0]), *n * *n)) {
        not_finite(NULL);
        return -2;
    }
    return t;
}

/* A new matrix of a's dtype, values and order (Fortran unless cview), which LAPACK overwrites
   with the inverse of a's Fortran view; NULL with an exception set. */
static PyArrayObject *copy_matrix(PyObject *o, int t, npy_intp n, int cview) {
    PyArrayObject *a = (PyArrayObject *)o;
    PyArrayObject *x = (PyArrayObject *)PyArray_EMPTY(2, PyArray_DIMS(a), PyArray_TYPE(a), !cview);
    if (x != NULL) memcpy(PyArray_BYTES(x), PyArray_DATA(a), (size_t)(n * n * ITEMSIZE[t]));
    return x;
}

/* copy_matrix's result, with work_bytes of workspace allocated in *work; NULL with an exception
   set (and nothing held) on failure. */
static PyArrayObject *inverse_start(PyObject *a, int t, npy_intp n, int cview, size_t work_bytes, char **work) {
    *work = (char *)big_malloc(work_bytes);
    if (*work == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    PyArrayObject *x = copy_matrix(a, t, n, cview);
    if (x == NULL) free(*work);
    return x;
}

/* (x, rcond) where info is 0; else x released and (None, 0.0) where info > 0 (singular, or
   not positive definite), NULL with LAPACK's complaint about routine's arguments below 0. */
static PyObject *inverse_result(PyArrayObject *x, int info, double rcond, const char *routine) {
    if (info == 0) return with_rcond(x, rcond);
    Py_DECREF(x);
    if (info > 0) return Py_BuildValue("(Od)", Py_None, 0.0);
    PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal %s", -info, routine);
    return NULL;
}

/* inv_tri(a, lower, check_finite) -> (inverse, rcond), or (None, 0.0) when singular: the
   inverse of the lower (else upper) triangular a (the other triangle is not read) through
   trtri and trcon, the other triangle zero, in a's order (a C-ordered a is inverted as its
   F-view A^T, triangular the other way) */
static PyObject *fast_inv_tri(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    npy_intp n;
    int cview, flags[2], t = nargs == 3 && ready ? inverse_operands(args, 3, &n, &cview, flags) : -1;
    if (t == -1) Py_RETURN_NOTIMPLEMENTED;
    if (t < 0) return NULL;
    /* work: 3n reals (2n complex for c, z), then n ints or reals */
    size_t work_bytes = (size_t)(3 * n * (DOUBLE[t] ? 8 : 4) * REALS[t]);
    char *work;
    PyArrayObject *x = inverse_start(args[0], t, n, cview, work_bytes + (size_t)(n * 8), &work);
    if (x == NULL) return NULL;
    char *c = PyArray_BYTES(x), uplo = (flags[0] ^ cview) ? 'L' : 'U', diag = 'N', norm = cview ? 'I' : '1';
    int ni = (int)n, info = 0, cinfo = 0;
    float rcond_f = 0;
    double rcond_d = 0;
    LAPACK(t, TRTRI, trtri_t)(&uplo, &diag, &ni, c, &ni, &info);
    if (info == 0) {    /* the estimate of the matrix itself, as SciPy's */
        LAPACK(t, TRCON, trcon_t)(&norm, &uplo, &diag, &ni, PyArray_DATA((PyArrayObject *)args[0]), &ni,
                                  DOUBLE[t] ? (void *)&rcond_d : (void *)&rcond_f, work, work + work_bytes, &cinfo);
        zero_triangle(c, n, ITEMSIZE[t], uplo == 'U');
    }
    free(work);
    return inverse_result(x, info, DOUBLE[t] ? rcond_d : (double)rcond_f, "trtri");
}

/* inv_pos(a, lower, check_finite) -> (inverse, rcond), or (None, 0.0) when a is not positive
   definite: the inverse of the Hermitian matrix the lower (else upper) triangle of a defines,
   through potrf, pocon (the 1-norm from that triangle) and potri, both triangles filled, in
   a's order (a C-ordered a is inverted as its F-view conj(A), whose inverse read in C order
   is A's) */
static PyObject *fast_inv_pos(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    npy_intp n;
    int cview, flags[2], t = nargs == 3 && ready ? inverse_operands(args, 3, &n, &cview, flags) : -1;
    if (t == -1) Py_RETURN_NOTIMPLEMENTED;
    if (t < 0) return NULL;
    /* work: 3n reals (2n complex for c, z), then n ints or reals */
    size_t work_bytes = (size_t)(3 * n * (DOUBLE[t] ? 8 : 4) * REALS[t]);
    char *work;
    PyArrayObject *x = inverse_start(args[0], t, n, cview, work_bytes + (size_t)(n * 8), &work);
    if (x == NULL) return NULL;
    char *c = PyArray_BYTES(x), uplo = (flags[0] ^ cview) ? 'L' : 'U';
    int ni = (int)n;
    double rcond;
    int info = factor_pos(t, uplo, ni, c, work, work + work_bytes, &rcond);
    if (info == 0) LAPACK(t, POTRI, potri_t)(&uplo, &ni, c, &ni, &info);
    if (info == 0) mirror(t, c, n, uplo == 'U', 1);
    free(work);
    return inverse_result(x, info, rcond, "potri");
}

/* inv_sym(a, lower, hermitian, check_finite) -> (inverse, rcond), or (None, 0.0) when singular:
   the inverse of the symmetric (hermitian and complex: Hermitian) matrix the lower (else upper)
   triangle of a defines, through sytrf/hetrf, sycon/hecon and sytri/hetri, both triangles
   filled, in a's order (the F-view of a C-ordered a holds A^T, or conj(A) where Hermitian: its
   inverse read in C order is A's), as SciPy's inv with assume_a="sym"/"her" */
static PyObject *fast_inv_sym(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    npy_intp n;
    int cview, flags[3], t = nargs == 4 && ready ? inverse_operands(args, 4, &n, &cview, flags) : -1;
    if (t == -1) Py_RETURN_NOTIMPLEMENTED;
    if (t < 0) return NULL;
    int hermitian = flags[1] && t >= 2, ni = (int)n;
    char uplo = (flags[0] ^ cview) ? 'L' : 'U';
    int lwork = sym_lwork(t, hermitian, uplo, ni);
    size_t work_bytes = (size_t)lwork * (size_t)ITEMSIZE[t], total = work_bytes + (size_t)(2 * n * 4 + n * 8);
    char *work;
    PyArrayObject *x = inverse_start(args[0], t, n, cview, total, &work);
    if (x == NULL) return NULL;
    int *ipiv = (int *)(work + work_bytes), *iwork = ipiv + n;
    char *c = PyArray_BYTES(x);
    double rcond;
    int info = factor_sym(t, hermitian, uplo, ni, c, ipiv, work, lwork, iwork, (char *)(iwork + n), &rcond);
    if (info == 0) ((sytri_t)LP[t][hermitian ? HETRI : SYTRI])(&uplo, &ni, c, &ni, ipiv, work, &info);
    if (info == 0) mirror(t, c, n, uplo == 'U', hermitian);
    free(work);
    return inverse_result(x, info, rcond, "sytri");
}

/* inv_gen(a, check_finite) -> (inverse, rcond), or (None, 0.0) when singular: getrf, gecon
   and getri (LAPACK's optimal workspace) of a's F-view (of A^T where a is C-ordered: its
   inverse read in C order is A's), in a's order, as SciPy's inv of a general matrix */
static PyObject *fast_inv_gen(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    npy_intp n;
    int cview, flags[1], t = nargs == 2 && ready ? inverse_operands(args, 2, &n, &cview, flags) : -1;
    if (t == -1) Py_RETURN_NOTIMPLEMENTED;
    if (t < 0) return NULL;
    int ni = (int)n, info = 0, lwork = -1;
    npy_intp rs = DOUBLE[t] ? 8 : 4;
    _Alignas(64) char query[32];
    LAPACK(t, GETRI, getri_t)(&ni, NULL, &ni, NULL, query, &lwork, &info);
    lwork = (int)(1.01 * lwork_of(t, query));      /* SciPy's margin over the query's answer */
    if (lwork < 4 * ni) lwork = 4 * ni;     /* also gecon's work (4n reals, 2n complex) */
    size_t work_bytes = (size_t)lwork * (size_t)ITEMSIZE[t], total = work_bytes + (size_t)(2 * n * rs + n * 4);
    char *work;
    PyArrayObject *x = inverse_start(args[0], t, n, cview, total, &work);
    if (x == NULL) return NULL;
    char *rwork = work + work_bytes, *c = PyArray_BYTES(x), norm = cview ? 'I' : '1';
    int *ipiv = (int *)(rwork + 2 * n * rs);
    float anorm_f = 0, rcond_f = 0;
    double anorm_d = 0, rcond_d = 0;
    if (DOUBLE[t]) anorm_d = LAPACK(t, LANGE, dlange_t)(&norm, &ni, &ni, c, &ni, work);
    else anorm_f = LAPACK(t, LANGE, slange_t)(&norm, &ni, &ni, c, &ni, work);
    LAPACK(t, GETRF, getrf_t)(&ni, &ni, c, &ni, ipiv, &info);
    if (info == 0) {
        int cinfo = 0;      /* ignored, as in solve_gen */
        if (DOUBLE[t]) LAPACK(t, GECON, gecon_t)(&norm, &ni, c, &ni, &anorm_d, &rcond_d, work, rwork, &cinfo);
        else LAPACK(t, GECON, gecon_t)(&norm, &ni, c, &ni, &anorm_f, &rcond_f, work, rwork, &cinfo);
        LAPACK(t, GETRI, getri_t)(&ni, c, &ni, ipiv, work, &lwork, &info);
    }
    free(work);
    return inverse_result(x, info, DOUBLE[t] ? rcond_d : (double)rcond_f, "getri");
}
"""

#: This group's entries of the extension's method table.
METHODS = r"""
    {"inv_tri", (PyCFunction)(void (*)(void))fast_inv_tri, METH_FASTCALL,
     "inv_tri(a, lower, check_finite): (inverse, rcond), (None, 0.0) if singular, or NotImplemented"},
    {"inv_gen", (PyCFunction)(void (*)(void))fast_inv_gen, METH_FASTCALL,
     "inv_gen(a, check_finite): (inverse, rcond), (None, 0.0) if singular, or NotImplemented"},
    {"inv_sym", (PyCFunction)(void (*)(void))fast_inv_sym, METH_FASTCALL,
     "inv_sym(a, lower, hermitian, check_finite): (inverse, rcond), (None, 0.0) if singular, or NotImplemented"},
    {"inv_pos", (PyCFunction)(void (*)(void))fast_inv_pos, METH_FASTCALL,
     "inv_pos(a, lower, check_finite): (inverse, rcond), (None, 0.0) if not positive definite, or NotImplemented"},
"""
