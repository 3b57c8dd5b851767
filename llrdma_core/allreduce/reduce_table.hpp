// reduce_table.hpp -- the reduction ops and the op x datatype table, shared by
// the host kernels (reduce_ops.cc) and the CUDA kernels (cuda/reduce_kernels.cu).
//
// One definition for both is what makes "the GPU result equals the host's bit
// for bit" hold by construction: the same functor computes a OP b on either
// side (`a` the left operand; integer arithmetic in the unsigned type of at
// least int width, so it wraps; logical ops give 0/1; min/max keep the left
// operand on ties and NaN; maxloc/minloc take the smaller index on equal
// values; a complex product rounds each multiply and add once, never fused),
// and the same table decides which pairs exist.  Header only; compiles
// as plain C++17 and under nvcc, where the functors are __host__ __device__.
#ifndef LLRDMA_REDUCE_TABLE_HPP
#define LLRDMA_REDUCE_TABLE_HPP

#include "llrdma_allreduce.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define LLRDMA_HD __host__ __device__
#else
#define LLRDMA_HD
#endif

namespace llrdma
{
namespace ops
{

// The MPI pair types: value first, then the index (C struct layout); the C
// types' index is an int, the Fortran types' has the value's type.
template <typename T, typename K = int> struct Pair {
    T v;
    K k;
};

// Complex numbers as C99 _Complex and Fortran COMPLEX store them.
template <typename T> struct Complex {
    T re, im;
};

// One IEEE operation each, rounded to nearest and never fused into an FMA:
// nvcc contracts a * b + c by default, so the device side uses the _rn
// intrinsics, which it never contracts; the host side is compiled with
// -ffp-contract=off (Makefile.am).  A complex product is then the same bits
// on both sides.
LLRDMA_HD inline float mul_rn(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
LLRDMA_HD inline double mul_rn(double a, double b)
{
#if defined(__CUDA_ARCH__)
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
LLRDMA_HD inline float add_rn(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
LLRDMA_HD inline double add_rn(double a, double b)
{
#if defined(__CUDA_ARCH__)
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}
LLRDMA_HD inline float sub_rn(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
LLRDMA_HD inline double sub_rn(double a, double b)
{
#if defined(__CUDA_ARCH__)
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}

template <typename T> LLRDMA_HD inline Complex<T> operator+(Complex<T> a, Complex<T> b)
{
    return {add_rn(a.re, b.re), add_rn(a.im, b.im)};
}
// (a.re + a.im i)(b.re + b.im i), the textbook formula Open MPI's C99 `*`
// also computes for finite operands.
template <typename T> LLRDMA_HD inline Complex<T> operator*(Complex<T> a, Complex<T> b)
{
    return {sub_rn(mul_rn(a.re, b.re), mul_rn(a.im, b.im)),
            add_rn(mul_rn(a.re, b.im), mul_rn(a.im, b.re))};
}

template <typename T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

// One functor per op; apply(a, b) returns a OP b.
struct Sum {
    template <typename T> LLRDMA_HD static T apply(T a, T b)
    {
        if constexpr (std::is_integral_v<T>)
            return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
        else
            return a + b;
    }
};
struct Prod {
    template <typename T> LLRDMA_HD static T apply(T a, T b)
    {
        if constexpr (std::is_integral_v<T>)
            return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
        else
            return a * b;
    }
};
// Ties and unordered (NaN) compares keep the left operand.
struct Min {
    template <typename T> LLRDMA_HD static T apply(T a, T b) { return b < a ? b : a; }
};
struct Max {
    template <typename T> LLRDMA_HD static T apply(T a, T b) { return b > a ? b : a; }
};
struct Land {
    template <typename T> LLRDMA_HD static T apply(T a, T b)
    {
        return static_cast<T>((a != 0) && (b != 0));
    }
};
struct Lor {
    template <typename T> LLRDMA_HD static T apply(T a, T b)
    {
        return static_cast<T>((a != 0) || (b != 0));
    }
};
struct Lxor {
    template <typename T> LLRDMA_HD static T apply(T a, T b)
    {
        return static_cast<T>((a != 0) != (b != 0));
    }
};
struct Band {
    template <typename T> LLRDMA_HD static T apply(T a, T b) { return static_cast<T>(a & b); }
};
struct Bor {
    template <typename T> LLRDMA_HD static T apply(T a, T b) { return static_cast<T>(a | b); }
};
struct Bxor {
    template <typename T> LLRDMA_HD static T apply(T a, T b) { return static_cast<T>(a ^ b); }
};
// MPI semantics: the larger (smaller) value; on equal values the smaller index.
struct Maxloc {
    template <typename P> LLRDMA_HD static P apply(P a, P b)
    {
        if (a.v > b.v)
            return a;
        if (b.v > a.v)
            return b;
        P r = a;
        r.k = a.k < b.k ? a.k : b.k;
        return r;
    }
};
struct Minloc {
    template <typename P> LLRDMA_HD static P apply(P a, P b)
    {
        if (a.v < b.v)
            return a;
        if (b.v < a.v)
            return b;
        P r = a;
        r.k = a.k < b.k ? a.k : b.k;
        return r;
    }
};

// The table.  Maker turns an (Op, element type) pair into what the caller
// runs: `using Fn = ...; template <typename Op, typename T> static Fn make();`.
// lookup() returns nullptr for a pair llrdma_ar_supported() rejects.
// sum, prod, min, max: every type but the pairs.
template <typename Maker, typename T> typename Maker::Fn arith(int op)
{
    switch (op) {
    case LLRDMA_OP_SUM:
        return Maker::template make<Sum, T>();
    case LLRDMA_OP_PROD:
        return Maker::template make<Prod, T>();
    case LLRDMA_OP_MIN:
        return Maker::template make<Min, T>();
    case LLRDMA_OP_MAX:
        return Maker::template make<Max, T>();
    default:
        return nullptr;
    }
}

// Integer types take every op except the loc ops.
template <typename Maker, typename T> typename Maker::Fn integer(int op)
{
    if (auto f = arith<Maker, T>(op))
        return f;
    switch (op) {
    case LLRDMA_OP_LAND:
        return Maker::template make<Land, T>();
    case LLRDMA_OP_LOR:
        return Maker::template make<Lor, T>();
    case LLRDMA_OP_LXOR:
        return Maker::template make<Lxor, T>();
    case LLRDMA_OP_BAND:
        return Maker::template make<Band, T>();
    case LLRDMA_OP_BOR:
        return Maker::template make<Bor, T>();
    case LLRDMA_OP_BXOR:
        return Maker::template make<Bxor, T>();
    default:
        return nullptr;
    }
}

template <typename Maker, typename T, typename K = int> typename Maker::Fn loc(int op)
{
    switch (op) {
    case LLRDMA_OP_MAXLOC:
        return Maker::template make<Maxloc, Pair<T, K>>();
    case LLRDMA_OP_MINLOC:
        return Maker::template make<Minloc, Pair<T, K>>();
    default:
        return nullptr;
    }
}

// Logical types (C _Bool, Fortran LOGICAL): land, lor, lxor, read as
// unsigned integers so any bit pattern is safe (nonzero is true).
template <typename Maker, typename T> typename Maker::Fn logical(int op)
{
    if (op == LLRDMA_OP_LAND || op == LLRDMA_OP_LOR || op == LLRDMA_OP_LXOR)
        return integer<Maker, T>(op);
    return nullptr;
}

// Complex: sum and prod only (MPI defines no order on complex numbers).
template <typename Maker, typename T> typename Maker::Fn complex(int op)
{
    switch (op) {
    case LLRDMA_OP_SUM:
        return Maker::template make<Sum, Complex<T>>();
    case LLRDMA_OP_PROD:
        return Maker::template make<Prod, Complex<T>>();
    default:
        return nullptr;
    }
}

template <typename Maker> typename Maker::Fn lookup(int op, int dtype)
{
    switch (dtype) {
    case LLRDMA_DT_INT8:
        return integer<Maker, int8_t>(op);
    case LLRDMA_DT_INT16:
        return integer<Maker, int16_t>(op);
    case LLRDMA_DT_INT32:
        return integer<Maker, int32_t>(op);
    case LLRDMA_DT_INT64:
        return integer<Maker, int64_t>(op);
    case LLRDMA_DT_UINT8:
        return integer<Maker, uint8_t>(op);
    case LLRDMA_DT_UINT16:
        return integer<Maker, uint16_t>(op);
    case LLRDMA_DT_UINT32:
        return integer<Maker, uint32_t>(op);
    case LLRDMA_DT_UINT64:
        return integer<Maker, uint64_t>(op);
    case LLRDMA_DT_FLOAT:
        return arith<Maker, float>(op);
    case LLRDMA_DT_DOUBLE:
        return arith<Maker, double>(op);
    case LLRDMA_DT_BOOL:
        // C _Bool: stored as 0/1 bytes; read as uint8 so any byte value is safe.
        return logical<Maker, uint8_t>(op);
    case LLRDMA_DT_LOGICAL16:
        return logical<Maker, uint16_t>(op);
    case LLRDMA_DT_LOGICAL32:
        return logical<Maker, uint32_t>(op);
    case LLRDMA_DT_LOGICAL64:
        return logical<Maker, uint64_t>(op);
    case LLRDMA_DT_BYTE:
        if (op == LLRDMA_OP_BAND || op == LLRDMA_OP_BOR || op == LLRDMA_OP_BXOR)
            return integer<Maker, uint8_t>(op);
        return nullptr;
    case LLRDMA_DT_FLOAT_INT:
        return loc<Maker, float>(op);
    case LLRDMA_DT_DOUBLE_INT:
        return loc<Maker, double>(op);
    case LLRDMA_DT_LONG_INT:
        return loc<Maker, long>(op);
    case LLRDMA_DT_2INT:
        return loc<Maker, int>(op);
    case LLRDMA_DT_SHORT_INT:
        return loc<Maker, short>(op);
    case LLRDMA_DT_2FLOAT:
        return loc<Maker, float, float>(op);
    case LLRDMA_DT_2DOUBLE:
        return loc<Maker, double, double>(op);
    case LLRDMA_DT_2INT64:
        return loc<Maker, int64_t, int64_t>(op);
    case LLRDMA_DT_FLOAT_COMPLEX:
        return complex<Maker, float>(op);
    case LLRDMA_DT_DOUBLE_COMPLEX:
        return complex<Maker, double>(op);
    default:
        return nullptr;
    }
}

// Bytes of one element (the C struct size for pair types); 0 if out of range.
inline size_t dtype_size(int dtype)
{
    switch (dtype) {
    case LLRDMA_DT_INT8:
    case LLRDMA_DT_UINT8:
    case LLRDMA_DT_BOOL:
    case LLRDMA_DT_BYTE:
        return 1;
    case LLRDMA_DT_INT16:
    case LLRDMA_DT_UINT16:
    case LLRDMA_DT_LOGICAL16:
        return 2;
    case LLRDMA_DT_INT32:
    case LLRDMA_DT_UINT32:
    case LLRDMA_DT_FLOAT:
    case LLRDMA_DT_LOGICAL32:
        return 4;
    case LLRDMA_DT_INT64:
    case LLRDMA_DT_UINT64:
    case LLRDMA_DT_DOUBLE:
    case LLRDMA_DT_LOGICAL64:
        return 8;
    case LLRDMA_DT_FLOAT_INT:
        return sizeof(Pair<float>);
    case LLRDMA_DT_DOUBLE_INT:
        return sizeof(Pair<double>);
    case LLRDMA_DT_LONG_INT:
        return sizeof(Pair<long>);
    case LLRDMA_DT_2INT:
        return sizeof(Pair<int>);
    case LLRDMA_DT_SHORT_INT:
        return sizeof(Pair<short>);
    case LLRDMA_DT_2FLOAT:
        return sizeof(Pair<float, float>);
    case LLRDMA_DT_2DOUBLE:
        return sizeof(Pair<double, double>);
    case LLRDMA_DT_2INT64:
        return sizeof(Pair<int64_t, int64_t>);
    case LLRDMA_DT_FLOAT_COMPLEX:
        return sizeof(Complex<float>);
    case LLRDMA_DT_DOUBLE_COMPLEX:
        return sizeof(Complex<double>);
    default:
        return 0;
    }
}

} // namespace ops
} // namespace llrdma

#endif
