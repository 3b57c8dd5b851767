// reduce_kernels.cu -- elementwise reduction kernels for every op x datatype the
// host core supports, with the same bits.
//
// The ops and the op x datatype table are the host's own
// (allreduce/reduce_table.hpp, compiled here as __host__ __device__), so the
// semantics cannot drift apart.  Floating point uses one IEEE add or
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
#include "allreduce/reduce_table.hpp"
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

// The table's Maker: each pair becomes the launcher instantiation.
struct Launchers {
    using Fn = cudaError_t (*)(const void *, const void *, void *, size_t, cudaStream_t, int);
    template <typename Op, typename T> static Fn make() { return launch<Op, T>; }
};

} // namespace

cudaError_t launch_reduce(int op, int dtype, const void *a, const void *b, void *out, size_t count,
                          cudaStream_t stream, int max_blocks)
{
    Launchers::Fn fn = ops::lookup<Launchers>(op, dtype);
    if (!fn)
        return cudaErrorInvalidValue;
    if (count == 0)
        return cudaSuccess;
    return fn(a, b, out, count, stream, max_blocks > 0 ? max_blocks : 1024);
}

size_t dtype_size(int dtype)
{
    return ops::dtype_size(dtype);
}

} // namespace cuda
} // namespace llrdma
