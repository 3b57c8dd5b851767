// reduce_kernels.cu -- elementwise reduction kernels for every op x datatype the
// host core supports (llrdma_core/allreduce/reduce_ops.cc), with the same bits.
//
// Same semantics as the host: out = a OP b with `a` the left operand; integer
// arithmetic in the unsigned type of at least int width (wraps); logical ops
// give 0/1; min/max keep the left operand on ties and NaN; maxloc/minloc take
// the smaller index on equal values.  Floating point uses one IEEE add or
// multiply per element, rounded to nearest, no flush to zero (nvcc's default
// without --use_fast_math), and no contraction is possible with a single
// operation, so a GPU result equals the CPU's bit for bit and ranks on the host
// path and on the GPU path agree.
//
// Three variants, chosen per call from the pointers: 16-byte vectors when all
// three buffers are 16-byte aligned (scalar types), plain typed loads when
// they are aligned to the element, byte copies otherwise (the core promises
// no alignment).  Grid-stride loops; out may alias a or b since every element
// is read before it is written by the same thread.
#include "cuda_internal.h"
#include "llrdma_allreduce.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace llrdma
{
namespace cuda
{
namespace
{

constexpr int kThreads = 256;

template <typename T> struct Pair {
    T v;
    int k;
};

template <typename T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct Sum {
    template <typename T> __device__ static T apply(T a, T b)
    {
        if constexpr (std::is_integral_v<T>)
            return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
        else
            return a + b;
    }
};
struct Prod {
    template <typename T> __device__ static T apply(T a, T b)
    {
        if constexpr (std::is_integral_v<T>)
            return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
        else
            return a * b;
    }
};
struct Min {
    template <typename T> __device__ static T apply(T a, T b) { return b < a ? b : a; }
};
struct Max {
    template <typename T> __device__ static T apply(T a, T b) { return b > a ? b : a; }
};
struct Land {
    template <typename T> __device__ static T apply(T a, T b)
    {
        return static_cast<T>((a != 0) && (b != 0));
    }
};
struct Lor {
    template <typename T> __device__ static T apply(T a, T b)
    {
        return static_cast<T>((a != 0) || (b != 0));
    }
};
struct Lxor {
    template <typename T> __device__ static T apply(T a, T b)
    {
        return static_cast<T>((a != 0) != (b != 0));
    }
};
struct Band {
    template <typename T> __device__ static T apply(T a, T b) { return static_cast<T>(a & b); }
};
struct Bor {
    template <typename T> __device__ static T apply(T a, T b) { return static_cast<T>(a | b); }
};
struct Bxor {
    template <typename T> __device__ static T apply(T a, T b) { return static_cast<T>(a ^ b); }
};
struct Maxloc {
    template <typename P> __device__ static P apply(P a, P b)
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
    template <typename P> __device__ static P apply(P a, P b)
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

__device__ inline size_t first_index()
{
    return blockIdx.x * size_t(blockDim.x) + threadIdx.x;
}
__device__ inline size_t stride()
{
    return size_t(gridDim.x) * blockDim.x;
}

// 16 bytes per thread and step; the n % V tail goes to the first threads.
template <typename Op, typename T> __global__ void k_vec(const T *a, const T *b, T *out, size_t n)
{
    constexpr int V = 16 / sizeof(T);
    const size_t nvec = n / V;
    const uint4 *va = reinterpret_cast<const uint4 *>(a);
    const uint4 *vb = reinterpret_cast<const uint4 *>(b);
    uint4 *vo = reinterpret_cast<uint4 *>(out);
    for (size_t i = first_index(); i < nvec; i += stride()) {
        union {
            uint4 u;
            T t[V];
        } x, y, r;
        x.u = va[i];
        y.u = vb[i];
#pragma unroll
        for (int j = 0; j < V; ++j)
            r.t[j] = Op::apply(x.t[j], y.t[j]);
        vo[i] = r.u;
    }
    size_t t = nvec * V + first_index();
    if (t < n)
        out[t] = Op::apply(a[t], b[t]);
}

template <typename Op, typename T> __global__ void k_typed(const T *a, const T *b, T *out, size_t n)
{
    for (size_t i = first_index(); i < n; i += stride())
        out[i] = Op::apply(a[i], b[i]);
}

template <typename Op, typename T>
__global__ void k_bytes(const unsigned char *a, const unsigned char *b, unsigned char *out,
                        size_t n)
{
    for (size_t i = first_index(); i < n; i += stride()) {
        T x, y;
        memcpy(&x, a + i * sizeof(T), sizeof(T));
        memcpy(&y, b + i * sizeof(T), sizeof(T));
        T r = Op::apply(x, y);
        memcpy(out + i * sizeof(T), &r, sizeof(T));
    }
}

int blocks_for(size_t work, int max_blocks)
{
    size_t b = (work + kThreads - 1) / kThreads;
    if (b < 1)
        b = 1;
    return static_cast<int>(b < static_cast<size_t>(max_blocks) ? b : max_blocks);
}

template <typename Op, typename T>
cudaError_t launch(const void *a, const void *b, void *out, size_t n, cudaStream_t st, int maxb)
{
    uintptr_t bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                     reinterpret_cast<uintptr_t>(out);
    void *args[] = {&a, &b, &out, &n};
    const void *fn;
    size_t work = n;
    if constexpr (std::is_arithmetic_v<T> && 16 % sizeof(T) == 0) {
        if (bits % 16 == 0) {
            fn = reinterpret_cast<const void *>(&k_vec<Op, T>);
            work = n / (16 / sizeof(T));
            return cudaLaunchKernel(fn, dim3(blocks_for(work, maxb)), dim3(kThreads), args, 0, st);
        }
    }
    if (bits % alignof(T) == 0)
        fn = reinterpret_cast<const void *>(&k_typed<Op, T>);
    else
        fn = reinterpret_cast<const void *>(&k_bytes<Op, T>);
    return cudaLaunchKernel(fn, dim3(blocks_for(work, maxb)), dim3(kThreads), args, 0, st);
}

using Launcher = cudaError_t (*)(const void *, const void *, void *, size_t, cudaStream_t, int);

// sum, prod, min, max: every type but the pairs.
template <typename T> Launcher arith_launcher(int op)
{
    switch (op) {
    case LLRDMA_OP_SUM:
        return launch<Sum, T>;
    case LLRDMA_OP_PROD:
        return launch<Prod, T>;
    case LLRDMA_OP_MIN:
        return launch<Min, T>;
    case LLRDMA_OP_MAX:
        return launch<Max, T>;
    default:
        return nullptr;
    }
}

template <typename T> Launcher int_launcher(int op)
{
    if (Launcher f = arith_launcher<T>(op))
        return f;
    switch (op) {
    case LLRDMA_OP_LAND:
        return launch<Land, T>;
    case LLRDMA_OP_LOR:
        return launch<Lor, T>;
    case LLRDMA_OP_LXOR:
        return launch<Lxor, T>;
    case LLRDMA_OP_BAND:
        return launch<Band, T>;
    case LLRDMA_OP_BOR:
        return launch<Bor, T>;
    case LLRDMA_OP_BXOR:
        return launch<Bxor, T>;
    default:
        return nullptr;
    }
}

template <typename T> Launcher loc_launcher(int op)
{
    switch (op) {
    case LLRDMA_OP_MAXLOC:
        return launch<Maxloc, Pair<T>>;
    case LLRDMA_OP_MINLOC:
        return launch<Minloc, Pair<T>>;
    default:
        return nullptr;
    }
}

// Mirrors reduce_ops.cc's lookup(): the same pairs are supported.
Launcher lookup(int op, int dtype)
{
    switch (dtype) {
    case LLRDMA_DT_INT8:
        return int_launcher<int8_t>(op);
    case LLRDMA_DT_INT16:
        return int_launcher<int16_t>(op);
    case LLRDMA_DT_INT32:
        return int_launcher<int32_t>(op);
    case LLRDMA_DT_INT64:
        return int_launcher<int64_t>(op);
    case LLRDMA_DT_UINT8:
        return int_launcher<uint8_t>(op);
    case LLRDMA_DT_UINT16:
        return int_launcher<uint16_t>(op);
    case LLRDMA_DT_UINT32:
        return int_launcher<uint32_t>(op);
    case LLRDMA_DT_UINT64:
        return int_launcher<uint64_t>(op);
    case LLRDMA_DT_FLOAT:
        return arith_launcher<float>(op);
    case LLRDMA_DT_DOUBLE:
        return arith_launcher<double>(op);
    case LLRDMA_DT_BOOL:
        if (op == LLRDMA_OP_LAND || op == LLRDMA_OP_LOR || op == LLRDMA_OP_LXOR)
            return int_launcher<uint8_t>(op);
        return nullptr;
    case LLRDMA_DT_BYTE:
        if (op == LLRDMA_OP_BAND || op == LLRDMA_OP_BOR || op == LLRDMA_OP_BXOR)
            return int_launcher<uint8_t>(op);
        return nullptr;
    case LLRDMA_DT_FLOAT_INT:
        return loc_launcher<float>(op);
    case LLRDMA_DT_DOUBLE_INT:
        return loc_launcher<double>(op);
    case LLRDMA_DT_LONG_INT:
        return loc_launcher<long>(op);
    case LLRDMA_DT_2INT:
        return loc_launcher<int>(op);
    case LLRDMA_DT_SHORT_INT:
        return loc_launcher<short>(op);
    default:
        return nullptr;
    }
}

} // namespace

cudaError_t launch_reduce(int op, int dtype, const void *a, const void *b, void *out, size_t count,
                          cudaStream_t stream, int max_blocks)
{
    Launcher fn = lookup(op, dtype);
    if (!fn)
        return cudaErrorInvalidValue;
    if (count == 0)
        return cudaSuccess;
    return fn(a, b, out, count, stream, max_blocks > 0 ? max_blocks : 1024);
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

} // namespace cuda
} // namespace llrdma
