"""The compiled extension's matrix exponential (C, appended to :data:`._fast_c_base.SOURCE`):
``expm`` of a stack of square matrices by the scaling-and-squaring algorithm of Al-Mohy and
Higham (2009) with Padé degrees 3, 5, 7, 9 and 13, as :func:`scipy.linalg.expm` (SciPy 1.17)
computes it: the same choice of degree and scaling (exact 1-norms of the even powers below
order 400, from there LAPACK's ``?lacn2`` estimate, applying the formed powers ``A^8 = A^4 A^4`` and
``A^10 = A^6 A^4``), the same GEMMs, ``?getrf`` and the solve
of ``(V - U) X = U`` for ``r = I + 2 X`` (``?getrs``; below order 16 substitution here, as
OpenBLAS's ``?getrs`` with several right-hand sides starts its threads at any order), diagonal
matrices by their entries and the diagonal and first off-diagonal of triangular matrices
recomputed at every squaring.

Each matrix is copied to a C-ordered buffer, read by BLAS as its transpose ``B = A^T``: every
step is a polynomial or rational function of one matrix, so ``exp(B) = exp(A)^T`` comes out
C-ordered as ``exp(A)``; the 1-norms of ``A``'s powers are ``B``'s column-major row sums.
BLAS's ``?gemm``/``?gemv`` and LAPACK's ``?lacn2`` come from ``set_expm`` (SciPy's
``cython_blas`` and ``cython_lapack`` tables). Non-finite matrices and singular ``V - U`` give
``NotImplemented``, so the caller runs SciPy's own function and its outcome.
"""

from __future__ import annotations

__all__ = ["SOURCE", "METHODS"]

