"""Whole small ``cho_solve`` / ``lu_solve`` / general ``solve`` / ``lu`` calls in one C function.

For matrices up to 64 x 64 the cost of :func:`scipy.linalg.cho_solve` and friends is Python
and f2py overhead, not arithmetic; the scipy.linalg drop-in and the factored solves of the
LU and Cholesky plans use this module to avoid it. This module holds the C source of a small CPython
extension (compiled at run time by :func:`nvmathpy.kernels.cpu_jit.compile_extension`, cached
on disk) whose functions validate the operands, scan them for NaN/Inf, allocate the result
and call SciPy's own LAPACK (the function pointers of :mod:`scipy.linalg.cython_lapack`)
in a single call. Operands the C side does not handle (other types, dtypes, layouts, sizes)
make it return ``NotImplemented`` so the callers fall back to their Python paths; without a
C compiler or Python's headers (or with ``NVMATHPY_CPU_JIT=off``) :func:`fast_module` is
``None`` and only the Python paths run.

All four LAPACK dtypes share one copy of each function: the element size and real type are
looked up per dtype (``s``, ``d``, ``c``, ``z``), and LAPACK is called through a table of
function pointers filled once by ``set_lapack``.
"""

from __future__ import annotations

import threading
import types

from ._numpy_lapack import FROM_ORDER

__all__ = ["SOURCE", "MODULE_NAME", "MAX_ORDER", "LU_MAX_ORDER", "fast_module", "reset"]

MODULE_NAME = "_nvmathpy_fast_lapack"
#: The largest order the compiled functions take (larger ones are declined).
MAX_ORDER = 64
#: The largest row or column count the compiled ``lu`` takes: below NumPy's-OpenBLAS orders
#: (:data:`._numpy_lapack.FROM_ORDER`), where the factorization itself is SciPy's ``getrf``.
LU_MAX_ORDER = FROM_ORDER - 1

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <numpy/arrayobject.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXN @MAXN@
#define LU_MAXN @LU_MAXN@
#define STACK_BYTES 16384

typedef void (*potrs_t)(char *, int *, int *, void *, int *, void *, int *, int *);
typedef void (*getrs_t)(char *, int *, int *, void *, int *, int *, void *, int *, int *);
typedef void (*getrf_t)(int *, int *, void *, int *, int *, int *);
typedef float (*slange_t)(char *, int *, int *, void *, int *, void *);
typedef double (*dlange_t)(char *, int *, int *, void *, int *, void *);
/* real: (norm, n, a, lda, anorm, rcond, work, iwork, info); complex: ... work, rwork, info */
typedef void (*gecon_t)(char *, int *, void *, int *, void *, void *, void *, void *, int *);

typedef struct {
    potrs_t potrs;
    getrs_t getrs;
    getrf_t getrf;
    void *lange;
    gecon_t gecon;
} lapack_t;

static lapack_t L[4];           /* s, d, c, z */
static int ready = 0;
static const int ITEMSIZE[4] = {4, 8, 8, 16};
static const int REALS[4] = {1, 1, 2, 2};      /* reals per element */
static const int DOUBLE[4] = {0, 1, 0, 1};     /* real type is double */

/* The dtype index of an exact, aligned, native-order ndarray of a LAPACK dtype, else -1. */
static int kind_of(PyObject *o) {
    if (!PyArray_CheckExact(o)) return -1;
    PyArrayObject *a = (PyArrayObject *)o;
    if (!PyArray_ISALIGNED(a) || !PyArray_ISNOTSWAPPED(a)) return -1;
    switch (PyArray_TYPE(a)) {
        case NPY_FLOAT: return 0;
        case NPY_DOUBLE: return 1;
        case NPY_CFLOAT: return 2;
        case NPY_CDOUBLE: return 3;
        default: return -1;
    }
}

static int finite_f(const float *p, npy_intp m) {
    int bad = 0;
    for (npy_intp i = 0; i < m; ++i) bad |= !isfinite(p[i]);
    return !bad;
}

