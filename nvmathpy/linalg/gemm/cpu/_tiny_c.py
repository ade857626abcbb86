"""The compiled tiny-product extension: ``a @ b`` of small float32, float64, complex64 or
complex128 matrices, batched and broadcast as :func:`numpy.matmul`, in one C call (built in
the background at first use: :data:`TINY_EXTENSION`).

For a product of a few thousand multiply-adds NumPy's cost is the ufunc machinery and one
BLAS call per matrix (each packing its operands), not arithmetic. This extension checks the
operands, allocates the C-ordered result and computes every matrix of the batch with a loop
the compiler vectorises: tiles of up to ``MR`` rows and two SIMD vectors of columns are
accumulated in registers over the depth of the product, then stored once. It reads ``a`` with
any strides (a broadcast batch axis is stride 0); ``b`` is read in place where its rows are
contiguous whole vectors, else copied into a zero-padded buffer (once for a ``b`` shared by
the batch). A complex product is the real product of ``a``'s (real, imaginary) pairs with a
matrix of twice ``b``'s rows (see ``COMPLEX_KERNEL``).

``bias_relu(d, bias, relu)`` applies the ``bias``, ``relu`` and ``relu_bias`` epilogues to
such a result in place, in one pass in the same call's cost (where NumPy's ufuncs would take two
calls, each a few times the product's own time at these sizes).

``matmul(a, b)`` returns ``NotImplemented`` for what it does not take - not exactly an
``ndarray``, dtypes other than one shared float32/float64/complex64/complex128, byte-swapped
or unaligned data, fewer than 2 dimensions, inner dimensions or batch shapes that do not
match, complex matrices of more than ``16**3`` multiply-adds each - and the caller then makes
NumPy's call (which raises NumPy's errors for what does not match).
"""

from __future__ import annotations

from ....kernels.background_build import BackgroundExtension

__all__ = ["COMPLEX_TINY", "MODULE_NAME", "SOURCE", "TINY_EXTENSION"]

MODULE_NAME = "_nvmathpy_tiny_matmul"
#: The most multiply-adds per matrix the kernel takes in complex dtypes (real ones: any count;
#: the callers bound it by ``TINY_FLOPS``).
COMPLEX_TINY = 16**3

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <numpy/arrayobject.h>
#include <stdlib.h>
#include <string.h>

#define MR 6          /* rows of the result per register tile */
#define STACK_ELEMENTS 2048
/* Complex matrices of at most this many multiply-adds: where NumPy's fixed cost per call and per
   matrix dominates (the loop does twice a real product's work; ?gemm's complex kernels do
   better on larger matrices). */
#define COMPLEX_MAX @COMPLEX_MAX@
#define LONG_CALL (1 << 18)  /* multiply-adds from which the GIL is released (tens of microseconds) */

/* One register tile: rows R (<= MR) of the result from column j on, NV vectors wide (w valid
   columns), accumulated over the product's depth k in registers and stored once. Bp holds B's
   rows (leading dimension ldb), zero-padded to whole vectors. */
#define TILE(NAME, T, V)                                                                         \
static inline __attribute__((always_inline)) void NAME(                                        \
        int R, int NV, npy_intp k, const T *A, npy_intp sam, npy_intp sak, const T *Bp, npy_intp ldb, \
        T *C, npy_intp ldc, npy_intp w) {                                                      \
    V acc[MR][2];                                                                              \
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = (V){0};                                \
    for (npy_intp p = 0; p < k; p++) {                                                         \
        const T *b = Bp + p * ldb;                                                             \
        V b0, b1;                                                                              \
        memcpy(&b0, b, sizeof b0);                                                             \
        if (NV > 1) memcpy(&b1, b + sizeof(V) / sizeof(T), sizeof b1);                         \
        for (int r = 0; r < R; r++) {                                                          \
            T x = A[r * sam + p * sak];                                                        \
            acc[r][0] += x * b0;                                                               \
            if (NV > 1) acc[r][1] += x * b1;                                                   \
        }                                                                                      \
    }                                                                                          \
    if (w >= NV * (npy_intp)(sizeof(V) / sizeof(T))) {  /* whole vectors: fixed-size stores */   \
        for (int r = 0; r < R; r++) {                                                          \
            memcpy(C + r * ldc, &acc[r][0], sizeof(V));                                        \
            if (NV > 1) memcpy(C + r * ldc + sizeof(V) / sizeof(T), &acc[r][1], sizeof(V));    \
        }                                                                                      \
    } else {                                                                                   \
        for (int r = 0; r < R; r++) memcpy(C + r * ldc, acc[r], (size_t)w * sizeof(T));        \
    }                                                                                          \
}

