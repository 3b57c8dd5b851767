// reduce_ops.cc -- host kernels for every supported op x datatype.
//
// out = a OP b with `a` the left operand; the ops and the op x datatype table
// are reduce_table.hpp's, shared with the CUDA kernels.  Elements are loaded
// and stored with memcpy so user buffers need no alignment; the compiler turns
// these into plain moves (and vector loops, see configure.ac).
//
// Each kernel is built twice where the compiler can (configure's
// LLRDMA_KERNEL_CLONES): for AVX2 and for the baseline, and the loader picks
// one per process by the CPU (an ifunc).  A 2-rank 1 KB double sum folded
// 128 elements in 475 instructions with SSE2's two lanes; AVX2's four halve
// that.  Elementwise IEEE operations give the same bits at any vector width
// (no contraction: -ffp-contract=off, and the AVX2 clone has no FMA), so
// ranks on CPUs of different kinds still agree bit for bit.
#include "internal.h"
#include "reduce_table.hpp"

#include <cstring>

#if defined(LLRDMA_KERNEL_CLONES)
#define LLRDMA_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LLRDMA_CLONES
#endif

namespace llrdma
{
namespace ar
{
namespace
{

template <typename Op, typename T>
LLRDMA_CLONES void kernel(const void *a, const void *b, void *out, size_t n)
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

// Four inputs in one pass (shm's fold): out = (((x OP s0) OP s1) OP s2) OP s3,
// x = out, or from s0 on with `start` (then s0 OP s1 OP s2 OP s3).  The same
// operations in the same order as four two-input passes, so the same bits;
// four input streams in flight instead of one (other ranks' caches answer
// slowly, and one stream at a time leaves the core mostly waiting).
template <typename Op, typename T>
LLRDMA_CLONES void fold4(const void *const *s, void *out, size_t n, int start)
{
    const unsigned char *p0 = static_cast<const unsigned char *>(s[0]);
    const unsigned char *p1 = static_cast<const unsigned char *>(s[1]);
    const unsigned char *p2 = static_cast<const unsigned char *>(s[2]);
    const unsigned char *p3 = static_cast<const unsigned char *>(s[3]);
    unsigned char *po = static_cast<unsigned char *>(out);
    auto ld = [](const unsigned char *p, size_t i) {
        T v;
        std::memcpy(&v, p + i * sizeof(T), sizeof(T));
        return v;
    };
    if (start) {
        for (size_t i = 0; i < n; ++i) {
            T r = Op::apply(Op::apply(Op::apply(ld(p0, i), ld(p1, i)), ld(p2, i)), ld(p3, i));
            std::memcpy(po + i * sizeof(T), &r, sizeof(T));
        }
    } else {
        for (size_t i = 0; i < n; ++i) {
            T r = Op::apply(
                Op::apply(Op::apply(Op::apply(ld(po, i), ld(p0, i)), ld(p1, i)), ld(p2, i)),
                ld(p3, i));
            std::memcpy(po + i * sizeof(T), &r, sizeof(T));
        }
    }
}

struct Fold4Kernels {
    using Fn = void (*)(const void *const *, void *, size_t, int);
    template <typename Op, typename T> static Fn make() { return fold4<Op, T>; }
};

// The table's Maker: each pair becomes the kernel instantiation.
struct HostKernels {
    using Fn = void (*)(const void *, const void *, void *, size_t);
    template <typename Op, typename T> static Fn make() { return kernel<Op, T>; }
};

// Every pair's kernel in one array (filled at load, below): a small call's
// lookups are a load each instead of two switches (about 15 instructions
// each, `contrib/bench/ar-call-cost.sh`).
template <typename Maker> class Table
{
  public:
    Table()
    {
        for (int op = 0; op < LLRDMA_OP_COUNT; ++op)
            for (int dt = 0; dt < LLRDMA_DT_COUNT; ++dt)
                fn_[op][dt] = ops::lookup<Maker>(op, dt);
    }
    typename Maker::Fn get(int op, int dtype) const
    {
        return static_cast<unsigned>(op) < LLRDMA_OP_COUNT &&
                       static_cast<unsigned>(dtype) < LLRDMA_DT_COUNT
                   ? fn_[op][dtype]
                   : nullptr;
    }

  private:
    typename Maker::Fn fn_[LLRDMA_OP_COUNT][LLRDMA_DT_COUNT];
};

// Filled when the library loads (nothing calls a kernel before): a
// function-local static's guard made every lookup save and restore six
// registers around the first-use path.
const Table<HostKernels> host_table;
const Table<Fold4Kernels> fold4_table;

HostKernels::Fn lookup(int op, int dtype)
{
    return host_table.get(op, dtype);
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

ReduceFn reduce_kernel(int op, int dtype)
{
    return lookup(op, dtype);
}

Fold4Fn fold4_kernel(int op, int dtype)
{
    return fold4_table.get(op, dtype);
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