static int finite_d(const double *p, npy_intp m) {
    int bad = 0;
    for (npy_intp i = 0; i < m; ++i) bad |= !isfinite(p[i]);
    return !bad;
}

/* Whether the n contiguous elements of dtype t at p are all finite. */
static int all_finite(int t, const void *p, npy_intp n) {
    npy_intp m = n * REALS[t];
    return DOUBLE[t] ? finite_d((const double *)p, m) : finite_f((const float *)p, m);
}

/* Conjugate the n contiguous elements of dtype t at p in place (nothing for real t). */
static void conjugate(int t, void *p, npy_intp n) {
    if (t < 2) return;
    if (DOUBLE[t]) {
        double *q = (double *)p;
        for (npy_intp i = 0; i < n; ++i) q[2 * i + 1] = -q[2 * i + 1];
    } else {
        float *q = (float *)p;
        for (npy_intp i = 0; i < n; ++i) q[2 * i + 1] = -q[2 * i + 1];
    }
}

static PyObject *not_finite(PyObject *x) {
    Py_XDECREF(x);
    PyErr_SetString(PyExc_ValueError, "array must not contain infs or NaNs");
    return NULL;
}

/* Truth of o, or -1 (no exception set) when it has none. */
static int truth(PyObject *o) {
    if (o == Py_True) return 1;
    if (o == Py_False) return 0;
    int r = PyObject_IsTrue(o);
    if (r < 0) PyErr_Clear();
    return r;
}

typedef struct { npy_uint64 lo, hi; } pair_t;

#define STRIDED_COPY(T)                                                               \
    for (npy_intp j = 0; j < k; ++j)                                                  \
        for (npy_intp i = 0; i < n; ++i)                                              \
            ((T *)dst)[i + j * n] = *(const T *)(src + i * s0 + j * s1);

/* Copy the n x k matrix of es-byte elements at src (byte strides s0, s1) to dst, Fortran-ordered. */
static void to_fortran(char *dst, const char *src, npy_intp n, npy_intp k, npy_intp s0, npy_intp s1, npy_intp es) {
    if ((n == 1 || s0 == es) && (k == 1 || s1 == es * n)) {
        memcpy(dst, src, (size_t)(n * k * es));
    } else if (es == 4) {
        STRIDED_COPY(npy_uint32)
    } else if (es == 8) {
        STRIDED_COPY(npy_uint64)
    } else {
        STRIDED_COPY(pair_t)
    }
}

/* A new Fortran-ordered copy of b (n,) or (n, k) of dtype t, or NULL (exception set). */
static PyArrayObject *copy_rhs(PyArrayObject *b, int t, npy_intp n, npy_intp k) {
    int nd = PyArray_NDIM(b);
    PyArrayObject *x = (PyArrayObject *)PyArray_EMPTY(nd, PyArray_DIMS(b), PyArray_TYPE(b), 1);
    if (x == NULL) return NULL;
    to_fortran(PyArray_BYTES(x), PyArray_BYTES(b), n, k, PyArray_STRIDES(b)[0], nd == 2 ? PyArray_STRIDES(b)[1] : 0,
               ITEMSIZE[t]);
    return x;
}

/* Checks b against n (1-D or 2-D, b.shape[0] == n, nonempty); the column count, or -1. */
static npy_intp rhs_columns(PyArrayObject *b, npy_intp n) {
    int nd = PyArray_NDIM(b);
    if (nd < 1 || nd > 2 || PyArray_DIMS(b)[0] != n) return -1;
    npy_intp k = nd == 2 ? PyArray_DIMS(b)[1] : 1;
    if (k < 1 || k > 0x7fffffff / n) return -1;
    return k;
}

/* The order n of a square 2-D matrix with 1 <= n <= MAXN, else -1. */
static npy_intp square_order(PyArrayObject *a) {
    if (PyArray_NDIM(a) != 2) return -1;
    npy_intp n = PyArray_DIMS(a)[0];
    if (n != PyArray_DIMS(a)[1] || n < 1 || n > MAXN) return -1;
    return n;
}

