// Interleaved complex numbers (re, im: C99 _Complex, CuPy's complex64/complex128, cuSPARSE's
// CUDA_C_32F/CUDA_C_64F, the crate's DevComplex) and their arithmetic, shared by the complex
// SpMV and the complex BLAS-1 kernels.
//
// The solver kernels (solvers/*.cu) are written once for real and complex element types with
// the scalar functions at the end of this file (re_, conj_, abs2_, dotc_, ...), which are the
// identity or the plain real expression for float and double, so real kernels compute exactly
// what they computed before complex types existed.
//
// The two types are trivially copyable (kernel arguments, __shared__ arrays, unions) and carry
// the operators and load/store/shuffle overloads that let a kernel template written for float
// and double (the fused nonzero-balanced SpMV) be instantiated for them unchanged: `T(0)`,
// `+`, `+=`, `*` (the complex product), `==`, `__ldg`, `__ldcg`, `__ldcs`, `__stcs`, `__shfl_*_sync`, and
// `ld_volatile` for a value another block wrote.
#pragma once

// The warp shuffle SHFL of a complex value of type NAME: its two parts shuffled alike (ARG: the
// type of the lane or delta argument).
#define COMPLEX_SHFL(NAME, SHFL, ARG)                                                              \
    __device__ __forceinline__ NAME SHFL(unsigned m, NAME v, ARG s, int w = 32) {                  \
        NAME r;                                                                                    \
        r.re = SHFL(m, v.re, s, w);                                                                \
        r.im = SHFL(m, v.im, s, w);                                                                \
        return r;                                                                                  \
    }

#define COMPLEX_TYPE(NAME, R, ALIGN)                                                               \
    struct __align__(ALIGN) NAME {                                                                 \
        R re, im;                                                                                  \
        NAME() = default;                                                                          \
        __device__ explicit NAME(R r) : re(r), im(0) {}                                            \
        __device__ NAME& operator+=(const NAME& b) {                                               \
            re += b.re;                                                                            \
            im += b.im;                                                                            \
            return *this;                                                                          \
        }                                                                                          \
        __device__ NAME& operator-=(const NAME& b) {                                               \
            re -= b.re;                                                                            \
            im -= b.im;                                                                            \
            return *this;                                                                          \
        }                                                                                          \
        __device__ NAME& operator*=(const NAME& b) {                                               \
            const R r = re * b.re - im * b.im;                                                     \
            im = re * b.im + im * b.re;                                                            \
            re = r;                                                                                \
            return *this;                                                                          \
        }                                                                                          \
    };                                                                                             \
    __device__ __forceinline__ NAME operator-(NAME a, NAME b) {                                    \
        a -= b;                                                                                    \
        return a;                                                                                  \
    }                                                                                              \
    __device__ __forceinline__ NAME operator-(NAME a) {                                            \
        a.re = -a.re;                                                                              \
        a.im = -a.im;                                                                              \
        return a;                                                                                  \
    }                                                                                              \
    /* a / b as num-complex divides: a times conj(b), over |b|^2. */                               \
    __device__ __forceinline__ NAME operator/(NAME a, NAME b) {                                    \
        const R d = b.re * b.re + b.im * b.im;                                                     \
        NAME r;                                                                                    \
        r.re = (a.re * b.re + a.im * b.im) / d;                                                    \
        r.im = (a.im * b.re - a.re * b.im) / d;                                                    \
        return r;                                                                                  \
    }                                                                                              \
    __device__ __forceinline__ bool operator!=(NAME a, NAME b) {                                   \
        return a.re != b.re || a.im != b.im;                                                       \
    }                                                                                              \
    COMPLEX_SHFL(NAME, __shfl_down_sync, unsigned)                                                 \
    __device__ __forceinline__ NAME operator+(NAME a, NAME b) {                                    \
        a += b;                                                                                    \
        return a;                                                                                  \
    }                                                                                              \
    __device__ __forceinline__ NAME operator*(NAME a, NAME b) {                                    \
        NAME r;                                                                                    \
        r.re = a.re * b.re - a.im * b.im;                                                          \
        r.im = a.re * b.im + a.im * b.re;                                                          \
        return r;                                                                                  \
    }                                                                                              \
    __device__ __forceinline__ bool operator==(NAME a, NAME b) {                                   \
        return a.re == b.re && a.im == b.im;                                                       \
    }                                                                                              \
    __device__ __forceinline__ NAME ld_volatile(const NAME* p) {                                   \
        const volatile R* q = reinterpret_cast<const volatile R*>(p);                              \
        NAME r;                                                                                    \
        r.re = q[0];                                                                               \
        r.im = q[1];                                                                               \
        return r;                                                                                  \
    }                                                                                              \
    __device__ __forceinline__ NAME __ldcs(const NAME* p) {                                        \
        NAME r;                                                                                    \
        r.re = __ldcs(&p->re);                                                                     \
        r.im = __ldcs(&p->im);                                                                     \
        return r;                                                                                  \
    }                                                                                              \
    __device__ __forceinline__ void __stcs(NAME* p, NAME v) {                                      \
        __stcs(&p->re, v.re);                                                                      \
        __stcs(&p->im, v.im);                                                                      \
    }                                                                                              \
    COMPLEX_SHFL(NAME, __shfl_sync, int)                                                           \
    COMPLEX_SHFL(NAME, __shfl_up_sync, unsigned)                                                   \
    COMPLEX_SHFL(NAME, __shfl_xor_sync, int)