/* The last m - i (< MR) rows of a column block, as one tile of that many rows. */
#define REST(TILE_NAME, NV)                                                                      \
    switch (m - i) {                                                                           \
        case 5: TILE_NAME(5, NV, k, A + i * sam, sam, sak, Bp + j, ldb, C + i * n + j, n, w); break; \
        case 4: TILE_NAME(4, NV, k, A + i * sam, sam, sak, Bp + j, ldb, C + i * n + j, n, w); break; \
        case 3: TILE_NAME(3, NV, k, A + i * sam, sam, sak, Bp + j, ldb, C + i * n + j, n, w); break; \
        case 2: TILE_NAME(2, NV, k, A + i * sam, sam, sak, Bp + j, ldb, C + i * n + j, n, w); break; \
        case 1: TILE_NAME(1, NV, k, A + i * sam, sam, sak, Bp + j, ldb, C + i * n + j, n, w); break; \
        default: break;                                                                        \
    }

/* C (m x n, row-major, contiguous) = A (m x k, strides sam, sak) @ Bp (k x n, leading dimension
   ldb, each row readable to a whole number of vectors), in register tiles. */
#define PRODUCT(NAME, TILE_NAME, T, V)                                                           \
static void NAME(npy_intp m, npy_intp n, npy_intp k, const T *A, npy_intp sam, npy_intp sak,  \
                 const T *Bp, npy_intp ldb, T *C) {                                            \
    const npy_intp L = sizeof(V) / sizeof(T);                                                  \
    for (npy_intp j = 0; j < n; j += 2 * L) {                                                  \
        npy_intp w = n - j, i = 0;                                                             \
        if (w > L) {                                                                           \
            for (; i + MR <= m; i += MR)                                                       \
                TILE_NAME(MR, 2, k, A + i * sam, sam, sak, Bp + j, ldb, C + i * n + j, n, w);  \
            REST(TILE_NAME, 2)                                                                 \
        } else {                                                                               \
            for (; i + MR <= m; i += MR)                                                       \
                TILE_NAME(MR, 1, k, A + i * sam, sam, sak, Bp + j, ldb, C + i * n + j, n, w);  \
            REST(TILE_NAME, 1)                                                                 \
        }                                                                                      \
    }                                                                                          \
}

/* Real C = A @ B (strides in elements). B is read in place where its rows are contiguous whole
   vectors, else copied into pack (k x whole vectors, zero-padded; pack_b = 0: it holds this B
   already, a b broadcast over the batch). */
#define KERNEL(NAME, PRODUCT_NAME, T, V)                                                         \
static void NAME(npy_intp m, npy_intp n, npy_intp k, const void *A_, npy_intp sam, npy_intp sak, \
                 const void *B_, npy_intp sbk, npy_intp sbn, void *C_, void *pack_, int pack_b) { \
    const T *A = (const T *)A_, *B = (const T *)B_;                                            \
    T *C = (T *)C_, *pack = (T *)pack_;                                                        \
    const npy_intp L = sizeof(V) / sizeof(T), npad = (n + L - 1) / L * L;                      \
    if (sbn == 1 && n % L == 0) {                                                              \
        PRODUCT_NAME(m, n, k, A, sam, sak, B, sbk, C);                                         \
        return;                                                                                \
    }                                                                                          \
    for (npy_intp p = 0; pack_b && p < k; p++) {                                               \
        T *row = pack + p * npad;                                                              \
        for (npy_intp j = 0; j < n; j++) row[j] = B[p * sbk + j * sbn];                        \
        for (npy_intp j = n; j < npad; j++) row[j] = 0;                                        \
    }                                                                                          \
    PRODUCT_NAME(m, n, k, A, sam, sak, pack, npad, C);                                         \
}

/* Complex C = A @ B, A, B and C as interleaved (real, imaginary) pairs of T, strides in complex
   elements: the real product of A's pairs (m x 2k) and the 2k x 2n matrix whose rows 2p and
   2p + 1 are B's row p as (re, im) and as (-im, re) pairs - row 2p gives each product's real
   part re*re - im*im and row 2p + 1 its imaginary part re*im + im*re. pack holds that matrix
   (zero-padded to whole vectors; pack_b = 0: built already), then A's pairs where A's rows are
   not contiguous. */
