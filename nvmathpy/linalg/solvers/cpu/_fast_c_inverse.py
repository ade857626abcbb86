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

/* inv_tri(a, lower, check_finite) -> (inverse, rcond), or (None, 0.0) when singular: the
   inverse of the lower (else upper) triangular a (the other triangle is not read) through
   trtri and trcon, the other triangle zero, in a's order */
static PyObject *fast_inv_tri(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0];
    npy_intp n = PyArray_NDIM(a) == 2 ? dim_within(a, 0, LU_MAXN) : -1;
    if (n < 0 || PyArray_DIMS(a)[1] != n) Py_RETURN_NOTIMPLEMENTED;
    int cview;              /* 1: a is C-ordered; its F-view is A^T, triangular the other way */
    if (PyArray_IS_F_CONTIGUOUS(a)) cview = 0;
    else if (PyArray_IS_C_CONTIGUOUS(a)) cview = 1;
    else Py_RETURN_NOTIMPLEMENTED;
    int lower = truth(args[1]), check = truth(args[2]);
    if (lower < 0 || check < 0) Py_RETURN_NOTIMPLEMENTED;
    if (check && !all_finite(t, PyArray_DATA(a), n * n)) return not_finite(NULL);
    PyArrayObject *x = (PyArrayObject *)PyArray_EMPTY(2, PyArray_DIMS(a), PyArray_TYPE(a), !cview);
    if (x == NULL) return NULL;
    npy_intp es = ITEMSIZE[t], rs = DOUBLE[t] ? 8 : 4;
    size_t work_bytes = (size_t)(3 * n * rs * REALS[t]), total = work_bytes + (size_t)(n * 8);
    _Alignas(64) char stack[STACK_BYTES];
    char *work = total <= STACK_BYTES ? stack : (char *)malloc(total);
    if (work == NULL) {
        Py_DECREF(x);
        return PyErr_NoMemory();
    }
    char *c = PyArray_BYTES(x);
    memcpy(c, PyArray_DATA(a), (size_t)(n * n * es));
    char uplo = (lower ^ cview) ? 'L' : 'U', diag = 'N', norm = cview ? 'I' : '1';
    int ni = (int)n, info = 0, cinfo = 0;
    float rcond_f = 0;
    double rcond_d = 0;
    LAPACK(t, TRTRI, trtri_t)(&uplo, &diag, &ni, c, &ni, &info);
    if (info == 0)      /* the estimate of the matrix itself, as SciPy's */
        LAPACK(t, TRCON, trcon_t)(&norm, &uplo, &diag, &ni, PyArray_DATA(a), &ni,
                                  DOUBLE[t] ? (void *)&rcond_d : (void *)&rcond_f, work, work + work_bytes, &cinfo);
    if (work != stack) free(work);
    if (info != 0) {
        Py_DECREF(x);
        if (info > 0) return Py_BuildValue("(Od)", Py_None, 0.0);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal trtri", -info);
        return NULL;
    }
    zero_triangle(c, n, es, uplo == 'U');
    return with_rcond(x, DOUBLE[t] ? rcond_d : (double)rcond_f);
}

/* inv_pos(a, lower, check_finite) -> (inverse, rcond), or (None, 0.0) when a is not positive
   definite: the inverse of the Hermitian matrix the lower (else upper) triangle of a defines,
   through potrf, pocon (the 1-norm from that triangle) and potri, both triangles filled, in
   a's order (a C-ordered a is inverted as its F-view conj(A), whose inverse read in C order
   is A's) */