COMPLEX_TYPE(cfloat, float, 8)
COMPLEX_TYPE(cdouble, double, 16)
#undef COMPLEX_TYPE
#undef COMPLEX_SHFL

// A value of a real type that another block of the same launch wrote (read from L2).
template <typename T> __device__ __forceinline__ T ld_volatile(const T* p) {
    return *(const volatile T*)p;
}

template <typename C> struct real_of;
template <> struct real_of<cfloat> {
    typedef float type;
};
template <> struct real_of<cdouble> {
    typedef double type;
};

template <typename C> struct vec2_of;
template <> struct vec2_of<cfloat> {
    typedef float2 type;
};
template <> struct vec2_of<cdouble> {
    typedef double2 type;
};

// One 8- or 16-byte load of a complex value through the vector load LOAD of the same width:
// ldg_c through the read-only cache (__ldg), ldcg_c from L2 only (__ldcg: a value another block
// of the launch wrote), ldcs_c streamed (__ldcs: read once, evict-first, keeping L2 for others).
#define COMPLEX_LOAD(NAME, LOAD)                                                                   \
    template <typename C> __device__ __forceinline__ C NAME(const C* p) {                          \
        typedef typename vec2_of<C>::type V;                                                       \
        const V v = LOAD(reinterpret_cast<const V*>(p));                                           \
        C c;                                                                                       \
        c.re = v.x;                                                                                \
        c.im = v.y;                                                                                \
        return c;                                                                                  \
    }
COMPLEX_LOAD(ldg_c, __ldg)
COMPLEX_LOAD(ldcg_c, __ldcg)
COMPLEX_LOAD(ldcs_c, __ldcs)
#undef COMPLEX_LOAD

// The intrinsics' names for the complex types, so that a template written for real types
// (`__ldg(p)`, `__ldcg(p)`) loads a complex value in one instruction.
__device__ __forceinline__ cfloat __ldg(const cfloat* p) { return ldg_c(p); }
__device__ __forceinline__ cdouble __ldg(const cdouble* p) { return ldg_c(p); }
__device__ __forceinline__ cfloat __ldcg(const cfloat* p) { return ldcg_c(p); }
__device__ __forceinline__ cdouble __ldcg(const cdouble* p) { return ldcg_c(p); }

template <typename C> __device__ __forceinline__ C cmake(typename real_of<C>::type re,
                                                         typename real_of<C>::type im) {
    C c;
    c.re = re;
    c.im = im;
    return c;
}

template <typename C> __device__ __forceinline__ C czero() { return cmake<C>(0, 0); }

