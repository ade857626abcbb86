"""The compiled extension's factorizations (C, appended to :data:`._fast_c_base.SOURCE`):
``cholesky`` (``?potrf``), ``solve_triangular`` (``?trtrs``) and ``qr`` without pivoting
(``?geqrf`` and ``?orgqr``/``?ungqr``, workspaces as LAPACK's queries size them) of one matrix,
with :func:`scipy.linalg`'s conventions: ``overwrite_a``/``overwrite_b`` work in place where
SciPy's would (a Fortran-contiguous operand of the LAPACK dtype, even a read-only one, as
SciPy's f2py wrappers write it), and the caller raises
SciPy's errors for the ``info`` returned.
"""

from __future__ import annotations

__all__ = ["SOURCE", "METHODS"]

SOURCE = r"""
typedef void (*trtrs_t)(char *, char *, char *, int *, int *, void *, int *, void *, int *, int *);
typedef void (*geqrf_t)(int *, int *, void *, int *, void *, void *, int *, int *);
typedef void (*orgqr_t)(int *, int *, int *, void *, int *, void *, void *, int *, int *);

/* cholesky(a, lower, clean, overwrite_a, check_finite): the factor (a itself when overwriting a
   Fortran-contiguous a; else C-ordered for a C-ordered a, factored through its
   transposed view), the int info > 0 when a is not positive definite, or NotImplemented */
static PyObject *fast_cholesky(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0 || PyArray_NDIM((PyArrayObject *)args[0]) != 2) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0], *c;
    npy_intp n = dim_within(a, 0, LU_MAXN), es = ITEMSIZE[t];
    int lower = truth(args[1]), clean = truth(args[2]), overwrite = truth(args[3]), check = truth(args[4]);
    if (n < 0 || PyArray_DIMS(a)[1] != n || lower < 0 || clean < 0 || overwrite < 0 || check < 0)
        Py_RETURN_NOTIMPLEMENTED;
    int fortran = PyArray_IS_F_CONTIGUOUS(a), flip = 0;
    if (overwrite && fortran) {       /* read-only too, as f2py's */
        if (check && !all_finite(t, PyArray_DATA(a), n * n)) return not_finite(NULL);
        c = (PyArrayObject *)same((PyObject *)a);
    } else {
        flip = !fortran && PyArray_IS_C_CONTIGUOUS(a);
        c = (PyArrayObject *)PyArray_EMPTY(2, PyArray_DIMS(a), PyArray_TYPE(a), !flip);
        if (c == NULL) return NULL;
        if (flip) memcpy(PyArray_DATA(c), PyArray_DATA(a), (size_t)(n * n * es));
        else to_fortran(PyArray_BYTES(c), PyArray_BYTES(a), n, n, PyArray_STRIDES(a)[0], PyArray_STRIDES(a)[1], es);
        if (check && !all_finite(t, PyArray_DATA(c), n * n)) return not_finite((PyObject *)c);
    }
    int upper = !(lower ^ flip);    /* the factor's triangle in the Fortran view */
    char uplo = upper ? 'U' : 'L';
    int ni = (int)n, info = 0;
    LAPACK(t, POTRF, potrf_t)(&uplo, &ni, PyArray_DATA(c), &ni, &info);
    if (info != 0) {
        Py_DECREF(c);
        if (info > 0) return PyLong_FromLong(info);
        PyErr_Format(PyExc_ValueError, "LAPACK reported an illegal value in %d-th argument on entry to \"POTRF\".",
                     -info);
        return NULL;
    }
    if (clean) zero_triangle(PyArray_BYTES(c), n, es, upper);
    return (PyObject *)c;
}

/* solve_triangular(a, b, trans, lower, unit_diagonal, overwrite_b, check_finite): x (b itself
   when overwriting a Fortran-contiguous b, read-only too, as f2py's), the int info > 0 when a has an exact
   zero on its diagonal, or NotImplemented */
static PyObject *fast_solve_triangular(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0 || kind_of(args[1]) != t || PyArray_NDIM((PyArrayObject *)args[0]) != 2) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0], *b = (PyArrayObject *)args[1], *x;
    npy_intp n = dim_within(a, 0, BIGN);
    if (n < 0 || PyArray_DIMS(a)[1] != n) Py_RETURN_NOTIMPLEMENTED;
    int flip;               /* 1: a is C-ordered; its Fortran view is a^T */
    if (PyArray_IS_F_CONTIGUOUS(a)) flip = 0;
    else if (PyArray_IS_C_CONTIGUOUS(a)) flip = 1;
    else Py_RETURN_NOTIMPLEMENTED;
    npy_intp k = rhs_columns(b, n);
    long trans = small_int(args[2], 2);
    int lower = truth(args[3]), unit = truth(args[4]), overwrite = truth(args[5]), check = truth(args[6]);
    if (k < 0 || trans < 0 || lower < 0 || unit < 0 || overwrite < 0 || check < 0) Py_RETURN_NOTIMPLEMENTED;
    int in_place = overwrite && PyArray_IS_F_CONTIGUOUS(b);
    if (check && !all_finite(t, PyArray_DATA(a), n * n)) return not_finite(NULL);
    if (in_place) {
        if (check && !all_finite(t, PyArray_DATA(b), n * k)) return not_finite(NULL);
        x = (PyArrayObject *)same((PyObject *)b);
    } else {
        x = copy_rhs(b, t, n, k);
        if (x == NULL) return NULL;
        if (check && !all_finite(t, PyArray_DATA(x), n * k)) return not_finite((PyObject *)x);
    }
    char uplo = (lower ^ flip) ? 'L' : 'U', diag = unit ? 'U' : 'N', tr;
    int conj = 0;           /* a^H x = b through a^T's view: conj(a^T) conj(x) = conj(b) */
    if (!flip) tr = "NTC"[trans];
    else if (trans == 0) tr = 'T';
    else if (trans == 1 || t < 2) tr = 'N';
    else {
        tr = 'N';
        conj = 1;
    }
    int ni = (int)n, nrhs = (int)k, info = 0;
    if (conj) conjugate(t, PyArray_DATA(x), n * k);
    LAPACK(t, TRTRS, trtrs_t)(&uplo, &tr, &diag, &ni, &nrhs, PyArray_DATA(a), &ni, PyArray_DATA(x), &ni, &info);
    if (conj) conjugate(t, PyArray_DATA(x), n * k);
    if (info != 0) {
        Py_DECREF(x);
        if (info > 0) return PyLong_FromLong(info);
        PyErr_Format(PyExc_ValueError, "illegal value in %d-th argument of internal trtrs", -info);
        return NULL;
    }
    return (PyObject *)x;
}

/* qr(a, mode, check_finite): scipy.linalg.qr's tuple without pivoting for mode 0 'full',
   1 'economic', 2 'r', 3 'raw' (Fortran-ordered arrays), or NotImplemented */
static PyObject *fast_qr(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0 || PyArray_NDIM((PyArrayObject *)args[0]) != 2) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0], *f, *tau = NULL, *r = NULL, *q = NULL;
    npy_intp m = dim_within(a, 0, BIGN), n = dim_within(a, 1, BIGN);
    long mode = small_int(args[1], 3);
    int check = truth(args[2]);
    if (m < 0 || n < 0 || mode < 0 || check < 0 || m * n > 0x7fffffff || m * m > 0x7fffffff)
        Py_RETURN_NOTIMPLEMENTED;
    npy_intp k = m < n ? m : n, es = ITEMSIZE[t], qcols = (mode == 1 && m >= n) ? n : m;
    npy_intp rows = ((mode == 1 || mode == 3) && m >= n) ? n : m;
    int type = PyArray_TYPE(a), mi = (int)m, ni = (int)n, ki = (int)k, qc = (int)qcols, info = 0, lwork = -1;
    f = (PyArrayObject *)PyArray_EMPTY(2, PyArray_DIMS(a), type, 1);
    if (f == NULL) return NULL;
    to_fortran(PyArray_BYTES(f), PyArray_BYTES(a), m, n, PyArray_STRIDES(a)[0], PyArray_STRIDES(a)[1], es);
    if (check && !all_finite(t, PyArray_DATA(f), m * n)) return not_finite((PyObject *)f);
    tau = (PyArrayObject *)PyArray_EMPTY(1, &k, type, 0);
    if (tau == NULL) goto fail;
    double query[4];
    LAPACK(t, GEQRF, geqrf_t)(&mi, &ni, PyArray_DATA(f), &mi, PyArray_DATA(tau), query, &lwork, &info);
    int need = lwork_of(t, query);
    if (mode < 2) {
        lwork = -1;
        LAPACK(t, ORGQR, orgqr_t)(&mi, &qc, &ki, PyArray_DATA(f), &mi, PyArray_DATA(tau), query, &lwork, &info);
        if (lwork_of(t, query) > need) need = lwork_of(t, query);
    }
    void *work = big_malloc((size_t)need * (size_t)es);
    if (work == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    lwork = need;
    LAPACK(t, GEQRF, geqrf_t)(&mi, &ni, PyArray_DATA(f), &mi, PyArray_DATA(tau), work, &lwork, &info);
    npy_intp rdims[2] = {rows, n}, qdims[2] = {m, qcols};
    if (info == 0) r = (PyArrayObject *)PyArray_ZEROS(2, rdims, type, 1);
    if (info == 0 && r != NULL && mode < 2) q = (PyArrayObject *)PyArray_EMPTY(2, qdims, type, 1);
    if (info == 0 && r != NULL && (q != NULL || mode >= 2)) {
        char *rp = PyArray_BYTES(r), *fp = PyArray_BYTES(f);
        for (npy_intp j = 0; j < n; ++j)            /* R: the upper triangle of the first rows */
            memcpy(rp + j * rows * es, fp + j * m * es, (size_t)((j < rows ? j + 1 : rows) * es));
        if (q != NULL) {                            /* Q from the reflectors in the first columns */
            memcpy(PyArray_DATA(q), PyArray_DATA(f), (size_t)(m * (qcols < n ? qcols : n) * es));
            LAPACK(t, ORGQR, orgqr_t)(&mi, &qc, &ki, PyArray_DATA(q), &mi, PyArray_DATA(tau), work, &lwork, &info);
        }
    }
    free(work);
    if (info != 0) {
        PyErr_Format(PyExc_ValueError, "illegal value in %d-th argument of internal geqrf", -info);
        goto fail;
    }
    if (r == NULL || (mode < 2 && q == NULL)) goto fail;
    if (mode == 3) return Py_BuildValue("((NN)N)", f, tau, r);
    Py_DECREF(f);
    Py_DECREF(tau);
    if (mode == 2) return Py_BuildValue("(N)", r);
    return Py_BuildValue("(NN)", q, r);
fail:
    Py_DECREF(f);
    Py_XDECREF(tau);
    Py_XDECREF(r);
    Py_XDECREF(q);
    return NULL;
}
"""

#: This group's entries of the extension's method table.
METHODS = r"""
    {"cholesky", (PyCFunction)(void (*)(void))fast_cholesky, METH_FASTCALL,
     "cholesky(a, lower, clean, overwrite_a, check_finite): c, info > 0 if not positive definite, or NotImplemented"},
    {"solve_triangular", (PyCFunction)(void (*)(void))fast_solve_triangular, METH_FASTCALL,
     "solve_triangular(a, b, trans, lower, unit_diagonal, overwrite_b, check_finite): x, info > 0 if singular, "
     "or NotImplemented"},
    {"qr", (PyCFunction)(void (*)(void))fast_qr, METH_FASTCALL,
     "qr(a, mode, check_finite): scipy.linalg.qr's tuple (mode 0 full, 1 economic, 2 r, 3 raw), or NotImplemented"},
"""