static PyObject *fast_inv_pos(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0];
    npy_intp n = PyArray_NDIM(a) == 2 ? dim_within(a, 0, LU_MAXN) : -1;
    if (n < 0 || PyArray_DIMS(a)[1] != n) Py_RETURN_NOTIMPLEMENTED;
    int cview;
    if (PyArray_IS_F_CONTIGUOUS(a)) cview = 0;
    else if (PyArray_IS_C_CONTIGUOUS(a)) cview = 1;
    else Py_RETURN_NOTIMPLEMENTED;
    int lower = truth(args[1]), check = truth(args[2]);
    if (lower < 0 || check < 0) Py_RETURN_NOTIMPLEMENTED;
    if (check && !all_finite(t, PyArray_DATA(a), n * n)) return not_finite(NULL);
    PyArrayObject *x = (PyArrayObject *)PyArray_EMPTY(2, PyArray_DIMS(a), PyArray_TYPE(a), !cview);
    if (x == NULL) return NULL;
    npy_intp es = ITEMSIZE[t], rs = DOUBLE[t] ? 8 : 4;
    size_t work_bytes = (size_t)(3 * n * rs * REALS[t]), total = work_bytes + (size_t)(n * 8);
    _Alignas(64) char stack[STACK_BYTES];
    char *work = total <= STACK_BYTES ? stack : (char *)malloc(total);
    if (work == NULL) {
        Py_DECREF(x);
        return PyErr_NoMemory();
    }
    char *iwork = work + work_bytes, *c = PyArray_BYTES(x);
    memcpy(c, PyArray_DATA(a), (size_t)(n * n * es));
    char uplo = (lower ^ cview) ? 'L' : 'U', norm = '1';
    int ni = (int)n, info = 0, cinfo = 0;
    float anorm_f = 0, rcond_f = 0;
    double anorm_d = 0, rcond_d = 0;
    if (DOUBLE[t]) anorm_d = LAPACK(t, LANHE, dlansy_t)(&norm, &uplo, &ni, c, &ni, work);
    else anorm_f = LAPACK(t, LANHE, slansy_t)(&norm, &uplo, &ni, c, &ni, work);
    LAPACK(t, POTRF, potrf_t)(&uplo, &ni, c, &ni, &info);
    if (info == 0) {
        if (DOUBLE[t]) LAPACK(t, POCON, pocon_t)(&uplo, &ni, c, &ni, &anorm_d, &rcond_d, work, iwork, &cinfo);
        else LAPACK(t, POCON, pocon_t)(&uplo, &ni, c, &ni, &anorm_f, &rcond_f, work, iwork, &cinfo);
        LAPACK(t, POTRI, potri_t)(&uplo, &ni, c, &ni, &info);
    }
    if (work != stack) free(work);
    if (info != 0) {
        Py_DECREF(x);
        if (info > 0) return Py_BuildValue("(Od)", Py_None, 0.0);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal potri", -info);
        return NULL;
    }
    mirror(t, c, n, uplo == 'U', 1);
    return with_rcond(x, DOUBLE[t] ? rcond_d : (double)rcond_f);
}

typedef void (*sytri_t)(char *, int *, void *, int *, int *, void *, int *);

/* inv_sym(a, lower, hermitian, check_finite) -> (inverse, rcond), or (None, 0.0) when singular:
   the inverse of the symmetric (hermitian and complex: Hermitian) matrix the lower (else upper)
   triangle of a defines, through sytrf/hetrf, sycon/hecon and sytri/hetri, both triangles
   filled, in a's order, as SciPy's inv with assume_a="sym"/"her" */
static PyObject *fast_inv_sym(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0];
    npy_intp n = PyArray_NDIM(a) == 2 ? dim_within(a, 0, LU_MAXN) : -1;
    if (n < 0 || PyArray_DIMS(a)[1] != n) Py_RETURN_NOTIMPLEMENTED;
    int cview;
    if (PyArray_IS_F_CONTIGUOUS(a)) cview = 0;
    else if (PyArray_IS_C_CONTIGUOUS(a)) cview = 1;
    else Py_RETURN_NOTIMPLEMENTED;
    int lower = truth(args[1]), hermitian = truth(args[2]), check = truth(args[3]);
    if (lower < 0 || hermitian < 0 || check < 0) Py_RETURN_NOTIMPLEMENTED;
    hermitian = hermitian && t >= 2;
    if (check && !all_finite(t, PyArray_DATA(a), n * n)) return not_finite(NULL);
    /* the F-view of a C-ordered a holds A^T (A symmetric) or conj(A) (A Hermitian): its inverse
       read in C order is A's inverse */
    char uplo = (lower ^ cview) ? 'L' : 'U', norm = '1';
    int ni = (int)n, info = 0, lwork = -1, factor = hermitian ? HETRF : SYTRF;
    npy_intp es = ITEMSIZE[t], rs = DOUBLE[t] ? 8 : 4;
    _Alignas(64) char query[32];
    ((sytrf_t)LP[t][factor])(&uplo, &ni, NULL, &ni, NULL, query, &lwork, &info);
    lwork = lwork_of(t, query);
    if (lwork < 2 * ni) lwork = 2 * ni;     /* also sycon/hecon's and sytri's work (2n) */
    size_t work_bytes = (size_t)lwork * (size_t)es;
    char *work = (char *)malloc(work_bytes + (size_t)(2 * n * sizeof(int)) + (size_t)(n * rs));
    if (work == NULL) return PyErr_NoMemory();
    int *ipiv = (int *)(work + work_bytes), *iwork = ipiv + n;
    char *norm_work = (char *)(iwork + n);
    PyArrayObject *x = (PyArrayObject *)PyArray_EMPTY(2, PyArray_DIMS(a), PyArray_TYPE(a), !cview);
    if (x == NULL) {
        free(work);
        return NULL;
    }
    char *c = PyArray_BYTES(x);
    memcpy(c, PyArray_DATA(a), (size_t)(n * n * es));
    float anorm_f = 0, rcond_f = 0;
    double anorm_d = 0, rcond_d = 0;
    void *anorm = DOUBLE[t] ? (void *)&anorm_d : (void *)&anorm_f, *rcond = DOUBLE[t] ? (void *)&rcond_d : (void *)&rcond_f;
    int nf = hermitian ? LANHE : LANSY;
    if (DOUBLE[t]) anorm_d = ((dlansy_t)LP[t][nf])(&norm, &uplo, &ni, c, &ni, norm_work);
    else anorm_f = ((slansy_t)LP[t][nf])(&norm, &uplo, &ni, c, &ni, norm_work);
    ((sytrf_t)LP[t][factor])(&uplo, &ni, c, &ni, ipiv, work, &lwork, &info);
    if (info == 0) {
        int cinfo = 0;
        if (t < 2) LAPACK(t, SYCON, rsycon_t)(&uplo, &ni, c, &ni, ipiv, anorm, rcond, work, iwork, &cinfo);
        else ((csycon_t)LP[t][hermitian ? HECON : SYCON])(&uplo, &ni, c, &ni, ipiv, anorm, rcond, work, &cinfo);
        ((sytri_t)LP[t][hermitian ? HETRI : SYTRI])(&uplo, &ni, c, &ni, ipiv, work, &info);
    }
    free(work);
    if (info != 0) {
        Py_DECREF(x);
        if (info > 0) return Py_BuildValue("(Od)", Py_None, 0.0);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal sytri", -info);
        return NULL;
    }
    mirror(t, c, n, uplo == 'U', hermitian);
    return with_rcond(x, DOUBLE[t] ? rcond_d : (double)rcond_f);
}