/* cho_solve(c, b, lower, check_finite) */
static PyObject *fast_cho_solve(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0 || kind_of(args[1]) != t) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *c = (PyArrayObject *)args[0], *b = (PyArrayObject *)args[1];
    npy_intp n = square_order(c);
    if (n < 0) Py_RETURN_NOTIMPLEMENTED;
    int cview;              /* 1: c is C-ordered; its F-view c^T is the other triangle's factor of conj(A) */
    if (PyArray_IS_F_CONTIGUOUS(c)) cview = 0;
    else if (PyArray_IS_C_CONTIGUOUS(c)) cview = 1;
    else Py_RETURN_NOTIMPLEMENTED;
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
    L[t].potrs(&uplo, &ni, &nrhs, PyArray_DATA(c), &ni, PyArray_DATA(x), &ni, &info);
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
    L[t].getrs(&tr, &ni, &nrhs, PyArray_DATA(lu), &ni, ipiv, PyArray_DATA(x), &ni, &info);
    if (info < 0) {
        Py_DECREF(x);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal gesv|posv", -info);
        return NULL;
    }
    return (PyObject *)x;
}

/* solve_gen(a, b, transposed, check_finite) -> (x, rcond), or (None, 0.0) when singular */
static PyObject *fast_solve_gen(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0 || kind_of(args[1]) != t) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0], *b = (PyArrayObject *)args[1];
    npy_intp n = square_order(a);
    if (n < 0) Py_RETURN_NOTIMPLEMENTED;
    int tview;              /* 1: factor the F-view of a C-ordered a, i.e. A^T */
    if (PyArray_IS_F_CONTIGUOUS(a)) tview = 0;
    else if (PyArray_IS_C_CONTIGUOUS(a)) tview = 1;
    else Py_RETURN_NOTIMPLEMENTED;
    npy_intp k = rhs_columns(b, n);
    int transposed = truth(args[2]), check = truth(args[3]);
    if (k < 0 || transposed < 0 || check < 0 || (transposed && t >= 2)) Py_RETURN_NOTIMPLEMENTED;
    if (check && !all_finite(t, PyArray_DATA(a), n * n)) return not_finite(NULL);
    PyArrayObject *x = copy_rhs(b, t, n, k);
    if (x == NULL) return NULL;
    if (check && !all_finite(t, PyArray_DATA(x), n * k)) return not_finite((PyObject *)x);

    /* workspace: the LU factors, 4n reals of gecon work (2n complex for c/z), 2n reals or
       n ints of rwork/iwork (lange's work reuses the gecon work), n pivots */
    npy_intp es = ITEMSIZE[t], rs = DOUBLE[t] ? 8 : 4;
    size_t lu_bytes = (size_t)(n * n * es), work_bytes = (size_t)(4 * n * rs), rwork_bytes = (size_t)(2 * n * rs);
    size_t total = lu_bytes + work_bytes + rwork_bytes + (size_t)n * sizeof(int);
    _Alignas(64) char stack[STACK_BYTES];
    char *buffer = total <= STACK_BYTES ? stack : (char *)malloc(total);
    if (buffer == NULL) {
        Py_DECREF(x);
        return PyErr_NoMemory();
    }
    char *lu = buffer, *work = buffer + lu_bytes, *rwork = work + work_bytes;
    int *ipiv = (int *)(rwork + rwork_bytes);
    memcpy(lu, PyArray_DATA(a), lu_bytes);
    char norm = tview ? 'I' : '1';
    int ni = (int)n, nrhs = (int)k, info = 0;
    double rcond;
    float anorm_f = 0, rcond_f = 0;
    double anorm_d = 0, rcond_d = 0;
    if (DOUBLE[t]) anorm_d = ((dlange_t)L[t].lange)(&norm, &ni, &ni, lu, &ni, work);
    else anorm_f = ((slange_t)L[t].lange)(&norm, &ni, &ni, lu, &ni, work);
    L[t].getrf(&ni, &ni, lu, &ni, ipiv, &info);
    if (info > 0) {
        if (buffer != stack) free(buffer);
        Py_DECREF(x);
        return Py_BuildValue("(Od)", Py_None, 0.0);
    }
    if (info == 0) {
        /* gecon's info is ignored, as solve_general does: a NaN/Inf norm (check_finite off)
           makes it report -5 and set rcond itself */
        int cinfo = 0;
        if (DOUBLE[t]) L[t].gecon(&norm, &ni, lu, &ni, &anorm_d, &rcond_d, work, rwork, &cinfo);
        else L[t].gecon(&norm, &ni, lu, &ni, &anorm_f, &rcond_f, work, rwork, &cinfo);
    }
    rcond = DOUBLE[t] ? rcond_d : (double)rcond_f;
    if (info == 0) {
        char tr = (tview ^ transposed) ? 'T' : 'N';
        L[t].getrs(&tr, &ni, &nrhs, lu, &ni, ipiv, PyArray_DATA(x), &ni, &info);
    }
    if (buffer != stack) free(buffer);
    if (info < 0) {
        Py_DECREF(x);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal gesv", -info);
        return NULL;
    }
    PyObject *r = PyFloat_FromDouble(rcond);
    if (r == NULL) {
        Py_DECREF(x);
        return NULL;
    }
    PyObject *out = PyTuple_New(2);
    if (out == NULL) {
        Py_DECREF(x);
        Py_DECREF(r);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, (PyObject *)x);
    PyTuple_SET_ITEM(out, 1, r);
    return out;
}

