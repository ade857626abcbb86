"""The compiled extension's solves (C, appended to :data:`._fast_c_base.SOURCE`): ``cho_solve``,
``lu_solve``, general, positive definite and symmetric/Hermitian ``solve`` (``solve_gen``,
``solve_pos``, ``solve_sym``, with their condition estimates; ``solve_plain``, NumPy's general solve
of one matrix, without), SciPy's detected ``structure``
of a matrix, ``lu`` of one small matrix, and ``lu_unpack`` (``lu``'s result from ``getrf``'s factors), with
:func:`scipy.linalg`'s conventions (see :mod:`nvmathpy.linalg.lapack`).
"""

from __future__ import annotations

__all__ = ["SOURCE", "METHODS"]

SOURCE = r"""
typedef void (*potrs_t)(char *, int *, int *, void *, int *, void *, int *, int *);
typedef void (*getrs_t)(char *, int *, int *, void *, int *, int *, void *, int *, int *);
typedef void (*getrf_t)(int *, int *, void *, int *, int *, int *);
typedef float (*slange_t)(char *, int *, int *, void *, int *, void *);
typedef double (*dlange_t)(char *, int *, int *, void *, int *, void *);
/* real: (norm, n, a, lda, anorm, rcond, work, iwork, info); complex: ... work, rwork, info */
typedef void (*gecon_t)(char *, int *, void *, int *, void *, void *, void *, void *, int *);
typedef void (*potrf_t)(char *, int *, void *, int *, int *);
typedef float (*slansy_t)(char *, char *, int *, void *, int *, void *);
typedef double (*dlansy_t)(char *, char *, int *, void *, int *, void *);
/* real: (uplo, n, a, lda, anorm, rcond, work, iwork, info); complex: ... work, rwork, info */
typedef void (*pocon_t)(char *, int *, void *, int *, void *, void *, void *, void *, int *);

/* (x, rcond), stealing the reference to x; NULL (exception set, x released) on failure */
static PyObject *with_rcond(PyArrayObject *x, double rcond) {
    PyObject *r = PyFloat_FromDouble(rcond);
    PyObject *out = r == NULL ? NULL : PyTuple_New(2);
    if (out == NULL) {
        Py_DECREF(x);
        Py_XDECREF(r);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, (PyObject *)x);
    PyTuple_SET_ITEM(out, 1, r);
    return out;
}

/* cho_solve(c, b, lower, check_finite) */
static PyObject *fast_cho_solve(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !ready) Py_RETURN_NOTIMPLEMENTED;
    npy_intp n;
    /* cview: c is C-ordered; its F-view c^T is the other triangle's factor of conj(A) */
    int cview, t = square_operand(args[0], &n, &cview);
    if (t < 0 || kind_of(args[1]) != t) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *c = (PyArrayObject *)args[0], *b = (PyArrayObject *)args[1];
    npy_intp k = rhs_columns(b, n);
    int lower = truth(args[2]), check = truth(args[3]);
    if (k < 0 || lower < 0 || check < 0) Py_RETURN_NOTIMPLEMENTED;
    if (check && !all_finite(t, PyArray_DATA(c), n * n)) return not_finite(NULL);
    PyArrayObject *x = copy_rhs(b, t, n, k);
    if (x == NULL) return NULL;
    if (check && !all_finite(t, PyArray_DATA(x), n * k)) return not_finite((PyObject *)x);
    char uplo = (lower ^ cview) ? 'L' : 'U';
    int ni = (int)n, nrhs = (int)k, info = 0;
    if (cview) conjugate(t, PyArray_DATA(x), n * k);    /* conj(A) conj(x) = conj(b) */
    LAPACK(t, POTRS, potrs_t)(&uplo, &ni, &nrhs, PyArray_DATA(c), &ni, PyArray_DATA(x), &ni, &info);
    if (cview) conjugate(t, PyArray_DATA(x), n * k);
    if (info != 0) {
        Py_DECREF(x);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal potrs", -info);
        return NULL;
    }
    return (PyObject *)x;
}

/* lu_solve(lu, piv, b, trans, check_finite) */
static PyObject *fast_lu_solve(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0 || kind_of(args[2]) != t || !PyArray_CheckExact(args[1])) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *lu = (PyArrayObject *)args[0], *piv = (PyArrayObject *)args[1], *b = (PyArrayObject *)args[2];
    npy_intp n = square_order(lu);
    if (n < 0 || !PyArray_IS_F_CONTIGUOUS(lu)) Py_RETURN_NOTIMPLEMENTED;
    npy_intp k = rhs_columns(b, n);
    if (k < 0) Py_RETURN_NOTIMPLEMENTED;
    if (PyArray_NDIM(piv) != 1 || PyArray_DIMS(piv)[0] != n || PyArray_TYPE(piv) != NPY_INT32
            || !PyArray_ISALIGNED(piv) || !PyArray_ISNOTSWAPPED(piv)) Py_RETURN_NOTIMPLEMENTED;
    if (!PyLong_CheckExact(args[3])) Py_RETURN_NOTIMPLEMENTED;
    long trans = PyLong_AsLong(args[3]);
    if (trans < 0 || trans > 2) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    int check = truth(args[4]);
    if (check < 0) Py_RETURN_NOTIMPLEMENTED;
    int ipiv[MAXN];
    const char *p = PyArray_BYTES(piv);
    npy_intp ps = PyArray_STRIDES(piv)[0];
    for (npy_intp i = 0; i < n; ++i) {
        npy_int32 v = *(const npy_int32 *)(p + i * ps);
        if (v < 0 || v >= n) Py_RETURN_NOTIMPLEMENTED;
        ipiv[i] = v + 1;
    }
    PyArrayObject *x = copy_rhs(b, t, n, k);
    if (x == NULL) return NULL;
    if (check && !all_finite(t, PyArray_DATA(x), n * k)) return not_finite((PyObject *)x);
    char tr = trans == 0 ? 'N' : (trans == 1 ? 'T' : 'C');
    int ni = (int)n, nrhs = (int)k, info = 0;
    LAPACK(t, GETRS, getrs_t)(&tr, &ni, &nrhs, PyArray_DATA(lu), &ni, ipiv, PyArray_DATA(x), &ni, &info);
    if (info < 0) {
        Py_DECREF(x);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal gesv|posv", -info);
        return NULL;
    }
    return (PyObject *)x;
}

/* a x = b (a^T x = b when transposed) for a square a of dtype index t, order n, C-ordered when
   tview (its F-view, A^T, is factored), and b the right-hand sides (1-D or 2-D of n rows, same
   dtype): LU with partial pivoting (getrf, getrs) on a copy of a. With condition, *rcond is
   gecon's estimate in the norm of the factored matrix (lange's, before the LU). Returns the new
   x, Py_None (a new reference) when a pivot is exactly zero, NULL with an exception set. */
static PyObject *lu_solve_copy(int t, PyArrayObject *a, PyArrayObject *b, npy_intp n, npy_intp k, int tview,
                               int transposed, int check, int condition, double *rcond) {
    if (check && !all_finite(t, PyArray_DATA(a), n * n)) return not_finite(NULL);
    PyArrayObject *x = copy_rhs(b, t, n, k);
    if (x == NULL) return NULL;
    if (check && !all_finite(t, PyArray_DATA(x), n * k)) return not_finite((PyObject *)x);

    /* workspace: the LU factors, then (with condition) 4n reals of gecon work (2n complex for
       c/z) and 2n reals or n ints of rwork/iwork (lange's work reuses the gecon work), n pivots */
    npy_intp es = ITEMSIZE[t], rs = DOUBLE[t] ? 8 : 4;
    size_t lu_bytes = (size_t)(n * n * es), work_bytes = condition ? (size_t)(4 * n * rs) : 0;
    size_t rwork_bytes = condition ? (size_t)(2 * n * rs) : 0;
    size_t total = lu_bytes + work_bytes + rwork_bytes + (size_t)n * sizeof(int);
    _Alignas(64) char stack[STACK_BYTES];
    char *buffer = total <= STACK_BYTES ? stack : (char *)big_malloc(total);
    if (buffer == NULL) {
        Py_DECREF(x);
        return PyErr_NoMemory();
    }
    char *lu = buffer, *work = buffer + lu_bytes, *rwork = work + work_bytes;
    int *ipiv = (int *)(rwork + rwork_bytes);
    memcpy(lu, PyArray_DATA(a), lu_bytes);
    char norm = tview ? 'I' : '1';
    int ni = (int)n, nrhs = (int)k, info = 0;
    float anorm_f = 0, rcond_f = 0;
    double anorm_d = 0, rcond_d = 0;
    if (condition) {
        if (DOUBLE[t]) anorm_d = LAPACK(t, LANGE, dlange_t)(&norm, &ni, &ni, lu, &ni, work);
        else anorm_f = LAPACK(t, LANGE, slange_t)(&norm, &ni, &ni, lu, &ni, work);
    }
    LAPACK(t, GETRF, getrf_t)(&ni, &ni, lu, &ni, ipiv, &info);
    if (info > 0) {
        if (buffer != stack) free(buffer);
        Py_DECREF(x);
        Py_RETURN_NONE;
    }
    if (info == 0 && condition) {
        /* gecon's info is ignored, as solve_general does: a NaN/Inf norm (check_finite off)
           makes it report -5 and set rcond itself */
        int cinfo = 0;
        if (DOUBLE[t]) LAPACK(t, GECON, gecon_t)(&norm, &ni, lu, &ni, &anorm_d, &rcond_d, work, rwork, &cinfo);
        else LAPACK(t, GECON, gecon_t)(&norm, &ni, lu, &ni, &anorm_f, &rcond_f, work, rwork, &cinfo);
        *rcond = DOUBLE[t] ? rcond_d : (double)rcond_f;
    }
    if (info == 0) {
        char tr = (tview ^ transposed) ? 'T' : 'N';
        LAPACK(t, GETRS, getrs_t)(&tr, &ni, &nrhs, lu, &ni, ipiv, PyArray_DATA(x), &ni, &info);
    }
    if (buffer != stack) free(buffer);
    if (info < 0) {
        Py_DECREF(x);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal gesv", -info);
        return NULL;
    }
    return (PyObject *)x;
}

/* The dtype index of a square a (args[0]: order *n, *tview when C-ordered) and right-hand
   sides b (args[1]: *k columns) of a general solve, or -1 where the compiled solve declines them */
static int general_operands(PyObject *const *args, npy_intp *n, int *tview, npy_intp *k) {
    int t = square_operand(args[0], n, tview);
    if (t < 0 || kind_of(args[1]) != t) return -1;
    *k = rhs_columns((PyArrayObject *)args[1], *n);
    return *k < 0 ? -1 : t;
}

/* solve_gen(a, b, transposed, check_finite) -> (x, rcond), or (None, 0.0) when singular */
static PyObject *fast_solve_gen(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !ready) Py_RETURN_NOTIMPLEMENTED;
    npy_intp n, k;
    int tview, t = general_operands(args, &n, &tview, &k);
    int transposed = truth(args[2]), check = truth(args[3]);
    if (t < 0 || transposed < 0 || check < 0 || (transposed && t >= 2)) Py_RETURN_NOTIMPLEMENTED;
    double rcond = 0.0;
    PyObject *x = lu_solve_copy(t, (PyArrayObject *)args[0], (PyArrayObject *)args[1], n, k, tview, transposed,
                                check, 1, &rcond);
    if (x == Py_None) {
        Py_DECREF(x);
        return Py_BuildValue("(Od)", Py_None, 0.0);
    }
    return x == NULL ? NULL : with_rcond((PyArrayObject *)x, rcond);
}

/* solve_plain(a, b) -> x, or None when singular: numpy.linalg.solve of one matrix (no
   condition estimate, no finiteness check) */
static PyObject *fast_solve_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !ready) Py_RETURN_NOTIMPLEMENTED;
    npy_intp n, k;
    int tview, t = general_operands(args, &n, &tview, &k);
    if (t < 0) Py_RETURN_NOTIMPLEMENTED;
    return lu_solve_copy(t, (PyArrayObject *)args[0], (PyArrayObject *)args[1], n, k, tview, 0, 0, 0, NULL);
}

typedef void (*sytrf_t)(char *, int *, void *, int *, int *, void *, int *, int *);
/* real: (uplo, n, a, lda, ipiv, anorm, rcond, work, iwork, info); complex: no iwork */
typedef void (*rsycon_t)(char *, int *, void *, int *, int *, void *, void *, void *, int *, int *);
typedef void (*csycon_t)(char *, int *, void *, int *, int *, void *, void *, void *, int *);

/* The 1-norm of the Hermitian (hermitian) or symmetric n x n Fortran matrix in triangle uplo of
   c (lanhe/lansy; work: n reals), as a double. */
static double norm_of_triangle(int t, int hermitian, char uplo, int n, char *c, char *work) {
    char norm = '1';
    int f = hermitian ? LANHE : LANSY;
    return DOUBLE[t] ? ((dlansy_t)LP[t][f])(&norm, &uplo, &n, c, &n, work)
                     : (double)((slansy_t)LP[t][f])(&norm, &uplo, &n, c, &n, work);
}

/* Cholesky of the Hermitian matrix in triangle uplo of the n x n Fortran matrix c, in place
   (potrf), and pocon's reciprocal condition estimate from its 1-norm in *rcond (0 where potrf
   fails). work: 3n reals (c, z: 2n complex), iwork: n ints or reals. Returns potrf's info. */
static int factor_pos(int t, char uplo, int n, char *c, char *work, char *iwork, double *rcond) {
    double anorm_d = norm_of_triangle(t, 1, uplo, n, c, work);
    float anorm_f = (float)anorm_d, rcond_f = 0;
    int info = 0, cinfo = 0;        /* pocon's info is ignored, as gecon's in solve_gen */
    *rcond = 0;
    LAPACK(t, POTRF, potrf_t)(&uplo, &n, c, &n, &info);
    if (info != 0) return info;
    if (DOUBLE[t]) LAPACK(t, POCON, pocon_t)(&uplo, &n, c, &n, &anorm_d, rcond, work, iwork, &cinfo);
    else LAPACK(t, POCON, pocon_t)(&uplo, &n, c, &n, &anorm_f, &rcond_f, work, iwork, &cinfo);
    if (!DOUBLE[t]) *rcond = rcond_f;
    return 0;
}

/* Bunch-Kaufman of the symmetric (hermitian and complex: Hermitian) matrix in triangle uplo of
   the n x n Fortran matrix c, in place (sytrf/hetrf, lwork elements of work, at least 2n), and
   sycon/hecon's reciprocal condition estimate in *rcond. ipiv, iwork: n ints; norm_work: n
   reals. Returns sytrf/hetrf's info. */
static int factor_sym(int t, int hermitian, char uplo, int n, char *c, int *ipiv, char *work, int lwork,
                      int *iwork, char *norm_work, double *rcond) {
    double anorm_d = norm_of_triangle(t, hermitian, uplo, n, c, norm_work);
    float anorm_f = (float)anorm_d, rcond_f = 0;
    void *anorm = DOUBLE[t] ? (void *)&anorm_d : (void *)&anorm_f;
    void *estimate = DOUBLE[t] ? (void *)rcond : (void *)&rcond_f;
    int info = 0, cinfo = 0;        /* sycon's info is ignored, as gecon's in solve_gen */
    *rcond = 0;
    ((sytrf_t)LP[t][hermitian ? HETRF : SYTRF])(&uplo, &n, c, &n, ipiv, work, &lwork, &info);
    if (info != 0) return info;
    if (t < 2) LAPACK(t, SYCON, rsycon_t)(&uplo, &n, c, &n, ipiv, anorm, estimate, work, iwork, &cinfo);
    else ((csycon_t)LP[t][hermitian ? HECON : SYCON])(&uplo, &n, c, &n, ipiv, anorm, estimate, work, &cinfo);
    if (!DOUBLE[t]) *rcond = rcond_f;
    return 0;
}

/* The workspace sytrf/hetrf asks for at order n (at least 2n elements: sycon's and sytri's). */
static int sym_lwork(int t, int hermitian, char uplo, int n) {
    _Alignas(64) char query[32];
    int lwork = -1, info = 0;
    ((sytrf_t)LP[t][hermitian ? HETRF : SYTRF])(&uplo, &n, NULL, &n, NULL, query, &lwork, &info);
    lwork = lwork_of(t, query);
    return lwork < 2 * n ? 2 * n : lwork;
}

/* solve_pos(a, b, lower, check_finite) -> (x, rcond), or (None, 0.0) when a is not positive
   definite: the Hermitian matrix the lower (else upper) triangle of a defines, through potrf,
   pocon (the 1-norm from that triangle, lansy/lanhe) and potrs, as SciPy's solve with
   assume_a="pos" */
static PyObject *fast_solve_pos(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !ready) Py_RETURN_NOTIMPLEMENTED;
    npy_intp n;
    /* cview: a is C-ordered; its F-view a^T holds conj(A) in the other triangle */
    int cview, t = square_operand(args[0], &n, &cview);
    if (t < 0 || kind_of(args[1]) != t) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0], *b = (PyArrayObject *)args[1];
    npy_intp k = rhs_columns(b, n);
    int lower = truth(args[2]), check = truth(args[3]);
    if (k < 0 || lower < 0 || check < 0) Py_RETURN_NOTIMPLEMENTED;
    if (check && !all_finite(t, PyArray_DATA(a), n * n)) return not_finite(NULL);
    PyArrayObject *x = copy_rhs(b, t, n, k);
    if (x == NULL) return NULL;
    if (check && !all_finite(t, PyArray_DATA(x), n * k)) return not_finite((PyObject *)x);

    /* workspace: the factor, 3n reals of lansy/pocon work (2n complex for c/z), n ints or reals of iwork/rwork */
    npy_intp es = ITEMSIZE[t], rs = DOUBLE[t] ? 8 : 4;
    size_t c_bytes = (size_t)(n * n * es), work_bytes = (size_t)(3 * n * rs * REALS[t]), iwork_bytes = (size_t)(n * 8);
    size_t total = c_bytes + work_bytes + iwork_bytes;
    _Alignas(64) char stack[STACK_BYTES];
    char *buffer = total <= STACK_BYTES ? stack : (char *)big_malloc(total);
    if (buffer == NULL) {
        Py_DECREF(x);
        return PyErr_NoMemory();
    }
    char *c = buffer, *work = buffer + c_bytes, *iwork = work + work_bytes;
    memcpy(c, PyArray_DATA(a), c_bytes);
    char uplo = (lower ^ cview) ? 'L' : 'U';
    int ni = (int)n, nrhs = (int)k;
    double rcond;
    int info = factor_pos(t, uplo, ni, c, work, iwork, &rcond);
    if (info > 0) {
        if (buffer != stack) free(buffer);
        Py_DECREF(x);
        return Py_BuildValue("(Od)", Py_None, 0.0);
    }
    if (info == 0) {
        if (cview) conjugate(t, PyArray_DATA(x), n * k);    /* conj(A) conj(x) = conj(b) */
        LAPACK(t, POTRS, potrs_t)(&uplo, &ni, &nrhs, c, &ni, PyArray_DATA(x), &ni, &info);
        if (cview) conjugate(t, PyArray_DATA(x), n * k);
    }
    if (buffer != stack) free(buffer);
    if (info < 0) {
        Py_DECREF(x);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal posv", -info);
        return NULL;
    }
    return with_rcond(x, rcond);
}

typedef void (*sytrs_t)(char *, int *, int *, void *, int *, int *, void *, int *, int *);

/* solve_sym(a, b, lower, hermitian, check_finite) -> (x, rcond), or (None, 0.0) when singular:
   the symmetric (hermitian and complex: Hermitian) matrix the lower (else upper) triangle of a
   defines, through sytrf/hetrf with LAPACK's optimal workspace, sycon/hecon (the 1-norm from
   that triangle) and sytrs/hetrs, as SciPy's solve with assume_a="sym"/"her" */
static PyObject *fast_solve_sym(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !ready) Py_RETURN_NOTIMPLEMENTED;
    npy_intp n;
    int cview, t = square_operand(args[0], &n, &cview);
    if (t < 0 || kind_of(args[1]) != t) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0], *b = (PyArrayObject *)args[1];
    npy_intp k = rhs_columns(b, n);
    int lower = truth(args[2]), hermitian = truth(args[3]), check = truth(args[4]);
    if (k < 0 || lower < 0 || hermitian < 0 || check < 0) Py_RETURN_NOTIMPLEMENTED;
    hermitian = hermitian && t >= 2;    /* a real symmetric matrix is Hermitian: the sy routines */
    if (check && !all_finite(t, PyArray_DATA(a), n * n)) return not_finite(NULL);
    PyArrayObject *x = copy_rhs(b, t, n, k);
    if (x == NULL) return NULL;
    if (check && !all_finite(t, PyArray_DATA(x), n * k)) return not_finite((PyObject *)x);
    /* the F-view of a C-ordered a is A^T: A itself where symmetric, conj(A) where Hermitian */
    char uplo = (lower ^ cview) ? 'L' : 'U';
    int ni = (int)n, nrhs = (int)k, lwork = sym_lwork(t, hermitian, uplo, ni);
    npy_intp es = ITEMSIZE[t], rs = DOUBLE[t] ? 8 : 4;
    size_t c_bytes = (size_t)(n * n * es), work_bytes = (size_t)lwork * (size_t)es;
    char *buffer = (char *)big_malloc(c_bytes + work_bytes + (size_t)(2 * n * sizeof(int)) + (size_t)(n * rs));
    if (buffer == NULL) {
        Py_DECREF(x);
        return PyErr_NoMemory();
    }
    char *c = buffer, *work = buffer + c_bytes;
    int *ipiv = (int *)(work + work_bytes), *iwork = ipiv + n;
    memcpy(c, PyArray_DATA(a), c_bytes);
    double rcond;
    int info = factor_sym(t, hermitian, uplo, ni, c, ipiv, work, lwork, iwork, (char *)(iwork + n), &rcond);
    if (info == 0) {
        int flip = cview && hermitian;      /* conj(A) conj(x) = conj(b) */
        if (flip) conjugate(t, PyArray_DATA(x), n * k);
        ((sytrs_t)LP[t][hermitian ? HETRS : SYTRS])(&uplo, &ni, &nrhs, c, &ni, ipiv, PyArray_DATA(x), &ni, &info);
        if (flip) conjugate(t, PyArray_DATA(x), n * k);
    }
    free(buffer);
    if (info > 0) {
        Py_DECREF(x);
        return Py_BuildValue("(Od)", Py_None, 0.0);
    }
    if (info < 0) {
        Py_DECREF(x);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal sysv", -info);
        return NULL;
    }
    return with_rcond(x, rcond);
}

/* One es-byte element from s to d. */
#define PUT(d, s)                                                                              \
    switch (es) {                                                                              \
        case 4: *(npy_uint32 *)(d) = *(const npy_uint32 *)(s); break;                          \
        case 8: *(npy_uint64 *)(d) = *(const npy_uint64 *)(s); break;                          \
        default: *(pair_t *)(d) = *(const pair_t *)(s);                                        \
    }

/* Element (i, j) of the 2-D array at p with byte strides s0, s1, as real and imaginary part. */
#define ENTRY(i, j, re, im)                                                                    \
    do {                                                                                       \
        const char *q_ = p + (i) * s0 + (j) * s1;                                              \
        if (DOUBLE[t]) { re = ((const double *)q_)[0]; im = t >= 2 ? ((const double *)q_)[1] : 0; } \
        else { re = ((const float *)q_)[0]; im = t >= 2 ? ((const float *)q_)[1] : 0; }       \
    } while (0)

/* structure(a) -> "diagonal", "lower", "upper", "tri" (order 4 and more), "her" (complex),
   "sym" or "gen": SciPy 1.17's detection of a square 2-D matrix (exact comparisons: a NaN
   entry is not equal to itself), or NotImplemented */
/* fast_structure's walk for a real dtype T: no imaginary parts, no dtype test per entry */
#define REAL_STRUCTURE(T)                                                                      \
    for (npy_intp i0 = 0; i0 < n; i0 += TILE)                                                  \
        for (npy_intp j0 = 0; j0 <= i0; j0 += TILE)                                            \
            for (npy_intp i = i0; i < TILE_END(i0, n); ++i)                                    \
                for (npy_intp j = j0; j < TILE_END(j0, n) && j < i; ++j) {                     \
                    T x = *(const T *)(p + i * s0 + j * s1), y = *(const T *)(p + j * s0 + i * s1); \
                    npy_intp d = i - j;                                                        \
                    below = x != 0 && d > below ? d : below;                                   \
                    above = y != 0 && d > above ? d : above;                                   \
                    symmetric &= x == y;                                                       \
                }

static PyObject *fast_structure(PyObject *self, PyObject *arg) {
    int t = kind_of(arg);
    if (t < 0 || PyArray_NDIM((PyArrayObject *)arg) != 2) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)arg;
    npy_intp n = PyArray_DIMS(a)[0];
    if (n != PyArray_DIMS(a)[1]) Py_RETURN_NOTIMPLEMENTED;
    const char *p = PyArray_BYTES(a);
    npy_intp s0 = PyArray_STRIDES(a)[0], s1 = PyArray_STRIDES(a)[1], below = 0, above = 0;
    int symmetric = 1, hermitian = t >= 2;
    if (t == 1) REAL_STRUCTURE(double)
    else if (t == 0) REAL_STRUCTURE(float)
    else for (npy_intp i0 = 0; i0 < n; i0 += TILE)      /* in tiles: an entry and its mirror, both in cache */
        for (npy_intp j0 = 0; j0 <= i0; j0 += TILE)
            for (npy_intp i = i0; i < TILE_END(i0, n); ++i) {
                double re, im, tr, ti;
                if (hermitian && j0 == i0) {
                    ENTRY(i, i, re, im);
                    hermitian = re == re && im == 0;        /* equal to its conjugate (a NaN is not) */
                }
                for (npy_intp j = j0; j < TILE_END(j0, n) && j < i; ++j) {
                    ENTRY(i, j, re, im);            /* below the diagonal */
                    ENTRY(j, i, tr, ti);            /* its mirror above */
                    if ((re != 0 || im != 0) && i - j > below) below = i - j;
                    if ((tr != 0 || ti != 0) && i - j > above) above = i - j;
                    symmetric &= re == tr && im == ti;
                    hermitian &= re == tr && im == -ti;
                }
            }
    const char *name = below == 0 && above == 0 ? "diagonal" : above == 0 ? "lower" : below == 0 ? "upper"
                       : below <= 1 && above <= 1 && n > 3 ? "tri" : hermitian ? "her" : symmetric ? "sym" : "gen";
    return PyUnicode_InternFromString(name);
}

/* scipy.linalg.lu's tuple from getrf's factors of an m x n matrix (m * n > 1), Fortran-ordered
   at f, of dtype t (NumPy type `type`), and their k = min(m, n) pivots ipiv, 1-based (LAPACK's,
   base 1) or 0-based (f2py's, base 0), each in range: (p, l, u), (pl, u) or (perm, l, u), with
   C-ordered l and u; NULL with an exception set */
static PyObject *lu_tuple(int t, int type, const char *f, npy_intp m, npy_intp n, const int *ipiv, int base,
                          int permute, int indices) {
    npy_intp k = m < n ? m : n, es = ITEMSIZE[t];
    PyArrayObject *l = NULL, *u = NULL, *p = NULL;
    int *perm = (int *)malloc((size_t)m * sizeof(int));
    if (perm == NULL) return PyErr_NoMemory();
    for (npy_intp i = 0; i < m; ++i) perm[i] = (int)i;      /* row i of P A is row perm[i] of A */
    for (npy_intp i = 0; i < k; ++i) {
        int j = ipiv[i] - base, s = perm[i];
        perm[i] = perm[j];
        perm[j] = s;
    }
    npy_intp ldims[2] = {m, k}, udims[2] = {k, n};
    l = (PyArrayObject *)PyArray_ZEROS(2, ldims, type, 0);
    u = (PyArrayObject *)PyArray_ZEROS(2, udims, type, 0);
    if (l == NULL || u == NULL) goto fail;
    char *lp = PyArray_BYTES(l), *up = PyArray_BYTES(u);
#define L_ROW(i) (lp + (permute ? perm[i] : (i)) * k * es)     /* permute_l: row i of L goes to row perm[i] */
    for (npy_intp i0 = 0; i0 < m; i0 += TILE)       /* L's strict lower triangle, in tiles */
        for (npy_intp j0 = 0; j0 < k && j0 < i0 + TILE - 1; j0 += TILE)
            for (npy_intp i = i0; i < TILE_END(i0, m); ++i) {
                char *row = L_ROW(i);
                for (npy_intp j = j0; j < TILE_END(j0, k) && j < i; ++j) PUT(row + j * es, f + (i + j * m) * es)
            }
    for (npy_intp i = 0; i < k; ++i) {
        if (DOUBLE[t]) *(double *)(L_ROW(i) + i * es) = 1.0;
        else *(float *)(L_ROW(i) + i * es) = 1.0f;
    }
#undef L_ROW
    for (npy_intp j0 = 0; j0 < n; j0 += TILE)       /* U: the upper triangle of the first k rows */
        for (npy_intp i0 = 0; i0 < k && i0 < j0 + TILE; i0 += TILE)
            for (npy_intp i = i0; i < TILE_END(i0, k); ++i)
                for (npy_intp j = (j0 > i ? j0 : i); j < TILE_END(j0, n); ++j)
                    PUT(up + (i * n + j) * es, f + (i + j * m) * es)
    if (permute) {
        free(perm);
        return Py_BuildValue("(NN)", l, u);
    }
    npy_intp pdims[2] = {m, m};
    if (indices) {                                  /* A = L[p] @ U */
        p = (PyArrayObject *)PyArray_EMPTY(1, pdims, NPY_INT32, 0);
        if (p == NULL) goto fail;
        for (npy_intp i = 0; i < m; ++i) ((npy_int32 *)PyArray_DATA(p))[perm[i]] = (npy_int32)i;
    } else {                                        /* A = P @ L @ U, P[perm[i], i] = 1 */
        p = (PyArrayObject *)PyArray_ZEROS(2, pdims, DOUBLE[t] ? NPY_DOUBLE : NPY_FLOAT, 0);
        if (p == NULL) goto fail;
        for (npy_intp i = 0; i < m; ++i) {
            if (DOUBLE[t]) ((double *)PyArray_DATA(p))[perm[i] * m + i] = 1.0;
            else ((float *)PyArray_DATA(p))[perm[i] * m + i] = 1.0f;
        }
    }
    free(perm);
    return Py_BuildValue("(NNN)", p, l, u);
fail:
    free(perm);
    Py_XDECREF(l);
    Py_XDECREF(u);
    return NULL;
}

/* lu(a, permute_l, p_indices, check_finite): scipy.linalg.lu's (p, l, u), (pl, u) or
   (perm, l, u) of one m x n matrix a (C-ordered results), or NotImplemented (also for 1 x 1,
   whose results SciPy gives other dtypes) */
static PyObject *fast_lu(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0 || PyArray_NDIM((PyArrayObject *)args[0]) != 2) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0];
    npy_intp m = PyArray_DIMS(a)[0], n = PyArray_DIMS(a)[1], es = ITEMSIZE[t];
    int permute = truth(args[1]), indices = truth(args[2]), check = truth(args[3]);
    if (m < 1 || n < 1 || m * n == 1 || m > LU_MAXN || n > LU_MAXN || permute < 0 || indices < 0 || check < 0)
        Py_RETURN_NOTIMPLEMENTED;
    char *f = (char *)big_malloc((size_t)(m * n * es));
    if (f == NULL) return PyErr_NoMemory();
    to_fortran(f, PyArray_BYTES(a), m, n, PyArray_STRIDES(a)[0], PyArray_STRIDES(a)[1], es);
    if (check && !all_finite(t, f, m * n)) {
        free(f);
        return not_finite(NULL);
    }
    int mi = (int)m, ni = (int)n, info = 0, ipiv[LU_MAXN];
    LAPACK(t, GETRF, getrf_t)(&mi, &ni, f, &mi, ipiv, &info);   /* info > 0 (singular): factors all the same, as SciPy */
    if (info < 0) {
        free(f);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal getrf", -info);
        return NULL;
    }
    PyObject *out = lu_tuple(t, PyArray_TYPE(a), f, m, n, ipiv, 1, permute, indices);
    free(f);
    return out;
}

/* lu_unpack(lu, piv, permute_l, p_indices): scipy.linalg.lu's tuple, as lu's, from getrf's
   Fortran-contiguous m x n factors lu (m * n > 1) and their min(m, n) 0-based int32 pivots
   piv (as SciPy's f2py getrf returns them), each row index in range; else NotImplemented */
static PyObject *fast_lu_unpack(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0 || PyArray_NDIM((PyArrayObject *)args[0]) != 2 || !PyArray_CheckExact(args[1]))
        Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *lu = (PyArrayObject *)args[0], *piv = (PyArrayObject *)args[1];
    npy_intp m = PyArray_DIMS(lu)[0], n = PyArray_DIMS(lu)[1], k = m < n ? m : n;
    int permute = truth(args[2]), indices = truth(args[3]);
    if (m < 1 || n < 1 || m * n == 1 || m > 0x7fffffff || permute < 0 || indices < 0
            || !PyArray_IS_F_CONTIGUOUS(lu) || PyArray_TYPE(piv) != NPY_INT32 || PyArray_NDIM(piv) != 1
            || PyArray_DIMS(piv)[0] != k || !PyArray_IS_C_CONTIGUOUS(piv) || !PyArray_ISALIGNED(piv)
            || !PyArray_ISNOTSWAPPED(piv))
        Py_RETURN_NOTIMPLEMENTED;
    const int *ipiv = (const int *)PyArray_DATA(piv);
    for (npy_intp i = 0; i < k; ++i)
        if (ipiv[i] < 0 || ipiv[i] >= m) Py_RETURN_NOTIMPLEMENTED;
    return lu_tuple(t, PyArray_TYPE(lu), PyArray_BYTES(lu), m, n, ipiv, 0, permute, indices);
}
"""

