// test_allreduce_devheap.h -- fake device memory and a hooked transport for
// the Allreduce core's memory hooks (llrdma_ar_comm_t copy/reduce/alloc/free/
// sync), shared by test_allreduce_hooks and test_allreduce_sim_hier.
//
// "Device memory" is a PROT_NONE address range: the handles passed to
// llrdma_ar_run point into it, so any direct access by the core faults, and the
// hooks and the transport wrapper translate handles to a host backing store,
// checking that every range lies inside one live allocation.
#ifndef TEST_ALLREDUCE_DEVHEAP_H
#define TEST_ALLREDUCE_DEVHEAP_H

#include "llrdma_allreduce.h"

#include <boost/test/unit_test.hpp>

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace devsim
{

// A fake device address space: handles in [base_, base_ + kSpan) are never
// mapped, their contents live at the same offset in back_.
class DeviceHeap
{
  public:
    static constexpr size_t kSpan = size_t(1) << 32;

    DeviceHeap()
    {
        void *b =
            mmap(nullptr, kSpan, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        void *k = mmap(nullptr, kSpan, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        BOOST_REQUIRE(b != MAP_FAILED && k != MAP_FAILED);
        base_ = static_cast<unsigned char *>(b);
        back_ = static_cast<unsigned char *>(k);
    }
    ~DeviceHeap()
    {
        munmap(base_, kSpan);
        munmap(back_, kSpan);
    }
    DeviceHeap(const DeviceHeap &) = delete;
    DeviceHeap &operator=(const DeviceHeap &) = delete;

    // Odd offsets on purpose: the core must not assume alignment.
    void *alloc(size_t bytes, size_t misalign = 0)
    {
        std::lock_guard<std::mutex> g(m_);
        size_t off = (next_ + 63) / 64 * 64 + misalign;
        if (off + bytes + 64 > kSpan)
            return nullptr;
        next_ = off + bytes + 64; // a gap: an overrun lands outside every allocation
        live_[off] = bytes;
        return base_ + off;
    }
    bool free(void *h)
    {
        std::lock_guard<std::mutex> g(m_);
        auto it = live_.find(static_cast<unsigned char *>(h) - base_);
        if (!in_span(h) || it == live_.end())
            return false;
        // Give back the pages no other allocation shares.
        size_t lo = (it->first + 4095) & ~size_t(4095),
               hi = (it->first + it->second) & ~size_t(4095);
        if (hi > lo)
            madvise(back_ + lo, hi - lo, MADV_DONTNEED);
        live_.erase(it);
        return true;
    }
    // Host view of [h, h + bytes), or nullptr when not inside one live allocation.
    unsigned char *real(const void *h, size_t bytes)
    {
        std::lock_guard<std::mutex> g(m_);
        size_t start;
        return holder(h, bytes, &start) ? back_ + (static_cast<const unsigned char *>(h) - base_)
                                        : nullptr;
    }
    // The live allocation holding [h, h + bytes): its start, or nullptr.
    const void *allocation_of(const void *h, size_t bytes)
    {
        std::lock_guard<std::mutex> g(m_);
        size_t start;
        return holder(h, bytes, &start) ? base_ + start : nullptr;
    }
    size_t nlive()
    {
        std::lock_guard<std::mutex> g(m_);
        return live_.size();
    }

  private:
    // The live allocation holding [h, h + bytes) (its offset in *start); m_ held.
    bool holder(const void *h, size_t bytes, size_t *start) const
    {
        if (!in_span(h))
            return false;
        size_t off = static_cast<const unsigned char *>(h) - base_;
        auto it = live_.upper_bound(off);
        if (it == live_.begin())
            return false;
        --it;
        *start = it->first;
        return off + bytes <= it->first + it->second;
    }
    bool in_span(const void *h) const
    {
        auto p = static_cast<const unsigned char *>(h);
        return p >= base_ && p < base_ + kSpan;
    }
    std::mutex m_;
    unsigned char *base_ = nullptr, *back_ = nullptr;
    size_t next_ = 0;
    std::map<size_t, size_t> live_;
};

enum HookKind { kNone = 0, kCopy = 1, kReduce = 2, kAlloc = 3, kSync = 4 };

// One rank's hooked transport: the sim comm underneath, handles translated.
struct Hooked {
    llrdma_ar_comm_t inner{};
    DeviceHeap *heap = nullptr;
    int fail_kind = kNone; // fail the fail_at-th call of this hook
    long fail_at = 0;
    long ncopy = 0, nreduce = 0, nalloc = 0, nfree = 0, nsend = 0, nrecv = 0, nsync = 0;
    std::vector<std::string> problems;
    // Host memory the hooks may also address (the shared arena), as CUDA's
    // copies address pinned host memory.
    const unsigned char *host_lo = nullptr, *host_hi = nullptr;
    // deferred: copies and reductions queue as on a stream and run at sync,
    // or when the transport hands memory to the NIC (as the GPU-direct glue
    // syncs before every isend/irecv): a core that announces data through
    // the arena before syncing gets stale bytes.
    bool deferred = false;
    // nic: isend/irecv model GPU-direct RDMA: only device memory, each
    // allocation registered once and its registration reused (what
    // btl_register_mem's cache gives the glue); host memory handed to the
    // NIC in a device call is a problem (it would mean staging).
    bool nic = false;
    long nreg = 0, nreg_reused = 0;
    std::set<const void *> registered;
    std::vector<std::function<bool()>> queue;

    // Runs what is queued; false if a queued operation failed.
    bool flush()
    {
        bool ok = true;
        for (auto &f : queue)
            ok = f() && ok;
        queue.clear();
        return ok;
    }

    llrdma_ar_comm_t comm(bool with_alloc)
    {
        llrdma_ar_comm_t c = inner;
        c.ctx = this;
        c.isend = s_isend;
        c.irecv = s_irecv;
        c.waitall = s_waitall;
        c.cancel = s_cancel;
        c.waitall_sizes = inner.waitall_sizes ? s_waitall_sizes : nullptr;
        c.copy = s_copy;
        c.reduce = s_reduce;
        c.sync = s_sync;
        if (with_alloc) {
            c.alloc = s_alloc;
            c.free = s_free;
        }
        return c;
    }

  private:
    static Hooked *of(void *ctx) { return static_cast<Hooked *>(ctx); }
    bool inject(int kind, long n) { return fail_kind == kind && n == fail_at; }
    unsigned char *real(const char *what, const void *h, size_t bytes)
    {
        auto hp = static_cast<const unsigned char *>(h);
        if (host_lo && hp >= host_lo && hp + bytes <= host_hi)
            return const_cast<unsigned char *>(hp);
        unsigned char *p = heap->real(h, bytes);
        if (!p) {
            std::ostringstream s;
            s << what << ": " << bytes << " bytes at " << h << " outside device memory";
            problems.push_back(s.str());
        }
        return p;
    }
    // The NIC's view of [h, h + bytes): registered device memory only.
    unsigned char *nic_real(const char *what, const void *h, size_t bytes)
    {
        if (!flush())
            return nullptr;
        if (!nic)
            return real(what, h, bytes);
        const void *base = heap->allocation_of(h, bytes);
        if (!base) {
            std::ostringstream s;
            s << what << ": " << bytes << " bytes at " << h
              << " handed to the NIC outside every device allocation";
            problems.push_back(s.str());
            return nullptr;
        }
        if (registered.insert(base).second)
            ++nreg;
        else
            ++nreg_reused;
        return heap->real(h, bytes);
    }
    static int s_isend(void *ctx, const void *buf, size_t bytes, int peer, int tag, void **req)
    {
        Hooked *k = of(ctx);
        ++k->nsend;
        // An empty send (a failure carried) reads nothing.
        static unsigned char none;
        unsigned char *p = bytes == 0 ? &none : k->nic_real("isend", buf, bytes);
        return p ? k->inner.isend(k->inner.ctx, p, bytes, peer, tag, req) : -1;
    }
    static int s_irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req)
    {
        Hooked *k = of(ctx);
        ++k->nrecv;
        unsigned char *p = k->nic_real("irecv", buf, bytes);
        return p ? k->inner.irecv(k->inner.ctx, p, bytes, peer, tag, req) : -1;
    }
    static int s_waitall(void *ctx, int n, void **reqs)
    {
        return of(ctx)->inner.waitall(of(ctx)->inner.ctx, n, reqs);
    }
    static int s_cancel(void *ctx, void *req)
    {
        return of(ctx)->inner.cancel(of(ctx)->inner.ctx, req);
    }
    static int s_waitall_sizes(void *ctx, int n, void **reqs, size_t *bytes)
    {
        return of(ctx)->inner.waitall_sizes(of(ctx)->inner.ctx, n, reqs, bytes);
    }
    static int s_copy(void *ctx, void *dst, const void *src, size_t bytes)
    {
        Hooked *k = of(ctx);
        if (k->inject(kCopy, ++k->ncopy))
            return -1;
        unsigned char *d = k->real("copy dst", dst, bytes);
        unsigned char *s = k->real("copy src", src, bytes);
        if (!d || !s)
            return -1;
        if (k->deferred) {
            k->queue.push_back([d, s, bytes] {
                std::memmove(d, s, bytes);
                return true;
            });
            return 0;
        }
        std::memmove(d, s, bytes);
        return 0;
    }
    // out = a OP b with out aliasing a, b or neither, from llrdma_reduce_local's
    // inout = in OP inout.
    static int s_reduce(void *ctx, int op, int dtype, const void *a, const void *b, void *out,
                        size_t count)
    {
        Hooked *k = of(ctx);
        if (k->inject(kReduce, ++k->nreduce))
            return -1;
        size_t n = count * llrdma_ar_dtype_size(dtype);
        unsigned char *pa = k->real("reduce a", a, n), *pb = k->real("reduce b", b, n);
        unsigned char *po = k->real("reduce out", out, n);
        if (!pa || !pb || !po)
            return -1;
        auto run = [=] {
            std::vector<unsigned char> tmp(pb, pb + n);
            if (llrdma_reduce_local(op, dtype, pa, tmp.data(), count) != LLRDMA_AR_OK)
                return false;
            std::memcpy(po, tmp.data(), n);
            return true;
        };
        if (k->deferred) {
            k->queue.push_back(run);
            return 0;
        }
        return run() ? 0 : -1;
    }
    static int s_sync(void *ctx)
    {
        Hooked *k = of(ctx);
        if (k->inject(kSync, ++k->nsync))
            return -1;
        return k->flush() ? 0 : -1;
    }
    static void *s_alloc(void *ctx, size_t bytes)
    {
        Hooked *k = of(ctx);
        if (k->inject(kAlloc, ++k->nalloc))
            return nullptr;
        return k->heap->alloc(bytes, 3);
    }
    static void s_free(void *ctx, void *p)
    {
        Hooked *k = of(ctx);
        ++k->nfree;
        if (!k->heap->free(p))
            k->problems.push_back("free of an unknown pointer");
    }
};

} // namespace devsim

#endif