/* One es-byte element from s to d. */
#define PUT(d, s)                                                                              \
    switch (es) {                                                                              \
        case 4: *(npy_uint32 *)(d) = *(const npy_uint32 *)(s); break;                          \
        case 8: *(npy_uint64 *)(d) = *(const npy_uint64 *)(s); break;                          \
        default: *(pair_t *)(d) = *(const pair_t *)(s);                                        \
    }

/* lu(a, permute_l, p_indices, check_finite): scipy.linalg.lu's (p, l, u), (pl, u) or
   (perm, l, u) of one m x n matrix a (C-ordered results), or NotImplemented (also for 1 x 1,
   whose results SciPy gives other dtypes) */
static PyObject *fast_lu(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !ready) Py_RETURN_NOTIMPLEMENTED;
    int t = kind_of(args[0]);
    if (t < 0 || PyArray_NDIM((PyArrayObject *)args[0]) != 2) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0], *l = NULL, *u = NULL, *p = NULL;
    npy_intp m = PyArray_DIMS(a)[0], n = PyArray_DIMS(a)[1], k = m < n ? m : n, es = ITEMSIZE[t];
    int permute = truth(args[1]), indices = truth(args[2]), check = truth(args[3]);
    if (m < 1 || n < 1 || m * n == 1 || m > LU_MAXN || n > LU_MAXN || permute < 0 || indices < 0 || check < 0)
        Py_RETURN_NOTIMPLEMENTED;
    char *f = (char *)malloc((size_t)(m * n * es));
    if (f == NULL) return PyErr_NoMemory();
    to_fortran(f, PyArray_BYTES(a), m, n, PyArray_STRIDES(a)[0], PyArray_STRIDES(a)[1], es);
    if (check && !all_finite(t, f, m * n)) {
        free(f);
        return not_finite(NULL);
    }
    int mi = (int)m, ni = (int)n, info = 0, ipiv[LU_MAXN], perm[LU_MAXN];
    L[t].getrf(&mi, &ni, f, &mi, ipiv, &info);   /* info > 0 (singular): factors all the same, as SciPy */
    if (info < 0) {
        free(f);
        PyErr_Format(PyExc_ValueError, "illegal value in %dth argument of internal getrf", -info);
        return NULL;
    }
    for (int i = 0; i < mi; ++i) perm[i] = i;      /* row i of P A is row perm[i] of A */
    for (npy_intp i = 0; i < k; ++i) {
        int j = ipiv[i] - 1, s = perm[i];
        perm[i] = perm[j];
        perm[j] = s;
    }
    npy_intp ldims[2] = {m, k}, udims[2] = {k, n};
    l = (PyArrayObject *)PyArray_ZEROS(2, ldims, PyArray_TYPE(a), 0);
    u = (PyArrayObject *)PyArray_ZEROS(2, udims, PyArray_TYPE(a), 0);
    if (l == NULL || u == NULL) goto fail;
    char *lp = PyArray_BYTES(l), *up = PyArray_BYTES(u);
    for (npy_intp i = 0; i < m; ++i) {              /* permute_l: row i of L goes to row perm[i] */
        char *row = lp + (permute ? perm[i] : i) * k * es;
        for (npy_intp j = 0; j < (i < k ? i : k); ++j) PUT(row + j * es, f + (i + j * m) * es)
        if (i < k && DOUBLE[t]) *(double *)(row + i * es) = 1.0;
        else if (i < k) *(float *)(row + i * es) = 1.0f;
    }
    for (npy_intp i = 0; i < k; ++i)
        for (npy_intp j = i; j < n; ++j) PUT(up + (i * n + j) * es, f + (i + j * m) * es)
    free(f);
    f = NULL;
    if (permute) return Py_BuildValue("(NN)", l, u);
    npy_intp pdims[2] = {m, m};
    if (indices) {                                  /* A = L[p] @ U */
        p = (PyArrayObject *)PyArray_EMPTY(1, pdims, NPY_INT32, 0);
        if (p == NULL) goto fail;
        for (int i = 0; i < mi; ++i) ((npy_int32 *)PyArray_DATA(p))[perm[i]] = i;
    } else {                                        /* A = P @ L @ U, P[perm[i], i] = 1 */
        p = (PyArrayObject *)PyArray_ZEROS(2, pdims, DOUBLE[t] ? NPY_DOUBLE : NPY_FLOAT, 0);
        if (p == NULL) goto fail;
        for (int i = 0; i < mi; ++i) {
            if (DOUBLE[t]) ((double *)PyArray_DATA(p))[perm[i] * m + i] = 1.0;
            else ((float *)PyArray_DATA(p))[perm[i] * m + i] = 1.0f;
        }
    }
    return Py_BuildValue("(NNN)", p, l, u);
