"""The shared C of the compiled small-call extension (:mod:`._fast_lapack`): headers, the table
of SciPy's LAPACK function pointers (filled once by ``set_lapack``), and the helpers every
function group uses (dtype lookup, NaN/Inf scans, copies to Fortran order, argument checks).

The function groups (:mod:`._fast_c_solve`, :mod:`._fast_c_factor`, :mod:`._fast_c_svd`) are
appended after :data:`SOURCE`; each calls LAPACK as ``LAPACK(t, NAME, type)`` where ``t`` is the
dtype index (0 to 3: ``s``, ``d``, ``c``, ``z``) and ``NAME`` one of :data:`ROUTINES`' entries.
"""

from __future__ import annotations

__all__ = ["ROUTINES", "SOURCE", "METHODS"]

#: The LAPACK routines the extension calls: (enum name, real routine, complex routine), the
#: type letter prefixed.
ROUTINES = (
    ("POTRS", "potrs", "potrs"), ("GETRS", "getrs", "getrs"), ("GETRF", "getrf", "getrf"),
    ("LANGE", "lange", "lange"), ("GECON", "gecon", "gecon"), ("POTRF", "potrf", "potrf"),
    ("TRTRS", "trtrs", "trtrs"), ("GEQRF", "geqrf", "geqrf"), ("ORGQR", "orgqr", "ungqr"),
    ("GESDD", "gesdd", "gesdd"), ("GESVD", "gesvd", "gesvd"), ("LANHE", "lansy", "lanhe"),
    ("POCON", "pocon", "pocon"), ("POTRI", "potri", "potri"), ("TRTRI", "trtri", "trtri"),
    ("TRCON", "trcon", "trcon"), ("LANSY", "lansy", "lansy"), ("SYTRF", "sytrf", "sytrf"),
    ("SYCON", "sycon", "sycon"), ("SYTRS", "sytrs", "sytrs"), ("HETRF", "sytrf", "hetrf"),
    ("HECON", "sycon", "hecon"), ("HETRS", "sytrs", "hetrs"), ("SYTRI", "sytri", "sytri"),
    ("HETRI", "sytri", "hetri"), ("GETRI", "getri", "getri"), ("GELSD", "gelsd", "gelsd"),
)

_ENUM = ", ".join(name for name, _, _ in ROUTINES)
_NAMES = ", ".join(f'{{"{real}", "{cplx}"}}' for _, real, cplx in ROUTINES)

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <numpy/arrayobject.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#define MAXN @MAXN@
#define LU_MAXN @LU_MAXN@
#define STACK_BYTES 16384
#define BIGN 46340      /* the largest order whose n * n entries LAPACK's 32-bit indices reach */

enum { @ENUM@, NFUNC };
static const char *NAMES[NFUNC][2] = {@NAMES@};
static void *LP[4][NFUNC];      /* s, d, c, z */
#define LAPACK(t, f, type) ((type)LP[t][f])
static int ready = 0;
static const int ITEMSIZE[4] = {4, 8, 8, 16};
static const int REALS[4] = {1, 1, 2, 2};      /* reals per element */
static const int DOUBLE[4] = {0, 1, 0, 1};     /* real type is double */
static const int REAL_TYPE[4] = {NPY_FLOAT, NPY_DOUBLE, NPY_FLOAT, NPY_DOUBLE};

/* malloc, asking the kernel for huge pages on a block of 4 MiB or more, as NumPy does for its
   arrays: a workspace of many megabytes otherwise takes a page fault per 4 KiB of it on each
   call, where SciPy's, a NumPy array, takes one per huge page. */
static void *big_malloc(size_t bytes) {
    void *p = malloc(bytes);
#if defined(MADV_HUGEPAGE)
    if (p != NULL && bytes >= ((size_t)4 << 20)) {
        uintptr_t start = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
        madvise((void *)start, bytes - (size_t)(start - (uintptr_t)p), MADV_HUGEPAGE);
    }
#endif
    return p;
}

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

/* The side of the square tiles a transposing copy works in, writing along the destination's
   contiguous axis: the tile's source lines stay in cache between its columns (8 such lines
   apart by a power of two, as the rows of a 512 x 512 matrix are, still fit one cache set;
   untiled, a 512 x 512 copy runs about 4 times slower). */
#define TILE 8
#define TILE_END(x0, x1) ((x0) + TILE < (x1) ? (x0) + TILE : (x1))

