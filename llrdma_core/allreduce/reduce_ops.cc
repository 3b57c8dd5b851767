// reduce_ops.cc -- elementwise reduction kernels for every supported op x datatype.
//
// out = a OP b with `a` the left operand.  Integer arithmetic is done in the
// unsigned type of at least int width, so overflow wraps instead of being
// undefined (and uint16 * uint16 does not overflow a promoted int).  Elements
// are loaded and stored with memcpy so user buffers need no alignment; the
// compiler turns these into plain moves.
#include "internal.h"

#include <cstring>
#include <type_traits>

namespace llrdma
{
namespace ar
{
namespace
{

template <typename T> struct Pair {
    T v;
    int k;
};

template <typename T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T> inline T wrap_add(T a, T b)
{
    return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
}
template <typename T> inline T wrap_mul(T a, T b)
{
    return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
}

// One functor per op; apply(a, b) returns a OP b.
struct Sum {
    template <typename T> static T apply(T a, T b)
    {
        if constexpr (std::is_integral_v<T>)
            return wrap_add(a, b);
        else
            return a + b;
    }
};
struct Prod {
    template <typename T> static T apply(T a, T b)
    {
        if constexpr (std::is_integral_v<T>)
            return wrap_mul(a, b);
        else
            return a * b;
    }
};
// Ties and unordered (NaN) compares keep the left operand.
struct Min {
    template <typename T> static T apply(T a, T b) { return b < a ? b : a; }
};
struct Max {
    template <typename T> static T apply(T a, T b) { return b > a ? b : a; }
};
struct Land {
    template <typename T> static T apply(T a, T b) { return static_cast<T>((a != 0) && (b != 0)); }
};
struct Lor {
    template <typename T> static T apply(T a, T b) { return static_cast<T>((a != 0) || (b != 0)); }
};
struct Lxor {
    template <typename T> static T apply(T a, T b) { return static_cast<T>((a != 0) != (b != 0)); }
};
struct Band {
    template <typename T> static T apply(T a, T b) { return static_cast<T>(a & b); }
};
struct Bor {
    template <typename T> static T apply(T a, T b) { return static_cast<T>(a | b); }
};
struct Bxor {
    template <typename T> static T apply(T a, T b) { return static_cast<T>(a ^ b); }
};
// MPI semantics: the larger (smaller) value; on equal values the smaller index.
struct Maxloc {
    template <typename P> static P apply(P a, P b)
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
    template <typename P> static P apply(P a, P b)
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

template <typename Op, typename T> void kernel(const void *a, const void *b, void *out, size_t n)
{
    const unsigned char *pa = static_cast<const unsigned char *>(a);
    const unsigned char *pb = static_cast<const unsigned char *>(b);
    unsigned char *po = static_cast<unsigned char *>(out);
    for (size_t i = 0; i < n; ++i) {
        T x, y;
        std::memcpy(&x, pa + i * sizeof(T), sizeof(T));
        std::memcpy(&y, pb + i * sizeof(T), sizeof(T));
        T r = Op::apply(x, y);
        std::memcpy(po + i * sizeof(T), &r, sizeof(T));
    }
}

using KernelFn = void (*)(const void *, const void *, void *, size_t);

// sum, prod, min, max: every type but the pairs.
template <typename T> KernelFn arith_kernel(int op)
{
    switch (op) {
    case LLRDMA_OP_SUM:
        return kernel<Sum, T>;
    case LLRDMA_OP_PROD:
        return kernel<Prod, T>;
    case LLRDMA_OP_MIN:
        return kernel<Min, T>;
    case LLRDMA_OP_MAX:
        return kernel<Max, T>;
    default:
        return nullptr;
    }
}

// Integer types take every op except the loc ops.
template <typename T> KernelFn int_kernel(int op)
{
    if (KernelFn f = arith_kernel<T>(op))
        return f;
    switch (op) {
    case LLRDMA_OP_LAND:
        return kernel<Land, T>;
    case LLRDMA_OP_LOR:
        return kernel<Lor, T>;
    case LLRDMA_OP_LXOR:
        return kernel<Lxor, T>;
    case LLRDMA_OP_BAND:
        return kernel<Band, T>;
    case LLRDMA_OP_BOR:
        return kernel<Bor, T>;
    case LLRDMA_OP_BXOR:
        return kernel<Bxor, T>;
    default:
        return nullptr;
    }
}

template <typename T> KernelFn loc_kernel(int op)
{
    switch (op) {
    case LLRDMA_OP_MAXLOC:
        return kernel<Maxloc, Pair<T>>;
    case LLRDMA_OP_MINLOC:
        return kernel<Minloc, Pair<T>>;
    default:
        return nullptr;
    }
}

KernelFn lookup(int op, int dtype)
{
    switch (dtype) {
    case LLRDMA_DT_INT8:
        return int_kernel<int8_t>(op);
    case LLRDMA_DT_INT16:
        return int_kernel<int16_t>(op);
    case LLRDMA_DT_INT32:
        return int_kernel<int32_t>(op);
    case LLRDMA_DT_INT64:
        return int_kernel<int64_t>(op);
    case LLRDMA_DT_UINT8:
        return int_kernel<uint8_t>(op);
    case LLRDMA_DT_UINT16:
        return int_kernel<uint16_t>(op);
    case LLRDMA_DT_UINT32:
        return int_kernel<uint32_t>(op);
    case LLRDMA_DT_UINT64:
        return int_kernel<uint64_t>(op);
    case LLRDMA_DT_FLOAT:
        return arith_kernel<float>(op);
    case LLRDMA_DT_DOUBLE:
        return arith_kernel<double>(op);
    case LLRDMA_DT_BOOL:
        // C _Bool: stored as 0/1 bytes; read as uint8 so any byte value is safe.
        if (op == LLRDMA_OP_LAND || op == LLRDMA_OP_LOR || op == LLRDMA_OP_LXOR)
            return int_kernel<uint8_t>(op);
        return nullptr;
    case LLRDMA_DT_BYTE:
        if (op == LLRDMA_OP_BAND || op == LLRDMA_OP_BOR || op == LLRDMA_OP_BXOR)
            return int_kernel<uint8_t>(op);
        return nullptr;
    case LLRDMA_DT_FLOAT_INT:
        return loc_kernel<float>(op);
    case LLRDMA_DT_DOUBLE_INT:
        return loc_kernel<double>(op);
    case LLRDMA_DT_LONG_INT:
        return loc_kernel<long>(op);
    case LLRDMA_DT_2INT:
        return loc_kernel<int>(op);
    case LLRDMA_DT_SHORT_INT:
        return loc_kernel<short>(op);
    default:
        return nullptr;
    }
}

} // namespace

bool reduce3(int op, int dtype, const void *a, const void *b, void *out, size_t count)
{
    KernelFn fn = lookup(op, dtype);
    if (!fn)
        return false;
    if (count > 0)
        fn(a, b, out, count);
    return true;
}

size_t dtype_size(int dtype)
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

} // namespace ar
} // namespace llrdma

extern "C" int llrdma_ar_supported(int dtype, int op)
{
    return llrdma::ar::lookup(op, dtype) != nullptr;
}

extern "C" size_t llrdma_ar_dtype_size(int dtype)
{
    return llrdma::ar::dtype_size(dtype);
}

extern "C" int llrdma_reduce_local(int op, int dtype, const void *in, void *inout, size_t count)
{
    if (count > 0 && (!in || !inout))
        return LLRDMA_AR_ERR_INVALID;
    return llrdma::ar::reduce3(op, dtype, in, inout, inout, count) ? LLRDMA_AR_OK
                                                                   : LLRDMA_AR_ERR_UNSUPPORTED;
}
