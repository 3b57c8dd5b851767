// reduce_ops.cc -- host kernels for every supported op x datatype.
//
// out = a OP b with `a` the left operand; the ops and the op x datatype table
// are reduce_table.hpp's, shared with the CUDA kernels.  Elements are loaded
// and stored with memcpy so user buffers need no alignment; the compiler turns
// these into plain moves (and vector loops, see configure.ac).
#include "internal.h"
#include "reduce_table.hpp"

#include <cstring>

namespace llrdma
{
namespace ar
{
namespace
{

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

// k inputs in one pass, a cache line of elements at a time: the line's
// accumulators stay in registers while the same line of every input is
// folded in, in input order.
template <typename Op, typename T> void kernel_n(const void *const *in, int k, void *out, size_t n)
{
    constexpr size_t kLine = 64 / sizeof(T) > 0 ? 64 / sizeof(T) : 1;
    unsigned char *po = static_cast<unsigned char *>(out);
    for (size_t i = 0; i < n; i += kLine) {
        const size_t m = n - i < kLine ? n - i : kLine;
        T acc[kLine];
        std::memcpy(acc, static_cast<const unsigned char *>(in[0]) + i * sizeof(T), m * sizeof(T));
        for (int r = 1; r < k; ++r) {
            const unsigned char *pr = static_cast<const unsigned char *>(in[r]) + i * sizeof(T);
            for (size_t j = 0; j < m; ++j) {
                T y;
                std::memcpy(&y, pr + j * sizeof(T), sizeof(T));
                acc[j] = Op::apply(acc[j], y);
            }
        }
        std::memcpy(po + i * sizeof(T), acc, m * sizeof(T));
    }
}

// The table's Makers: each pair becomes the kernel instantiation.
struct HostKernels {
    using Fn = void (*)(const void *, const void *, void *, size_t);
    template <typename Op, typename T> static Fn make() { return kernel<Op, T>; }
};
struct HostKernelsN {
    using Fn = void (*)(const void *const *, int, void *, size_t);
    template <typename Op, typename T> static Fn make() { return kernel_n<Op, T>; }
};

HostKernels::Fn lookup(int op, int dtype)
{
    return ops::lookup<HostKernels>(op, dtype);
}

} // namespace

bool reduce3(int op, int dtype, const void *a, const void *b, void *out, size_t count)
{
    HostKernels::Fn fn = lookup(op, dtype);
    if (!fn)
        return false;
    if (count > 0)
        fn(a, b, out, count);
    return true;
}

bool reduce_n(int op, int dtype, const void *const *in, int k, void *out, size_t count)
{
    HostKernelsN::Fn fn = ops::lookup<HostKernelsN>(op, dtype);
    if (!fn || k < 1)
        return false;
    if (count > 0)
        fn(in, k, out, count);
    return true;
}

size_t dtype_size(int dtype)
{
    return ops::dtype_size(dtype);
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

extern "C" int llrdma_reduce_many(int op, int dtype, const void *const *in, int k, void *out,
                                  size_t count)
{
    if (k < 1 || (count > 0 && (!in || !out)))
        return LLRDMA_AR_ERR_INVALID;
    for (int r = 0; count > 0 && r < k; ++r)
        if (!in[r])
            return LLRDMA_AR_ERR_INVALID;
    return llrdma::ar::reduce_n(op, dtype, in, k, out, count) ? LLRDMA_AR_OK
                                                              : LLRDMA_AR_ERR_UNSUPPORTED;
}