#define STRIDED_COPY(T)                                                               \
    for (npy_intp j0 = 0; j0 < k; j0 += TILE)                                         \
        for (npy_intp i0 = 0; i0 < n; i0 += TILE)                                     \
            for (npy_intp j = j0; j < TILE_END(j0, k); ++j)                           \
                for (npy_intp i = i0; i < TILE_END(i0, n); ++i)                       \
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


/* The matrix dimension of a 2-D array in 1..limit, else -1. */
static npy_intp dim_within(PyArrayObject *a, int axis, npy_intp limit) {
    npy_intp d = PyArray_DIMS(a)[axis];
    return d >= 1 && d <= limit ? d : -1;
}

/* The dtype index of a square 2-D matrix o of order 1..LU_MAXN contiguous in either order, its
   order in *n and in *cview whether it is C-ordered (its Fortran view is then its transpose; a
   matrix contiguous both ways counts as Fortran-ordered), else -1. */
static int square_operand(PyObject *o, npy_intp *n, int *cview) {
    int t = kind_of(o);
    if (t < 0) return -1;
    PyArrayObject *a = (PyArrayObject *)o;
    *n = PyArray_NDIM(a) == 2 ? dim_within(a, 0, LU_MAXN) : -1;
    if (*n < 0 || PyArray_DIMS(a)[1] != *n) return -1;
    if (PyArray_IS_F_CONTIGUOUS(a)) *cview = 0;
    else if (PyArray_IS_C_CONTIGUOUS(a)) *cview = 1;
    else return -1;
    return t;
}

/* The integer o in 0..top (an exact int), else -1 (no exception set). */
static long small_int(PyObject *o, long top) {
    if (!PyLong_CheckExact(o)) return -1;
    long v = PyLong_AsLong(o);
    if (v < 0 || v > top) {
        PyErr_Clear();
        return -1;
    }
    return v;
}

/* The workspace size a LAPACK query wrote as the first real of its work element. */
static int lwork_of(int t, const void *work) {
    double w = DOUBLE[t] ? *(const double *)work : (double)*(const float *)work;
    return w < 1 ? 1 : (int)(w * (1 + 1e-6)) + 1;
}

/* Zero the triangle of the n x n Fortran-ordered matrix at p strictly below (upper: the
   factor is upper) or strictly above the diagonal. */
static void zero_triangle(char *p, npy_intp n, npy_intp es, int upper) {
    for (npy_intp j = 0; j < n; ++j) {
        if (upper) memset(p + (j * n + j + 1) * es, 0, (size_t)((n - j - 1) * es));
        else memset(p + j * n * es, 0, (size_t)(j * es));
    }
}

/* A new reference to o, for returning an argument. */
static PyObject *same(PyObject *o) {
    Py_INCREF(o);
    return o;
}

static void *pointer(PyObject *capi, const char *name) {
    PyObject *capsule = PyDict_GetItemString(capi, name);
    if (capsule == NULL || !PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_KeyError, "LAPACK function %s not found", name);
        return NULL;
    }
    return PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule));
}

/* table[t * count + f] for t = s, d, c, z and f < count: the routine names[f] (its real and
   complex spelling) with the type letter prefixed, from capis[source[f]] (source NULL:
   capis[0]); -1 (exception set) when one is missing. */
static int fill_pointers(PyObject *const *capis, const int *source, const char *(*names)[2], int count, void **table) {
    static const char prefix[4] = {'s', 'd', 'c', 'z'};
    for (int t = 0; t < 4; ++t) {
        for (int f = 0; f < count; ++f) {
            char name[16];
            snprintf(name, sizeof name, "%c%s", prefix[t], names[f][t >= 2]);
            table[t * count + f] = pointer(capis[source == NULL ? 0 : source[f]], name);
            if (table[t * count + f] == NULL) return -1;
        }
    }
    return 0;
}

/* set_lapack(scipy.linalg.cython_lapack.__pyx_capi__) */
static PyObject *set_lapack(PyObject *self, PyObject *capi) {
    if (!PyDict_Check(capi)) {
        PyErr_SetString(PyExc_TypeError, "set_lapack expects cython_lapack.__pyx_capi__ (a dict)");
        return NULL;
    }
    void *table[4][NFUNC];
    if (fill_pointers(&capi, NULL, NAMES, NFUNC, &table[0][0]) < 0) return NULL;
    memcpy(LP, table, sizeof table);
    ready = 1;
    Py_RETURN_NONE;
}
""".replace("@ENUM@", _ENUM).replace("@NAMES@", _NAMES)

#: The base's entries of the extension's method table.
METHODS = r"""
    {"set_lapack", set_lapack, METH_O, "set_lapack(cython_lapack.__pyx_capi__)"},
"""