typedef void (*getri_t)(int *, void *, int *, int *, void *, int *, int *);

/* inv_gen(a, check_finite) -> (inverse, rcond), or (None, 0.0) when singular: getrf, gecon
   and getri (LAPACK's optimal workspace) of a's F-view (of A^T where a is C-ordered: its
   inverse read in C order is A's), in a's order, as SciPy's inv of a general matrix */
static PyObject *fast_inv_gen(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0];
    npy_intp n = PyArray_NDIM(a) == 2 ? dim_within(a, 0, LU_MAXN) : -1;
    if (n < 0 || PyArray_DIMS(a)[1] != n) Py_RETURN_NOTIMPLEMENTED;
    int cview;
    if (PyArray_IS_F_CONTIGUOUS(a)) cview = 0;
    else if (PyArray_IS_C_CONTIGUOUS(a)) cview = 1;
    else Py_RETURN_NOTIMPLEMENTED;
    int check = truth(args[1]);
    if (check < 0) Py_RETURN_NOTIMPLEMENTED;
    if (check && !all_finite(t, PyArray_DATA(a), n * n)) return not_finite(NULL);
    int ni = (int)n, info = 0, lwork = -1;
    npy_intp es = ITEMSIZE[t], rs = DOUBLE[t] ? 8 : 4;
    _Alignas(64) char query[32];
    LAPACK(t, GETRI, getri_t)(&ni, NULL, &ni, NULL, query, &lwork, &info);
    lwork = (int)(1.01 * lwork_of(t, query));      /* SciPy's margin over the query's answer */
    if (lwork < 4 * ni) lwork = 4 * ni;     /* also gecon's work (4n reals, 2n complex) */
    size_t work_bytes = (size_t)lwork * (size_t)es;
    char *work = (char *)malloc(work_bytes + (size_t)(2 * n * rs) + (size_t)(n * sizeof(int)));
    if (work == NULL) return PyErr_NoMemory();
    char *rwork = work + work_bytes;
    int *ipiv = (int *)(rwork + 2 * n * rs);
    PyArrayObject *x = (PyArrayObject *)PyArray_EMPTY(2, PyArray_DIMS(a), PyArray_TYPE(a), !cview);
    if (x == NULL) {
        free(work);
        return NULL;
    }
    char *c = PyArray_BYTES(x), norm = cview ? 'I' : '1';
    memcpy(c, PyArray_DATA(a), (size_t)(n * n * es));
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
    if (info != 0) {
        Py_DECREF(x);
        if (info > 0) return Py_BuildValue("(Od)", Py_None, 0.0);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal getri", -info);
        return NULL;
    }
    return with_rcond(x, DOUBLE[t] ? rcond_d : (double)rcond_f);
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
