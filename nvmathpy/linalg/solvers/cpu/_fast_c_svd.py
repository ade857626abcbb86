"""The compiled extension's singular value decomposition (C, appended to
:data:`._fast_c_base.SOURCE`): ``svd`` of one matrix by ``?gesdd`` or ``?gesvd``, as
:func:`scipy.linalg.svd` calls them (a Fortran copy of the matrix, workspaces as LAPACK's
query sizes them, SciPy's ``rwork`` sizes for complex dtypes).
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
"""

#: This group's entries of the extension's method table.
METHODS = r"""
    {"svd", (PyCFunction)(void (*)(void))fast_svd, METH_FASTCALL,
     "svd(a, full_matrices, compute_uv, gesvd, check_finite): (u, s, vh) or s, or NotImplemented"},
"""