#define COMPLEX_KERNEL(NAME, PRODUCT_NAME, T, V)                                                 \
static void NAME(npy_intp m, npy_intp n, npy_intp k, const void *A_, npy_intp sam, npy_intp sak, \
                 const void *B_, npy_intp sbk, npy_intp sbn, void *C_, void *pack_, int pack_b) { \
    const T *A = (const T *)A_, *B = (const T *)B_;                                            \
    T *C = (T *)C_, *pack = (T *)pack_;                                                        \
    const npy_intp L = sizeof(V) / sizeof(T), npad = (2 * n + L - 1) / L * L;                  \
    for (npy_intp p = 0; pack_b && p < k; p++) {                                               \
        T *re = pack + 2 * p * npad, *im = re + npad;                                          \
        for (npy_intp j = 0; j < n; j++) {                                                     \
            const T *b = B + 2 * (p * sbk + j * sbn);                                          \
            re[2 * j] = b[0];                                                                  \
            re[2 * j + 1] = b[1];                                                              \
            im[2 * j] = -b[1];                                                                 \
            im[2 * j + 1] = b[0];                                                              \
        }                                                                                      \
        for (npy_intp j = 2 * n; j < npad; j++) re[j] = im[j] = 0;                             \
    }                                                                                          \
    if (sak == 1) {                                                                            \
        PRODUCT_NAME(m, 2 * n, 2 * k, A, 2 * sam, 1, pack, npad, C);                           \
        return;                                                                                \
    }                                                                                          \
    T *a = pack + 2 * k * npad;                                                                \
    for (npy_intp i = 0; i < m; i++)                                                           \
        for (npy_intp p = 0; p < k; p++) {                                                     \
            a[2 * (i * k + p)] = A[2 * (i * sam + p * sak)];                                   \
            a[2 * (i * k + p) + 1] = A[2 * (i * sam + p * sak) + 1];                           \
        }                                                                                      \
    PRODUCT_NAME(m, 2 * n, 2 * k, a, 2 * k, 1, pack, npad, C);                                 \
}

#ifdef __AVX512F__
#define VECTOR_BYTES 64
#else
#define VECTOR_BYTES 32
#endif
typedef double vec_d __attribute__((vector_size(VECTOR_BYTES)));
typedef float vec_f __attribute__((vector_size(VECTOR_BYTES)));
TILE(tile_d, double, vec_d)
TILE(tile_f, float, vec_f)
PRODUCT(product_d, tile_d, double, vec_d)
PRODUCT(product_f, tile_f, float, vec_f)
KERNEL(kernel_d, product_d, double, vec_d)
KERNEL(kernel_f, product_f, float, vec_f)
COMPLEX_KERNEL(kernel_z, product_d, double, vec_d)
COMPLEX_KERNEL(kernel_c, product_f, float, vec_f)

/* The four dtypes' index (s, d, c, z order), their kernels and pack sizes. */
typedef void (*kernel_t)(npy_intp, npy_intp, npy_intp, const void *, npy_intp, npy_intp, const void *, npy_intp,
                         npy_intp, void *, void *, int);
static int kind_of(int type) {
    switch (type) {
        case NPY_FLOAT: return 0;
        case NPY_DOUBLE: return 1;
        case NPY_CFLOAT: return 2;
        case NPY_CDOUBLE: return 3;
        default: return -1;
    }
}
static const kernel_t KERNELS[4] = {kernel_f, kernel_d, kernel_c, kernel_z};
/* The pack's size in elements of the real type for an m x k @ k x n product of dtype kind t
   (0: B is read in place). */
static npy_intp pack_size(int t, npy_intp m, npy_intp n, npy_intp k, npy_intp sak, npy_intp sbn) {
    npy_intp L = VECTOR_BYTES / (t % 2 ? 8 : 4);
    if (t >= 2) return 2 * k * ((2 * n + L - 1) / L * L) + (sak == 1 ? 0 : 2 * m * k);
    return sbn == 1 && n % L == 0 ? 0 : k * ((n + L - 1) / L * L);
}

/* The element strides of array x's last two axes, and of its batch axes aligned to the right
   with the result's nb batch axes (0 where x has no such axis or it has length 1); -1 when a
   stride is not a whole number of elements. */
static int strides_of(PyArrayObject *x, int nb, npy_intp itemsize, npy_intp *batch, npy_intp *rows, npy_intp *cols) {
    int nd = PyArray_NDIM(x), lead = nb - (nd - 2);
    npy_intp *st = PyArray_STRIDES(x), *sh = PyArray_DIMS(x);
    for (int d = 0; d < nd; d++)
        if (st[d] % itemsize) return -1;
    for (int d = 0; d < nb; d++)
        batch[d] = d < lead || sh[d - lead] == 1 ? 0 : st[d - lead] / itemsize;
    *rows = st[nd - 2] / itemsize;
    *cols = st[nd - 1] / itemsize;
    return 0;
}