template <typename C> __device__ __forceinline__ bool cnonzero(C a) { return a.re != 0 || a.im != 0; }

// acc += a*b (four fused multiply-adds).
template <typename C> __device__ __forceinline__ void cfma(C& acc, C a, C b) {
    acc.re = fma(a.re, b.re, acc.re);
    acc.re = fma(-a.im, b.im, acc.re);
    acc.im = fma(a.re, b.im, acc.im);
    acc.im = fma(a.im, b.re, acc.im);
}

// Products rounded on their own (never contracted into a fused multiply-add).
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

// acc += conj(a)*b. The imaginary part is the difference of two separately rounded products, so
// that conj(a)*a adds exactly 0 (x^H x is real, as on the CPU).
template <typename C> __device__ __forceinline__ void cfma_conj(C& acc, C a, C b) {
    acc.re = fma(a.re, b.re, acc.re);
    acc.re = fma(a.im, b.im, acc.re);
    acc.im += mul_rn(a.re, b.im) - mul_rn(a.im, b.re);
}

template <typename C> __device__ __forceinline__ C cmul(C a, C b) {
    C r;
    r.re = a.re * b.re - a.im * b.im;
    r.im = a.re * b.im + a.im * b.re;
    return r;
}

template <typename C> __device__ __forceinline__ C cadd(C a, C b) {
    return cmake<C>(a.re + b.re, a.im + b.im);
}

template <typename C> __device__ __forceinline__ C cconj(C a) { return cmake<C>(a.re, -a.im); }

// ---- Scalar functions shared by real and complex kernels -------------------------------------

template <> struct real_of<float> {
    typedef float type;
};
template <> struct real_of<double> {
    typedef double type;
};

template <typename T> struct is_complex_ {
    static constexpr bool value = false;
};
template <> struct is_complex_<cfloat> {
    static constexpr bool value = true;
};
template <> struct is_complex_<cdouble> {
    static constexpr bool value = true;
};

__device__ __forceinline__ float re_(float x) { return x; }
__device__ __forceinline__ double re_(double x) { return x; }
__device__ __forceinline__ float re_(cfloat x) { return x.re; }
__device__ __forceinline__ double re_(cdouble x) { return x.re; }

__device__ __forceinline__ float conj_(float x) { return x; }
__device__ __forceinline__ double conj_(double x) { return x; }
__device__ __forceinline__ cfloat conj_(cfloat x) { return cconj(x); }
__device__ __forceinline__ cdouble conj_(cdouble x) { return cconj(x); }

// |x|^2 as a real number.
__device__ __forceinline__ float abs2_(float x) { return x * x; }
__device__ __forceinline__ double abs2_(double x) { return x * x; }
__device__ __forceinline__ float abs2_(cfloat x) { return x.re * x.re + x.im * x.im; }
__device__ __forceinline__ double abs2_(cdouble x) { return x.re * x.re + x.im * x.im; }

// acc += conj(a) b: the inner product x^H y term by term (x^H x has an imaginary part of
// exactly 0: cfma_conj).
__device__ __forceinline__ void dotc_(float& acc, float a, float b) { acc += a * b; }
__device__ __forceinline__ void dotc_(double& acc, double a, double b) { acc += a * b; }
__device__ __forceinline__ void dotc_(cfloat& acc, cfloat a, cfloat b) { cfma_conj(acc, a, b); }
__device__ __forceinline__ void dotc_(cdouble& acc, cdouble a, cdouble b) { cfma_conj(acc, a, b); }

// acc += a b in the CG family's form: x^T y when `bilinear` (COCG), x^H y otherwise (the same
// for real types).
template <typename T> __device__ __forceinline__ void form_acc_(T& acc, T a, T b, bool bilinear) {
    if (bilinear)
        acc += a * b;
    else
        dotc_(acc, a, b);
}

// A value that another block of the same launch wrote (L2, never a stale L1 line).
__device__ __forceinline__ cfloat ld_(const cfloat* p) { return ld_volatile(p); }
__device__ __forceinline__ cdouble ld_(const cdouble* p) { return ld_volatile(p); }
