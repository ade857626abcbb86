"""The compiled extension's singular value decomposition (C, appended to
:data:`._fast_c_base.SOURCE`): ``svd`` of one matrix by ``?gesdd`` or ``?gesvd``, as
:func:`scipy.linalg.svd` calls them (a Fortran copy of the matrix, workspaces as LAPACK's
query sizes them, SciPy's ``rwork`` sizes for complex dtypes); ``lstsq``, NumPy's least
squares of one matrix by ``?gelsd`` (the SVD's divide and conquer).
"""

from __future__ import annotations

__all__ = ["SOURCE", "METHODS"]

SOURCE = r"""
/* real: (jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork, info);
   complex: ... work, lwork, rwork, iwork, info */
typedef void (*dgesdd_t)(char *, int *, int *, void *, int *, void *, void *, int *, void *, int *, void *, int *,
                         int *, int *);
typedef void (*zgesdd_t)(char *, int *, int *, void *, int *, void *, void *, int *, void *, int *, void *, int *,
                         void *, int *, int *);
/* real: (jobu, jobvt, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, info);
   complex: ... work, lwork, rwork, info */
typedef void (*dgesvd_t)(char *, char *, int *, int *, void *, int *, void *, void *, int *, void *, int *, void *,
                         int *, int *);
typedef void (*zgesvd_t)(char *, char *, int *, int *, void *, int *, void *, void *, int *, void *, int *, void *,
                         int *, void *, int *);

typedef struct {
    char job;               /* 'A', 'S' or 'N' */
    int m, n, ldu, ldvt, lwork, info;
    void *a, *s, *u, *vt, *work, *rwork;
    int *iwork;
} svd_call;

/* One ?gesdd (gesvd: ?gesvd) call of dtype t on c (lwork -1: the workspace query). */
static void run_svd(int t, int gesvd, svd_call *c) {
    if (gesvd && t < 2)
        LAPACK(t, GESVD, dgesvd_t)(&c->job, &c->job, &c->m, &c->n, c->a, &c->m, c->s, c->u, &c->ldu, c->vt, &c->ldvt,
                                   c->work, &c->lwork, &c->info);
    else if (gesvd)
        LAPACK(t, GESVD, zgesvd_t)(&c->job, &c->job, &c->m, &c->n, c->a, &c->m, c->s, c->u, &c->ldu, c->vt, &c->ldvt,
                                   c->work, &c->lwork, c->rwork, &c->info);
    else if (t < 2)
        LAPACK(t, GESDD, dgesdd_t)(&c->job, &c->m, &c->n, c->a, &c->m, c->s, c->u, &c->ldu, c->vt, &c->ldvt, c->work,
                                   &c->lwork, c->iwork, &c->info);
    else
        LAPACK(t, GESDD, zgesdd_t)(&c->job, &c->m, &c->n, c->a, &c->m, c->s, c->u, &c->ldu, c->vt, &c->ldvt, c->work,
                                   &c->lwork, c->rwork, c->iwork, &c->info);
}

/* svd(a, full_matrices, compute_uv, gesvd, check_finite): (u, s, vh) (Fortran-ordered factors)
   or s; NotImplemented for operands it does not take, for NaN/Inf without check_finite and for
   LAPACK's failures (which the caller's own path then reports) */
static PyObject *fast_svd(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0 || PyArray_NDIM((PyArrayObject *)args[0]) != 2) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0], *s = NULL, *u = NULL, *vt = NULL;
    npy_intp m = dim_within(a, 0, BIGN), n = dim_within(a, 1, BIGN);
    int full = truth(args[1]), uv = truth(args[2]), gesvd = truth(args[3]), check = truth(args[4]);
    if (m < 0 || n < 0 || full < 0 || uv < 0 || gesvd < 0 || check < 0 || m * n > 0x7fffffff)
        Py_RETURN_NOTIMPLEMENTED;
    npy_intp k = m < n ? m : n, big = m < n ? n : m, es = ITEMSIZE[t], rs = DOUBLE[t] ? 8 : 4;
    npy_intp ucols = full ? m : k, vrows = full ? n : k;
    if (uv && (m * ucols > 0x7fffffff || vrows * n > 0x7fffffff)) Py_RETURN_NOTIMPLEMENTED;
    npy_intp rwork = t < 2 ? 0 : gesvd ? 5 * k : uv ? (5 * k * k + 5 * k > 2 * big * k + 2 * k * k + k
                                                        ? 5 * k * k + 5 * k : 2 * big * k + 2 * k * k + k) : 7 * k;
    size_t fixed = (size_t)(m * n * es + rwork * rs) + (size_t)(8 * k) * sizeof(int);
    char *buffer = (char *)big_malloc(fixed), *work = NULL;
    if (buffer == NULL) return PyErr_NoMemory();
    to_fortran(buffer, PyArray_BYTES(a), m, n, PyArray_STRIDES(a)[0], PyArray_STRIDES(a)[1], es);
    if (!all_finite(t, buffer, m * n)) {
        free(buffer);
        if (check) return not_finite(NULL);
        Py_RETURN_NOTIMPLEMENTED;
    }
    npy_intp udims[2] = {m, ucols}, vdims[2] = {vrows, n};
    s = (PyArrayObject *)PyArray_EMPTY(1, &k, REAL_TYPE[t], 0);
    if (s != NULL && uv) {
        u = (PyArrayObject *)PyArray_EMPTY(2, udims, PyArray_TYPE(a), 1);
        vt = (PyArrayObject *)PyArray_EMPTY(2, vdims, PyArray_TYPE(a), 1);
    }
    if (s == NULL || (uv && (u == NULL || vt == NULL))) goto fail;
    double query[4], none[4];
    svd_call c = {uv ? (full ? 'A' : 'S') : 'N', (int)m, (int)n, uv ? (int)m : 1, uv ? (int)vrows : 1, -1, 0,
                  buffer, PyArray_DATA(s), uv ? PyArray_DATA(u) : none, uv ? PyArray_DATA(vt) : none, query,
                  buffer + m * n * es, (int *)(buffer + m * n * es + rwork * rs)};
    run_svd(t, gesvd, &c);
    c.lwork = lwork_of(t, query);
    work = (char *)big_malloc((size_t)c.lwork * (size_t)es);
    if (work == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    c.work = work;
    run_svd(t, gesvd, &c);
    free(work);
    free(buffer);
    if (c.info != 0) {
        Py_DECREF(s);
        Py_XDECREF(u);
        Py_XDECREF(vt);
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (!uv) return (PyObject *)s;
    return Py_BuildValue("(NNN)", u, s, vt);
fail:
    free(buffer);
    Py_XDECREF(s);
    Py_XDECREF(u);
    Py_XDECREF(vt);
    return NULL;
}

/* real: (m, n, nrhs, a, lda, b, ldb, s, rcond, rank, work, lwork, iwork, info);
   complex: ... work, lwork, rwork, iwork, info */
typedef void (*rgelsd_t)(int *, int *, int *, void *, int *, void *, int *, void *, void *, int *, void *, int *,
                         int *, int *);
typedef void (*cgelsd_t)(int *, int *, int *, void *, int *, void *, int *, void *, void *, int *, void *, int *,
                         void *, int *, int *);

/* One ?gelsd call of dtype t (lwork -1: the workspace query, which also sets rwork[0] and
   iwork[0] to their sizes). */
static void run_gelsd(int t, int m, int n, int k, void *a, void *b, int ldb, void *s, double rcond, int *rank,
                      void *work, int lwork, void *rwork, int *iwork, int *info) {
    float rcond_f = (float)rcond;
    void *rc = DOUBLE[t] ? (void *)&rcond : (void *)&rcond_f;
    if (t < 2) LAPACK(t, GELSD, rgelsd_t)(&m, &n, &k, a, &m, b, &ldb, s, rc, rank, work, &lwork, iwork, info);
    else LAPACK(t, GELSD, cgelsd_t)(&m, &n, &k, a, &m, b, &ldb, s, rc, rank, work, &lwork, rwork, iwork, info);
}

/* lstsq(a, b, rcond): numpy.linalg.lstsq's (x, residuals, rank, s) of one m x n matrix a and b
   of a's dtype ((m,) or (m, k)), rank an int; NotImplemented for operands it does not take, for
   NaN/Inf in a and for LAPACK's failures (which the caller's own path then reports) */
static PyObject *fast_lstsq(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !ready || !PyFloat_CheckExact(args[2])) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0 || kind_of(args[1]) != t || PyArray_NDIM((PyArrayObject *)args[0]) != 2) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0], *b = (PyArrayObject *)args[1];
    npy_intp m = dim_within(a, 0, BIGN), n = dim_within(a, 1, BIGN);
    if (m < 0 || n < 0 || m * n > 0x7fffffff) Py_RETURN_NOTIMPLEMENTED;
    npy_intp k = rhs_columns(b, m), ldb = m > n ? m : n, mn = m < n ? m : n;
    if (k < 0 || ldb * k > 0x7fffffff) Py_RETURN_NOTIMPLEMENTED;
    npy_intp es = ITEMSIZE[t], rs = DOUBLE[t] ? 8 : 4;
    double rcond = PyFloat_AS_DOUBLE(args[2]);
    size_t a_bytes = (size_t)(m * n * es), b_bytes = (size_t)(ldb * k * es);
    char *buffer = (char *)big_malloc(a_bytes + b_bytes + (size_t)(mn * rs)), *work = NULL;
    if (buffer == NULL) return PyErr_NoMemory();
    char *ab = buffer, *bb = buffer + a_bytes, *sb = bb + b_bytes;
    to_fortran(ab, PyArray_BYTES(a), m, n, PyArray_STRIDES(a)[0], PyArray_STRIDES(a)[1], es);
    if (!all_finite(t, ab, m * n)) {
        free(buffer);
        Py_RETURN_NOTIMPLEMENTED;
    }
    npy_intp s0 = PyArray_STRIDES(b)[0], s1 = PyArray_NDIM(b) == 2 ? PyArray_STRIDES(b)[1] : 0;
    for (npy_intp j = 0; j < k; ++j) to_fortran(bb + j * ldb * es, PyArray_BYTES(b) + j * s1, m, 1, s0, 0, es);
    int rank = 0, info = 0, iquery = 0;
    double query[2] = {0, 0}, rquery[2] = {0, 0};
    run_gelsd(t, (int)m, (int)n, (int)k, ab, bb, (int)ldb, sb, rcond, &rank, query, -1, rquery, &iquery, &info);
    int lwork = lwork_of(t, query);
    npy_intp lrwork = t < 2 ? 0 : lwork_of(t, rquery), liwork = iquery > 1 ? iquery : 1;
    work = info == 0 ? (char *)big_malloc((size_t)lwork * (size_t)es + (size_t)lrwork * (size_t)rs
                                          + (size_t)liwork * sizeof(int)) : NULL;
    if (work == NULL) {
        free(buffer);
        if (info != 0) Py_RETURN_NOTIMPLEMENTED;
        return PyErr_NoMemory();
    }
    char *rwork = work + (size_t)lwork * (size_t)es;
    int *iwork = (int *)(rwork + (size_t)lrwork * (size_t)rs);
    run_gelsd(t, (int)m, (int)n, (int)k, ab, bb, (int)ldb, sb, rcond, &rank, work, lwork, rwork, iwork, &info);
    free(work);
    if (info != 0) {
        free(buffer);
        Py_RETURN_NOTIMPLEMENTED;
    }
    /* x: the first n rows of b's copy; residuals: each column's squared norm of rows n..m-1
       (what gelsd leaves there) where m > n and the rank is full, else none */
    npy_intp xdims[2] = {n, k}, rcount = (m > n && rank == n) ? k : 0;   /* k is 1 for a vector b */
    PyArrayObject *x = (PyArrayObject *)PyArray_EMPTY(PyArray_NDIM(b), xdims, PyArray_TYPE(a), 1);
    PyArrayObject *res = (PyArrayObject *)PyArray_EMPTY(1, &rcount, REAL_TYPE[t], 0);
    PyArrayObject *s = (PyArrayObject *)PyArray_EMPTY(1, &mn, REAL_TYPE[t], 0);
    if (x == NULL || res == NULL || s == NULL) {
        free(buffer);
        Py_XDECREF(x);
        Py_XDECREF(res);
        Py_XDECREF(s);
        return NULL;
    }
    for (npy_intp j = 0; j < k; ++j) {
        memcpy(PyArray_BYTES(x) + j * n * es, bb + j * ldb * es, (size_t)(n * es));
        if (rcount) {
            double sum = 0;
            npy_intp reals = (m - n) * REALS[t];
            const char *tail = bb + (j * ldb + n) * es;
            for (npy_intp i = 0; i < reals; ++i) {
                double v = DOUBLE[t] ? ((const double *)tail)[i] : (double)((const float *)tail)[i];
                sum += v * v;
            }
            if (DOUBLE[t]) ((double *)PyArray_DATA(res))[j] = sum;
            else ((float *)PyArray_DATA(res))[j] = (float)sum;
        }
    }
    memcpy(PyArray_DATA(s), sb, (size_t)(mn * rs));
    free(buffer);
    return Py_BuildValue("(NNiN)", x, res, rank, s);
}
"""

#: This group's entries of the extension's method table.
METHODS = r"""
    {"svd", (PyCFunction)(void (*)(void))fast_svd, METH_FASTCALL,
     "svd(a, full_matrices, compute_uv, gesvd, check_finite): (u, s, vh) or s, or NotImplemented"},
    {"lstsq", (PyCFunction)(void (*)(void))fast_lstsq, METH_FASTCALL,
     "lstsq(a, b, rcond): numpy.linalg.lstsq's (x, residuals, rank, s) of one matrix, or NotImplemented"},
"""