SOURCE = r"""
#include <complex.h>

typedef void (*gemm_t)(char *, char *, int *, int *, int *, void *, void *, int *, void *, int *, void *, void *, int *);
typedef void (*gemv_t)(char *, int *, int *, void *, void *, int *, void *, int *, void *, void *, int *);
typedef void (*rlacn2_t)(int *, void *, void *, int *, void *, int *, int *);     /* n, v, x, isgn, est, kase, isave */
typedef void (*clacn2_t)(int *, void *, void *, void *, int *, int *);            /* n, v, x, est, kase, isave */
enum { XGEMM, XGEMV, XLACN2, NXFUNC };
static void *XP[4][NXFUNC];
static int expm_ready = 0;

typedef union { float f[2]; double d[2]; } scalar_t;

/* The scalar x (real) of dtype t, for BLAS's alpha/beta. */
static scalar_t scalar(int t, double x) {
    scalar_t s;
    memset(&s, 0, sizeof s);
    if (DOUBLE[t]) s.d[0] = x;
    else s.f[0] = (float)x;
    return s;
}

/* c = a b + beta c, n x n column-major. */
static void mm(int t, int n, void *a, void *b, double beta, void *c) {
    scalar_t one = scalar(t, 1.0), bt = scalar(t, beta);
    char no = 'N';
    ((gemm_t)XP[t][XGEMM])(&no, &no, &n, &n, &n, &one, a, &n, b, &n, &bt, c, &n);
}

/* y = op(a) x, n x n column-major a of dtype t. */
static void mv(int t, char op, int n, void *a, void *x, void *y) {
    scalar_t one = scalar(t, 1.0), zero = scalar(t, 0.0);
    int inc = 1;
    ((gemv_t)XP[t][XGEMV])(&op, &n, &n, &one, a, &n, x, &inc, &zero, y, &inc);
}

static double complex get_el(int t, const char *p, npy_intp k) {
    switch (t) {
        case 0: return ((const float *)p)[k];
        case 1: return ((const double *)p)[k];
        case 2: return ((const float *)p)[2 * k] + I * ((const float *)p)[2 * k + 1];
        default: return ((const double *)p)[2 * k] + I * ((const double *)p)[2 * k + 1];
    }
}

static void set_el(int t, char *p, npy_intp k, double complex v) {
    switch (t) {
        case 0: ((float *)p)[k] = (float)creal(v); break;
        case 1: ((double *)p)[k] = creal(v); break;
        case 2: ((float *)p)[2 * k] = (float)creal(v); ((float *)p)[2 * k + 1] = (float)cimag(v); break;
        default: ((double *)p)[2 * k] = creal(v); ((double *)p)[2 * k + 1] = cimag(v);
    }
}

/* Whether element e of the dtype-t array at p is nonzero. */
static int nonzero(int t, const char *p, npy_intp e) {
    npy_intp r = REALS[t];
    if (DOUBLE[t]) {
        const double *q = (const double *)p + e * r;
        return q[0] != 0 || (r == 2 && q[1] != 0);
    }
    const float *q = (const float *)p + e * r;
    return q[0] != 0 || (r == 2 && q[1] != 0);
}

/* dst = sum of c[k] src[k] (k < count <= 4) + d I, n x n of dtype t; dst may be one of src. */
#define COMBINE(T)                                                                                \
    {                                                                                             \
        T *o = (T *)dst;                                                                          \
        const T *s0 = (const T *)src[0], *s1 = (const T *)src[count > 1], *s2 = (const T *)src[count > 2 ? 2 : 0], \
                *s3 = (const T *)src[count > 3 ? 3 : 0];                                          \
        T c0 = (T)c[0], c1 = (T)(count > 1 ? c[1] : 0), c2 = (T)(count > 2 ? c[2] : 0), c3 = (T)(count > 3 ? c[3] : 0); \
        switch (count) {                                                                          \
            case 1: for (npy_intp e = 0; e < m; ++e) o[e] = c0 * s0[e]; break;                    \
            case 2: for (npy_intp e = 0; e < m; ++e) o[e] = c0 * s0[e] + c1 * s1[e]; break;       \
            case 3: for (npy_intp e = 0; e < m; ++e) o[e] = c0 * s0[e] + c1 * s1[e] + c2 * s2[e]; break; \
            default: for (npy_intp e = 0; e < m; ++e) o[e] = c0 * s0[e] + c1 * s1[e] + c2 * s2[e] + c3 * s3[e]; \
        }                                                                                         \
        for (npy_intp i = 0; i < n; ++i) o[(i * n + i) * r] += (T)d;                              \
    }
static void combine(int t, void *dst, void *const *src, const double *c, int count, npy_intp n, double d) {
    npy_intp r = REALS[t], m = n * n * r;
    if (DOUBLE[t]) COMBINE(double)
    else COMBINE(float)
}

/* dst[j] = sum of c[j][k] src[k] (k < 3) + d[j] I for j < 4, n x n of dtype t, in one pass;
   a dst may be one of src. */
#define COMBINE_FOUR(T)                                                                           \
    {                                                                                             \
        const T *x = (const T *)src[0], *y = (const T *)src[1], *z = (const T *)src[2];          \
        T *o0 = (T *)dst[0], *o1 = (T *)dst[1], *o2 = (T *)dst[2], *o3 = (T *)dst[3];             \
        T k[4][3];                                                                                \
        for (int j = 0; j < 4; ++j)                                                               \
            for (int i = 0; i < 3; ++i) k[j][i] = (T)c[j][i];                                     \
        for (npy_intp e = 0; e < m; ++e) {                                                        \
            T p = x[e], q = y[e], u = z[e];                                                       \
            o0[e] = k[0][0] * p + k[0][1] * q + k[0][2] * u;                                      \
            o1[e] = k[1][0] * p + k[1][1] * q + k[1][2] * u;                                      \
            o2[e] = k[2][0] * p + k[2][1] * q + k[2][2] * u;                                      \
            o3[e] = k[3][0] * p + k[3][1] * q + k[3][2] * u;                                      \
        }                                                                                         \
        for (npy_intp i = 0; i < n; ++i) {                                                        \
            o0[(i * n + i) * r] += (T)d[0];                                                       \
            o1[(i * n + i) * r] += (T)d[1];                                                       \
            o2[(i * n + i) * r] += (T)d[2];                                                       \
            o3[(i * n + i) * r] += (T)d[3];                                                       \
        }                                                                                         \
    }
static void combine_four(int t, void *const *dst, void *const *src, const double (*c)[3], const double *d, npy_intp n) {
    npy_intp r = REALS[t], m = n * n * r;
    if (DOUBLE[t]) COMBINE_FOUR(double)
    else COMBINE_FOUR(float)
}

/* out[e] = |p[e]| for the m elements of dtype t at p (out: its real type). */
static void absolute(int t, const void *p, void *out, npy_intp m) {
    switch (t) {
        case 0: for (npy_intp e = 0; e < m; ++e) ((float *)out)[e] = fabsf(((const float *)p)[e]); break;
        case 1: for (npy_intp e = 0; e < m; ++e) ((double *)out)[e] = fabs(((const double *)p)[e]); break;
        case 2: for (npy_intp e = 0; e < m; ++e) ((float *)out)[e] = cabsf(((const float complex *)p)[e]); break;
        default: for (npy_intp e = 0; e < m; ++e) ((double *)out)[e] = cabs(((const double complex *)p)[e]);
    }
}

/* The 1-norm of the matrix whose C-ordered n x n entries are at p: its largest column sum
   (sums: n doubles, scratch: n * n reals of t's real type). */
static double norm1(int t, const char *p, npy_intp n, double *sums, void *scratch) {
    absolute(t, p, scratch, n * n);
    for (npy_intp j = 0; j < n; ++j) sums[j] = 0;
    for (npy_intp i = 0; i < n; ++i) {
        if (DOUBLE[t]) for (npy_intp j = 0; j < n; ++j) sums[j] += ((const double *)scratch)[i * n + j];
        else for (npy_intp j = 0; j < n; ++j) sums[j] += ((const float *)scratch)[i * n + j];
    }
    double best = 0;
    for (npy_intp j = 0; j < n; ++j) best = sums[j] > best ? sums[j] : best;
    return best;
}

/* The largest of the n reals (dtype t's real type) at v. */
static double vmax(int t, const void *v, npy_intp n) {
    double best = 0;
    for (npy_intp i = 0; i < n; ++i) {
        double x = DOUBLE[t] ? ((const double *)v)[i] : ((const float *)v)[i];
        best = x > best ? x : best;
    }
    return best;
}

/* The ?lacn2 estimate of ||P Q||_1 for the C-ordered powers P and Q of one matrix (read as
   column-major P^T and Q^T: P Q x is two ?gemv with 'T'); x, v, y: n elements each. */
static double norm1_estimate(int t, int n, void *p, void *q, char *x, char *v, char *y, int *isgn) {
    int kase = 0, isave[3];
    scalar_t est = scalar(t, 0.0);
    for (;;) {
        if (t < 2) ((rlacn2_t)XP[t][XLACN2])(&n, v, x, isgn, &est, &kase, isave);
        else ((clacn2_t)XP[t][XLACN2])(&n, v, x, &est, &kase, isave);
        if (kase == 0) break;
        /* kase 1: x = P Q x; kase 2: x = (P Q)^H x = conj(P^T Q^T conj(x)) (P, Q commute) */
        if (kase == 2) conjugate(t, x, n);
        mv(t, kase == 1 ? 'T' : 'N', n, q, x, y);
        mv(t, kase == 1 ? 'T' : 'N', n, p, y, x);
        if (kase == 2) conjugate(t, x, n);
    }
    return DOUBLE[t] ? est.d[0] : (double)est.f[0];
}

/* Below this order the LU solve of (V - U) X = U runs here: OpenBLAS's ?getrs with several
   right-hand sides starts its threads at any order, which costs more than the solve. */
#define EXPM_SMALL_SOLVE 16

/* b = (P L U)^-1 b for ?getrf's factors lu and pivots of an n x n matrix, n right-hand sides. */
#define LU_SOLVE(NAME, T)                                                                           \
    static void NAME(const T *lu, const int *ipiv, T *b, int n) {                                   \
        for (int j = 0; j < n; ++j) {                                                               \
            T *x = b + (npy_intp)j * n;                                                             \
            for (int i = 0; i < n; ++i) {                                                           \
                int p = ipiv[i] - 1;                                                                \
                T v = x[i];                                                                         \
                x[i] = x[p];                                                                        \
                x[p] = v;                                                                           \
            }                                                                                       \
            for (int k = 0; k < n; ++k)                                                             \
                for (int i = k + 1; i < n; ++i) x[i] -= lu[i + (npy_intp)k * n] * x[k];             \
            for (int k = n - 1; k >= 0; --k) {                                                      \
                x[k] /= lu[k + (npy_intp)k * n];                                                    \
                for (int i = 0; i < k; ++i) x[i] -= lu[i + (npy_intp)k * n] * x[k];                 \
            }                                                                                       \
        }                                                                                           \
    }
LU_SOLVE(lu_solve_s, float)
LU_SOLVE(lu_solve_d, double)
LU_SOLVE(lu_solve_c, float complex)
LU_SOLVE(lu_solve_z, double complex)

/* (V - U) X = U: X over U, the factors of V - U in lu (?getrs from EXPM_SMALL_SOLVE on). */
static void solve_uv(int t, int n, void *lu, int *ipiv, void *u) {
    if (n >= EXPM_SMALL_SOLVE) {
        char no = 'N';
        int info = 0;
        LAPACK(t, GETRS, getrs_t)(&no, &n, &n, lu, &n, ipiv, u, &n, &info);
    } else if (t == 0) lu_solve_s((const float *)lu, ipiv, (float *)u, n);
    else if (t == 1) lu_solve_d((const double *)lu, ipiv, (double *)u, n);
    else if (t == 2) lu_solve_c((const float complex *)lu, ipiv, (float complex *)u, n);
    else lu_solve_z((const double complex *)lu, ipiv, (double complex *)u, n);
}

typedef struct {
    int t, n;
    char *slot[7];          /* A, A^2, A^4, A^6, then scratch: C-ordered A-space (column-major B = A^T) */
    char *absa, *spin;      /* |A| (real type), two vectors of n reals */
    char *x, *v, *y;        /* n elements each, for the estimate */
    int *isgn, *ipiv;
    double *sums;
} expm_work;

/* spin <- |A|^T spin, k times (|A|^T is absa read column-major); the largest entry after. */
static double spin(expm_work *w, int k) {
    npy_intp rs = DOUBLE[w->t] ? 8 : 4;
    char *from = w->spin, *to = w->spin + w->n * rs;
    for (int i = 0; i < k; ++i) {
        mv(DOUBLE[w->t], 'N', w->n, w->absa, from, to);
        memcpy(from, to, (size_t)(w->n * rs));
    }
    return vmax(w->t, from, w->n);
}

/* max(0, ceil(log2(power_norm / norm_a / c) / p)), 0 where that is not a finite int (a zero or
   overflowed power: SciPy's conversion makes those 0 too). */
static int extra(double power_norm, double norm_a, double c, int p) {
    double l = ceil(log2(power_norm / norm_a / c) / p);
    return l > 0 && l < 2147483647.0 ? (int)l : 0;
}

/* The 1-norm of slot[a] slot[b] (below order 400, formed in slot[4]) or its estimate. */
static double power_norm(expm_work *w, int a, int b) {
    if (w->n < 400) {
        mm(w->t, w->n, w->slot[a], w->slot[b], 0.0, w->slot[4]);
        return norm1(w->t, w->slot[4], w->n, w->sums, w->slot[6]);
    }
    for (npy_intp i = 0; i < w->n; ++i) set_el(w->t, w->x, i, 0);
    return norm1_estimate(w->t, w->n, w->slot[a], w->slot[b], w->x, w->v, w->y, w->isgn);
}

/* The Pade degree m and scaling s of A (slot[0]); fills A^2, A^4, A^6 (and A^8 in slot[4] for
   m = 9) and scales the powers by 2^-s for m = 13. */
static void pick_degree(expm_work *w, int *m, int *s) {
    static const double theta[5] = {1.495585217958292e-002, 2.539398330063230e-001, 9.504178996162932e-001,
                                    2.097847961257068e+000, 4.250000000000000e+000};
    static const double coeff[2][5] = {
        {6.0081481933593750e-03, 5.9956512451171875e+02, 2.6750196800000000e+08, 3.5252480874905600e+14,
         6.7502722515508048e+27},
        {1.1191048088221578e-11, 1.1167770708198077e-06, 4.9826124310493469e-01, 6.5662862500000000e+05,
         1.2573361865339437e+19}};
    const double *cf = coeff[DOUBLE[w->t]];
    int t = w->t, n = w->n;
    npy_intp n2 = (npy_intp)n * n;
    absolute(t, w->slot[0], w->absa, n2);
    for (npy_intp i = 0; i < n; ++i) {
        if (DOUBLE[t]) ((double *)w->spin)[i] = 1.0;
        else ((float *)w->spin)[i] = 1.0f;
    }
    double norm_a = spin(w, 1);
    mm(t, n, w->slot[0], w->slot[0], 0.0, w->slot[1]);
    mm(t, n, w->slot[1], w->slot[1], 0.0, w->slot[2]);
    mm(t, n, w->slot[2], w->slot[1], 0.0, w->slot[3]);
    double d4 = pow(norm1(t, w->slot[2], n, w->sums, w->slot[6]), 0.25);
    double d6 = pow(norm1(t, w->slot[3], n, w->sums, w->slot[6]), 1.0 / 6);
    double eta1 = fmax(d4, d6);
    *m = 3;
    *s = 0;
    double p7 = spin(w, 6);         /* ||A^7||_1 bounds, spun as SciPy does whatever the test */
    if (eta1 < theta[0] && extra(p7, norm_a, cf[0], 6) == 0) return;
    *m = 5;
    double p11 = spin(w, 4);
    if (eta1 < theta[1] && extra(p11, norm_a, cf[1], 10) == 0) return;
    double d8 = pow(power_norm(w, 2, 2), 0.125), eta2 = fmax(d6, d8);
    *m = 7;
    double p15 = spin(w, 4);
    if (eta2 < theta[2] && extra(p15, norm_a, cf[2], 14) == 0) return;
    *m = 9;
    double p19 = spin(w, 4);
    if (eta2 < theta[3] && extra(p19, norm_a, cf[3], 18) == 0) {
        if (n >= 400) mm(t, n, w->slot[2], w->slot[2], 0.0, w->slot[4]);
        return;
    }
    double d10 = pow(power_norm(w, 3, 2), 0.1), eta4 = fmin(eta2, fmax(d8, d10));
    double ls = ceil(log2(eta4 / theta[4]));
    *m = 13;
    *s = ls > 0 ? (int)ls : 0;
    if (*s) {           /* the spin vector has seen |A| 19 times */
        double f = ldexp(1.0, -*s), g = ldexp(1.0, -19 * *s);
        for (npy_intp e = 0; e < n2; ++e) {
            if (DOUBLE[t]) ((double *)w->absa)[e] *= f;
            else ((float *)w->absa)[e] *= (float)f;
        }
        for (npy_intp i = 0; i < n; ++i) {
            if (DOUBLE[t]) ((double *)w->spin)[i] *= g;
            else ((float *)w->spin)[i] *= (float)g;
        }
        norm_a *= f;
    }
    *s += extra(spin(w, 8), norm_a, cf[4], 26);
    for (int k = 0; *s && k < 4; ++k) {
        double f = ldexp(1.0, -*s * (k == 0 ? 1 : 2 * k));
        combine(t, w->slot[k], (void *const *)&w->slot[k], &f, 1, n, 0.0);
    }
}

/* U in slot[3], V in slot[1] for degree m (Higham's evaluation). */
static void pade_uv(expm_work *w, int m) {
    static const double b3[] = {120.0, 60.0, 12.0};
    static const double b5[] = {30240.0, 15120.0, 3360.0, 420.0, 30.0};
    static const double b7[] = {17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0};
    static const double b9[] = {17643225600.0, 8821612800.0, 2075673600.0, 302702400.0, 30270240.0, 2162160.0,
                                110880.0, 3960.0, 90.0};
    static const double b13[] = {64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
                                 1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
                                 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0};
    int t = w->t, n = w->n;
    char **a = w->slot, *k = a[4];     /* U = A k */
    if (m == 3) {
        double c[1] = {1.0}, cv[1] = {b3[2]};
        combine(t, a[4], (void *const *)&a[1], c, 1, n, b3[1]);
        combine(t, a[1], (void *const *)&a[1], cv, 1, n, b3[0]);
    } else if (m == 5) {
        void *src[2] = {a[2], a[1]};
        double cu[2] = {1.0, b5[3]}, cv[2] = {b5[4], b5[2]};
        combine(t, a[4], src, cu, 2, n, b5[1]);
        combine(t, a[1], src, cv, 2, n, b5[0]);
    } else if (m == 7) {
        void *src[3] = {a[3], a[2], a[1]};
        double cu[3] = {1.0, b7[5], b7[3]}, cv[3] = {b7[6], b7[4], b7[2]};
        combine(t, a[4], src, cu, 3, n, b7[1]);
        combine(t, a[1], src, cv, 3, n, b7[0]);
    } else if (m == 9) {
        void *src[4] = {a[4], a[3], a[2], a[1]};
        double cu[4] = {1.0, b9[7], b9[5], b9[3]}, cv[4] = {b9[8], b9[6], b9[4], b9[2]};
        combine(t, a[5], src, cv, 4, n, b9[0]);
        combine(t, a[4], src, cu, 4, n, b9[1]);
        memcpy(a[1], a[5], (size_t)((npy_intp)n * n * ITEMSIZE[t]));
    } else {
        /* U = A (A6 (A6 + b11 A4 + b9 A2) + b7 A6 + b5 A4 + b3 A2 + b1 I),
           V = A6 (b12 A6 + b10 A4 + b8 A2) + b6 A6 + b4 A4 + b2 A2 + b0 I */
        void *src[3] = {a[3], a[2], a[1]}, *dst[4] = {a[4], a[5], a[6], a[1]};
        const double c[4][3] = {{1.0, b13[11], b13[9]}, {b13[12], b13[10], b13[8]}, {b13[7], b13[5], b13[3]},
                                {b13[6], b13[4], b13[2]}};
        const double d[4] = {0.0, 0.0, b13[1], b13[0]};
        combine_four(t, dst, src, c, d, n);
        mm(t, n, a[3], a[5], 1.0, a[1]);
        mm(t, n, a[3], a[4], 1.0, a[6]);
        k = a[6];
    }
    mm(t, n, k, a[0], 0.0, a[3]);
}

/* The diagonal of C-ordered p set to exp(2^-k diag), and (side +1: upper, -1: lower, 0: none)
   its first off-diagonal to exp's divided differences times 2^-k times the original's. */
static void triangular_fix(int t, char *p, const char *orig, npy_intp n, int k, int side) {
    double f = ldexp(1.0, -k);
    for (npy_intp i = 0; i < n; ++i) set_el(t, p, i * n + i, cexp(f * get_el(t, orig, i * n + i)));
    if (side == 0) return;
    for (npy_intp i = 0; i + 1 < n; ++i) {
        double complex x0 = f * get_el(t, orig, i * n + i), x1 = f * get_el(t, orig, (i + 1) * n + i + 1);
        double complex dx = x1 - x0, q = dx == 0 ? cexp(x0) : (cexp(x1) - cexp(x0)) / dx;
        npy_intp e = side > 0 ? i * n + i + 1 : (i + 1) * n + i;
        set_el(t, p, e, q * (f * get_el(t, orig, e)));
    }
}

/* exp of the C-ordered matrix in slot[0] (its original in orig) into out; 0, or -1 when V - U
   is singular. */
static int expm_one(expm_work *w, const char *orig, char *out) {
    int t = w->t, n = w->n, lower = 0, upper = 0;
    npy_intp n2 = (npy_intp)n * n, es = ITEMSIZE[t];
    for (npy_intp i = 0; i < n && !(lower && upper); ++i)
        for (npy_intp j = 0; j < n; ++j)
            if (i != j && nonzero(t, orig, i * n + j)) {
                if (i > j) lower = 1;
                else upper = 1;
            }
    if (!lower && !upper) {
        memset(out, 0, (size_t)(n2 * es));
        triangular_fix(t, out, orig, n, 0, 0);
        return 0;
    }
    int m, s, info = 0, triangular = !lower || !upper, side = upper ? 1 : -1;
    pick_degree(w, &m, &s);
    pade_uv(w, m);
    double cd[2] = {1.0, -1.0}, c2[1] = {2.0};
    void *vu[2] = {w->slot[1], w->slot[3]};
    combine(t, w->slot[1], vu, cd, 2, n, 0.0);                 /* V - U */
    LAPACK(t, GETRF, getrf_t)(&n, &n, w->slot[1], &n, w->ipiv, &info);
    if (info != 0) return -1;
    solve_uv(t, n, w->slot[1], w->ipiv, w->slot[3]);
    char *r = s ? w->slot[2] : out, *other = w->slot[4];
    combine(t, r, (void *const *)&w->slot[3], c2, 1, n, 1.0);  /* I + 2 (V - U)^-1 U */
    if (s && triangular) triangular_fix(t, r, orig, n, s, 0);
    for (int k = s - 1; k >= 0; --k) {
        char *dst = k == 0 ? out : other;
        mm(t, n, r, r, 0.0, dst);
        other = r;
        r = dst;
        if (triangular) triangular_fix(t, r, orig, n, k, side);
    }
    if (triangular)
        for (npy_intp i = 0; i < n; ++i)
            for (npy_intp j = 0; j < n; ++j)
                if (upper ? i > j : i < j) set_el(t, out, i * n + j, 0);
    return 0;
}

/* expm(a): exp of each n x n matrix of a (..., n, n), n >= 2, all finite; NotImplemented
   for other operands, non-finite entries and singular V - U */
static PyObject *fast_expm(PyObject *self, PyObject *arg) {
    int t = kind_of(arg);
    if (t < 0 || !ready || !expm_ready) Py_RETURN_NOTIMPLEMENTED;
    PyArrayObject *a = (PyArrayObject *)arg;
    int nd = PyArray_NDIM(a);
    if (nd < 2 || nd > NPY_MAXDIMS) Py_RETURN_NOTIMPLEMENTED;
    npy_intp *dims = PyArray_DIMS(a), *strides = PyArray_STRIDES(a), n = dims[nd - 1], batch = 1;
    if (n < 2 || n > BIGN || dims[nd - 2] != n) Py_RETURN_NOTIMPLEMENTED;
    for (int k = 0; k < nd - 2; ++k) batch *= dims[k];
    if (batch == 0) Py_RETURN_NOTIMPLEMENTED;
    npy_intp n2 = n * n, es = ITEMSIZE[t], rs = DOUBLE[t] ? 8 : 4;
    size_t bytes = (size_t)(8 * n2 * es + n2 * rs + 2 * n * rs + 3 * n * es + 2 * n * sizeof(int) + n * 8);
    char *buffer = (char *)big_malloc(bytes);
    if (buffer == NULL) return PyErr_NoMemory();
    PyArrayObject *out = (PyArrayObject *)PyArray_EMPTY(nd, dims, PyArray_TYPE(a), 0);
    if (out == NULL) {
        free(buffer);
        return NULL;
    }
    expm_work w;
    w.t = t;
    w.n = (int)n;
    for (int k = 0; k < 7; ++k) w.slot[k] = buffer + k * n2 * es;
    char *orig = buffer + 7 * n2 * es;
    w.sums = (double *)(orig + n2 * es);
    w.absa = (char *)(w.sums + n);
    w.spin = w.absa + n2 * rs;
    w.x = w.spin + 2 * n * rs;
    w.v = w.x + n * es;
    w.y = w.v + n * es;
    w.isgn = (int *)(w.y + n * es);
    w.ipiv = w.isgn + n;
    int status = 0;
    const char *base = PyArray_BYTES(a);
    char *dst = PyArray_BYTES(out);
    Py_BEGIN_ALLOW_THREADS
    for (npy_intp b = 0; b < batch && status == 0; ++b) {
        npy_intp offset = 0, rest = b;
        for (int k = nd - 3; k >= 0; --k) {
            offset += (rest % dims[k]) * strides[k];
            rest /= dims[k];
        }
        /* C-ordered copy: the n x n column-major copy of a^T */
        to_fortran(orig, base + offset, n, n, strides[nd - 1], strides[nd - 2], es);
        if (!all_finite(t, orig, n2)) status = 1;
        else {
            memcpy(w.slot[0], orig, (size_t)(n2 * es));
            status = expm_one(&w, orig, dst + b * n2 * es) ? 1 : 0;
        }
    }
    Py_END_ALLOW_THREADS
    free(buffer);
    if (status) {
        Py_DECREF(out);
        Py_RETURN_NOTIMPLEMENTED;
    }
    return (PyObject *)out;
}

/* set_expm(cython_blas.__pyx_capi__, cython_lapack.__pyx_capi__) */
static PyObject *set_expm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyDict_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "set_expm expects cython_blas and cython_lapack's __pyx_capi__ (dicts)");
        return NULL;
    }
    static const char *names[NXFUNC][2] = {{"gemm", "gemm"}, {"gemv", "gemv"}, {"lacn2", "lacn2"}};
    static const int source[NXFUNC] = {0, 0, 1};      /* BLAS, BLAS, LAPACK */
    void *table[4][NXFUNC];
    if (fill_pointers(args, source, names, NXFUNC, &table[0][0]) < 0) return NULL;
    memcpy(XP, table, sizeof table);
    expm_ready = 1;
    Py_RETURN_NONE;
}
"""

#: This group's entries of the extension's method table.
METHODS = r"""
    {"expm", fast_expm, METH_O, "expm(a): exp of each n x n matrix of a (..., n, n), or NotImplemented"},
    {"set_expm", (PyCFunction)(void (*)(void))set_expm, METH_FASTCALL,
     "set_expm(cython_blas.__pyx_capi__, cython_lapack.__pyx_capi__)"},
"""
