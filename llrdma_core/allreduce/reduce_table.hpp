// reduce_table.hpp -- the reduction ops and the op x datatype table, shared by
// the host kernels (reduce_ops.cc) and the CUDA kernels (cuda/reduce_kernels.cu).
//
// One definition for both is what makes "the GPU result equals the host's bit
// for bit" hold by construction: the same functor computes a OP b on either
// side (`a` the left operand; integer arithmetic in the unsigned type of at
// least int width, so it wraps; logical ops give 0/1; min/max keep the left
// operand on ties and NaN; maxloc/minloc take the smaller index on equal
// values), and the same table decides which pairs exist.  Header only; compiles
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

// The MPI pair types: value first, then an int index (C struct layout).
template <typename T> struct Pair {
    T v;
    int k;
};

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

template <typename Maker, typename T> typename Maker::Fn loc(int op)
{
    switch (op) {
    case LLRDMA_OP_MAXLOC:
        return Maker::template make<Maxloc, Pair<T>>();
    case LLRDMA_OP_MINLOC:
        return Maker::template make<Minloc, Pair<T>>();
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
        if (op == LLRDMA_OP_LAND || op == LLRDMA_OP_LOR || op == LLRDMA_OP_LXOR)
            return integer<Maker, uint8_t>(op);
        return nullptr;
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
        return 2;
    case LLRDMA_DT_INT32:
    case LLRDMA_DT_UINT32:
    case LLRDMA_DT_FLOAT:
        return 4;
    case LLRDMA_DT_INT64:
    case LLRDMA_DT_UINT64:
    case LLRDMA_DT_DOUBLE:
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
    default:
        return 0;
    }
}

} // namespace ops
} // namespace llrdma

#endif