static int takes(PyObject *o) {
    if (!PyArray_CheckExact(o)) return 0;
    PyArrayObject *x = (PyArrayObject *)o;
    return PyArray_NDIM(x) >= 2 && PyArray_ISALIGNED(x) && PyArray_ISNOTSWAPPED(x)
           && kind_of(PyArray_TYPE(x)) >= 0;
}

/* matmul(a, b): numpy.matmul(a, b) as a new C-ordered array, or NotImplemented */
static PyObject *tiny_matmul(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !takes(args[0]) || !takes(args[1])) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)args[0], *b = (PyArrayObject *)args[1];
    int type = PyArray_TYPE(a);
    if (PyArray_TYPE(b) != type) Py_RETURN_NOTIMPLEMENTED;
    int nda = PyArray_NDIM(a), ndb = PyArray_NDIM(b), nb = (nda > ndb ? nda : ndb) - 2;
    npy_intp *sa = PyArray_DIMS(a), *sb = PyArray_DIMS(b);
    npy_intp m = sa[nda - 2], k = sa[nda - 1], n = sb[ndb - 1];
    if (sb[ndb - 2] != k) Py_RETURN_NOTIMPLEMENTED;
    npy_intp dims[NPY_MAXDIMS], count = 1;
    for (int d = 0; d < nb; d++) {
        int da = d - (nb - (nda - 2)), db = d - (nb - (ndb - 2));
        npy_intp x = da >= 0 ? sa[da] : 1, y = db >= 0 ? sb[db] : 1;
        if (x != y && x != 1 && y != 1) Py_RETURN_NOTIMPLEMENTED;
        dims[d] = x == 1 ? y : x;
        count *= dims[d];
    }
    dims[nb] = m;
    dims[nb + 1] = n;
    npy_intp itemsize = PyArray_ITEMSIZE(a), ba[NPY_MAXDIMS], bb[NPY_MAXDIMS], sam, sak, sbk, sbn;
    if (strides_of(a, nb, itemsize, ba, &sam, &sak) < 0 || strides_of(b, nb, itemsize, bb, &sbk, &sbn) < 0)
        Py_RETURN_NOTIMPLEMENTED;
    if (kind_of(type) >= 2 && m * n * k > COMPLEX_MAX) Py_RETURN_NOTIMPLEMENTED;
    if (count == 0 || m == 0 || n == 0 || k == 0)  /* nothing to multiply: an empty or zero result */
        return PyArray_ZEROS(nb + 2, dims, type, 0);
    PyArrayObject *c = (PyArrayObject *)PyArray_EMPTY(nb + 2, dims, type, 0);
    if (c == NULL) return NULL;
    char *pa = PyArray_BYTES(a), *pb = PyArray_BYTES(b), *pc = PyArray_BYTES(c);
    int t = kind_of(type);
    kernel_t kernel = KERNELS[t];
    npy_intp index[NPY_MAXDIMS] = {0}, oa = 0, ob = 0, size = m * n * itemsize, last_ob = -1;
    npy_intp need = pack_size(t, m, n, k, sak, sbn), real_size = t % 2 ? 8 : 4;
    double stack[STACK_ELEMENTS];
    void *pack = need * real_size <= (npy_intp)sizeof stack ? (void *)stack : malloc((size_t)(need * real_size));
    if (pack == NULL) {
        Py_DECREF(c);
        return PyErr_NoMemory();
    }
    int unlocked = count * m * n * k >= LONG_CALL;
    PyThreadState *state = unlocked ? PyEval_SaveThread() : NULL;
    for (npy_intp i = 0; i < count; i++) {
        kernel(m, n, k, pa + oa * itemsize, sam, sak, pb + ob * itemsize, sbk, sbn, pc + i * size, pack, ob != last_ob);
        last_ob = ob;
        for (int d = nb - 1; d >= 0; d--) {  /* the next batch index, odometer-wise */
            oa += ba[d];
            ob += bb[d];
            if (++index[d] < dims[d]) break;
            oa -= ba[d] * dims[d];
            ob -= bb[d] * dims[d];
            index[d] = 0;
        }
    }
    if (unlocked) PyEval_RestoreThread(state);
    if (pack != (void *)stack) free(pack);
    return (PyObject *)c;
}