#: This group's entries of the extension's method table.
METHODS = r"""
    {"cho_solve", (PyCFunction)(void (*)(void))fast_cho_solve, METH_FASTCALL,
     "cho_solve(c, b, lower, check_finite): x, or NotImplemented"},
    {"lu_solve", (PyCFunction)(void (*)(void))fast_lu_solve, METH_FASTCALL,
     "lu_solve(lu, piv, b, trans, check_finite): x, or NotImplemented"},
    {"solve_gen", (PyCFunction)(void (*)(void))fast_solve_gen, METH_FASTCALL,
     "solve_gen(a, b, transposed, check_finite): (x, rcond), (None, 0.0) if singular, or NotImplemented"},
    {"solve_plain", (PyCFunction)(void (*)(void))fast_solve_plain, METH_FASTCALL,
     "solve_plain(a, b): numpy.linalg.solve's x of one matrix, None if singular, or NotImplemented"},
    {"solve_pos", (PyCFunction)(void (*)(void))fast_solve_pos, METH_FASTCALL,
     "solve_pos(a, b, lower, check_finite): (x, rcond), (None, 0.0) if not positive definite, or NotImplemented"},
    {"structure", fast_structure, METH_O,
     "structure(a): scipy.linalg.solve's detected structure of a square matrix, or NotImplemented"},
    {"solve_sym", (PyCFunction)(void (*)(void))fast_solve_sym, METH_FASTCALL,
     "solve_sym(a, b, lower, hermitian, check_finite): (x, rcond), (None, 0.0) if singular, or NotImplemented"},
    {"lu", (PyCFunction)(void (*)(void))fast_lu, METH_FASTCALL,
     "lu(a, permute_l, p_indices, check_finite): scipy.linalg.lu's result, or NotImplemented"},
    {"lu_unpack", (PyCFunction)(void (*)(void))fast_lu_unpack, METH_FASTCALL,
     "lu_unpack(lu, piv, permute_l, p_indices): scipy.linalg.lu's result from getrf's factors, or NotImplemented"},
"""