fail:
    free(f);
    Py_XDECREF(l);
    Py_XDECREF(u);
    return NULL;
}

static void *pointer(PyObject *capi, const char *name) {
    PyObject *capsule = PyDict_GetItemString(capi, name);
    if (capsule == NULL || !PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_KeyError, "LAPACK function %s not found", name);
        return NULL;
    }
    return PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule));
}

/* set_lapack(scipy.linalg.cython_lapack.__pyx_capi__) */
static PyObject *set_lapack(PyObject *self, PyObject *capi) {
    if (!PyDict_Check(capi)) {
        PyErr_SetString(PyExc_TypeError, "set_lapack expects cython_lapack.__pyx_capi__ (a dict)");
        return NULL;
    }
    static const char prefix[4] = {'s', 'd', 'c', 'z'};
    static const char *names[5] = {"potrs", "getrs", "getrf", "lange", "gecon"};
    lapack_t table[4];
    for (int t = 0; t < 4; ++t) {
        void *found[5];
        for (int f = 0; f < 5; ++f) {
            char name[16];
            snprintf(name, sizeof name, "%c%s", prefix[t], names[f]);
            found[f] = pointer(capi, name);
            if (found[f] == NULL) return NULL;
        }
        table[t].potrs = (potrs_t)found[0];
        table[t].getrs = (getrs_t)found[1];
        table[t].getrf = (getrf_t)found[2];
        table[t].lange = found[3];
        table[t].gecon = (gecon_t)found[4];
    }
    memcpy(L, table, sizeof table);
    ready = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"cho_solve", (PyCFunction)(void (*)(void))fast_cho_solve, METH_FASTCALL,
     "cho_solve(c, b, lower, check_finite): x, or NotImplemented"},
    {"lu_solve", (PyCFunction)(void (*)(void))fast_lu_solve, METH_FASTCALL,
     "lu_solve(lu, piv, b, trans, check_finite): x, or NotImplemented"},
    {"solve_gen", (PyCFunction)(void (*)(void))fast_solve_gen, METH_FASTCALL,
     "solve_gen(a, b, transposed, check_finite): (x, rcond), (None, 0.0) if singular, or NotImplemented"},
    {"lu", (PyCFunction)(void (*)(void))fast_lu, METH_FASTCALL,
     "lu(a, permute_l, p_indices, check_finite): scipy.linalg.lu's result, or NotImplemented"},
    {"set_lapack", set_lapack, METH_O, "set_lapack(cython_lapack.__pyx_capi__)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "@MODULE@", NULL, -1, methods};

PyMODINIT_FUNC PyInit_@MODULE@(void) {
    import_array();
    return PyModule_Create(&module);
}
""".replace("@MODULE@", MODULE_NAME).replace("@MAXN@", str(MAX_ORDER)).replace(
    "@LU_MAXN@", str(LU_MAX_ORDER))


_LOCK = threading.Lock()
_MODULE: types.ModuleType | None = None
#: Whether :data:`_MODULE` is final (loaded, or known to be unavailable here).
_SETTLED = False
_BUILDER: threading.Thread | None = None


def fast_module(wait: bool = False) -> types.ModuleType | None:
    """The compiled extension with SciPy's LAPACK installed, or ``None`` (never raises).

    The first call loads it from the disk cache (milliseconds); when it is not built yet it is
    compiled on a background thread (about a second) and callers get ``None`` - their Python
    paths - until it is ready, so that no call waits for the compiler. ``wait=True`` waits for
    a build in progress. ``None`` for good where it cannot be built (no C compiler or
    ``Python.h``, ``NVMATHPY_CPU_JIT=off``).

    Examples
    --------
    >>> import numpy as np
    >>> fast = fast_module(wait=True)
    >>> fast is None or fast.cho_solve(np.asfortranarray([[2.0]]), np.array([4.0]), False, True).tolist() == [1.0]
    True
    """
    if _SETTLED:
        return _MODULE
    return _first_use(wait)


def _first_use(wait: bool) -> types.ModuleType | None:
    global _BUILDER
    with _LOCK:
        if not _SETTLED and _BUILDER is None and not _install(build=False):
            _BUILDER = threading.Thread(target=_install, kwargs={"build": True}, name="nvmathpy-fast-lapack",
                                        daemon=True)
            _BUILDER.start()
        builder = _BUILDER
    if wait and builder is not None:
        builder.join()
    return _MODULE


def _install(build: bool) -> bool:
    """Load (``build=False``: only from the cache) or build the extension; ``False`` when it
    is not built yet, else settle :data:`_MODULE` (the module, or ``None`` on any failure)."""
    global _MODULE, _SETTLED
    try:
        from scipy.linalg import cython_lapack

        from ....kernels.cpu_jit import compile_extension

        module = compile_extension(MODULE_NAME, SOURCE, build=build)
        if module is None:
            return False
        module.set_lapack(cython_lapack.__pyx_capi__)
    except Exception:  # noqa: BLE001 - a speed-up only: any failure means the Python paths
        module = None
    _MODULE, _SETTLED = module, True
    return True


def reset() -> None:
    """Forget the extension: the next :func:`fast_module` loads or builds it again (for tests
    that change the environment)."""
    global _MODULE, _SETTLED, _BUILDER
    with _LOCK:
        if _BUILDER is not None:
            _BUILDER.join()
        _MODULE, _SETTLED, _BUILDER = None, False, None