/* d += bias (one value per column, bias NULL: none), then d = maximum(d, 0) when relu, over rows of n
   real elements: NumPy's add and maximum (NaN kept, -0 becomes +0). */
#define BIAS_RELU(NAME, T)                                                                          \
static void NAME(char *data, const char *bias_, npy_intp rows, npy_intp n, int relu) {              \
    T *x = (T *)data;                                                                               \
    const T *bias = (const T *)bias_;                                                               \
    for (npy_intp i = 0; i < rows; i++, x += n) {                                                   \
        if (bias)                                                                                   \
            for (npy_intp j = 0; j < n; j++) x[j] += bias[j];                                       \
        if (relu)                                                                                   \
            for (npy_intp j = 0; j < n; j++) x[j] = x[j] > 0 || x[j] != x[j] ? x[j] : (T)0;         \
    }                                                                                               \
}
BIAS_RELU(bias_relu_f, float)
BIAS_RELU(bias_relu_d, double)

/* bias_relu(d, bias, relu): d + bias, then maximum(., 0) when relu, in place on d (a writeable
   C-contiguous array of the four dtypes, at least 1-D; relu for real d only); bias None or a
   C-contiguous array of d's dtype with one value per column of d (shape (n,), (1, n), ..., no more
   dimensions than d). Returns d, or NotImplemented for what it does not take. */
static PyObject *tiny_bias_relu(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyArray_CheckExact(args[0])) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *d = (PyArrayObject *)args[0];
    int t = kind_of(PyArray_TYPE(d)), relu = PyObject_IsTrue(args[2]), nd = PyArray_NDIM(d);
    if (relu < 0) return NULL;
    if (t < 0 || (relu && t >= 2) || nd < 1 || !PyArray_IS_C_CONTIGUOUS(d) || !PyArray_ISWRITEABLE(d)
        || !PyArray_ISALIGNED(d) || !PyArray_ISNOTSWAPPED(d))
        Py_RETURN_NOTIMPLEMENTED;
    npy_intp columns = PyArray_DIMS(d)[nd - 1], size = PyArray_SIZE(d);
    const char *bias = NULL;
    if (args[1] != Py_None) {
        if (!PyArray_CheckExact(args[1])) Py_RETURN_NOTIMPLEMENTED;
        PyArrayObject *c = (PyArrayObject *)args[1];
        int nc = PyArray_NDIM(c);
        if (PyArray_TYPE(c) != PyArray_TYPE(d) || nc < 1 || nc > nd || !PyArray_IS_C_CONTIGUOUS(c)
            || !PyArray_ISALIGNED(c) || !PyArray_ISNOTSWAPPED(c) || PyArray_DIMS(c)[nc - 1] != columns
            || PyArray_SIZE(c) != columns)
            Py_RETURN_NOTIMPLEMENTED;
        bias = PyArray_BYTES(c);
    }
    if (size > 0 && (bias || relu)) {
        npy_intp n = t >= 2 ? 2 * columns : columns;  /* complex: (re, im) pairs as real columns */
        PyThreadState *state = size >= LONG_CALL ? PyEval_SaveThread() : NULL;  /* a long pass: as NumPy's ufuncs */
        (t % 2 ? bias_relu_d : bias_relu_f)(PyArray_BYTES(d), bias, size / columns, n, relu);
        if (state) PyEval_RestoreThread(state);
    }
    Py_INCREF(d);
    return (PyObject *)d;
}

static PyMethodDef methods[] = {
    {"matmul", (PyCFunction)(void (*)(void))tiny_matmul, METH_FASTCALL,
     "matmul(a, b): numpy.matmul(a, b) of float32/float64/complex64/complex128 arrays as a new C-ordered array, "
     "or NotImplemented"},
    {"bias_relu", (PyCFunction)(void (*)(void))tiny_bias_relu, METH_FASTCALL,
     "bias_relu(d, bias, relu): d + bias (one value per column; None: none), then maximum(d, 0) if relu, "
     "in place on d; returns d, or NotImplemented"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "@MODULE@", NULL, -1, methods};

PyMODINIT_FUNC PyInit_@MODULE@(void) {
    import_array();
    return PyModule_Create(&module);
}
""".replace("@MODULE@", MODULE_NAME).replace("@COMPLEX_MAX@", str(COMPLEX_TINY))

#: The extension, loaded or built at first use (``TINY_EXTENSION.get()``: ``None`` until then).
TINY_EXTENSION = BackgroundExtension(MODULE_NAME, SOURCE)
