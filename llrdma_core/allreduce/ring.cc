// ring.cc -- segmented, pipelined ring Allreduce for large messages.
//
// The vector is cut into p blocks (block_start/block_len), each block into
// segments of at most plan->segment_bytes, so every message stays on the
// transport path the planner chose (the low-latency one when segment <= hint).
// Phase 1 (reduce-scatter), p-1 steps: at step k rank r sends block (r-k) to
// r+1 and receives block (r-k-1) from r-1, reducing it into its own copy; after
// it, rank r holds the final block (r+1).  Phase 2 (allgather), p-1 steps: at
// step k rank r forwards block (r+1-k) and receives block (r-k) in place.
//
// Pipelining: the work of a phase is the sequence of items (step k, segment j),
// k-major.  Receives are posted `window` items ahead (phase 1 into scratch
// slots, phase 2 straight into the result) and up to `window` sends are in
// flight; each arriving segment is reduced as soon as it is waited for, while
// later segments are still on the wire.  Item (k, j) only sends data produced by
// item (k-1, j), which comes earlier in the sequence, and every rank posts its
// send before waiting for its receive, so the ring cannot deadlock.  Phase 1's
// sends are all completed before phase 2 writes into the blocks they read.
//
// Floating-point order: block b starts as v[b] on rank b and travels b, b+1,
// ..., b-1 (mod p); each rank computes (incoming) OP (own), so every element of
// block b is the left fold ((v[b] OP v[b+1]) OP v[b+2]) ... OP v[b-1], rank
// indexes mod p.  Segmentation does not change it.  The final block is computed
// on one rank and copied to the others, so all ranks hold the same bits.
#include "internal.h"

#include <algorithm>

namespace llrdma
{
namespace ar
{

namespace
{

struct Ring {
    const Args &a;
    int p, r, right, left;
    size_t seg;  // elements per segment
    size_t nseg; // segments per block (of the largest block)
    int window;

    // Element range of segment j of block b (mod p); n = 0 when past the block.
    void range(long b, size_t j, size_t *off, size_t *n) const
    {
        size_t blk = static_cast<size_t>(((b % p) + p) % p);
        size_t len = block_len(a.count, p, blk), s = j * seg;
        *off = block_start(a.count, p, blk) + std::min(s, len);
        *n = s < len ? std::min(seg, len - s) : 0;
    }

    void *slot(size_t item) const { return at(a.scratch, (item % window) * seg, a.esize); }

    // One phase.  reduce: phase 1 (receive into scratch, reduce) or phase 2
    // (receive in place).
    int phase(bool reduce)
    {
        Transport &t = *a.t;
        const size_t items = static_cast<size_t>(p - 1) * nseg;
        const long sb = reduce ? r : r + 1; // block sent at step k: sb - k
        const long rb = reduce ? r - 1 : r; // block received at step k: rb - k
        const int tag = reduce ? kTagRingReduce : kTagRingGather;
        void *rreq[Transport::kMaxLive / 2] = {};
        void *sreq[Transport::kMaxLive / 2] = {};
        const size_t es = a.esize;

        auto post_recv = [&](size_t item) {
            size_t off, n;
            long k = static_cast<long>(item / nseg);
            range(rb - k, item % nseg, &off, &n);
            void *dst = reduce ? slot(item) : at(a.buf, off, es);
            return t.irecv(dst, n * es, left, tag, &rreq[item % window]);
        };

        int rc = LLRDMA_AR_OK;
        for (size_t u = 0; u < items && u < static_cast<size_t>(window) && rc == 0; ++u)
            rc = post_recv(u);
        for (size_t it = 0; it < items && rc == LLRDMA_AR_OK; ++it) {
            long k = static_cast<long>(it / nseg);
            size_t j = it % nseg, w = it % window, off, n;
            // Send item it; its slot held the send of item it - window.
            rc = t.wait(&sreq[w]);
            if (rc != LLRDMA_AR_OK)
                break;
            range(sb - k, j, &off, &n);
            rc = t.isend(at(a.buf, off, es), n * es, right, tag, &sreq[w]);
            if (rc != LLRDMA_AR_OK)
                break;
            // Receive item it, reduce it, reuse its slot for item it + window.
            rc = t.wait(&rreq[w]);
            if (rc != LLRDMA_AR_OK)
                break;
            if (reduce) {
                range(rb - k, j, &off, &n);
                void *mine = at(a.buf, off, es);
                rc = t.reduce(a.op, a.dtype, slot(it), mine, mine, n);
                if (rc != LLRDMA_AR_OK)
                    break;
            }
            if (it + window < items)
                rc = post_recv(it + window);
        }
        if (rc == LLRDMA_AR_OK)
            rc = t.wait(window, sreq);
        return rc;
    }
};

} // namespace

int ring_window(const llrdma_ar_plan_t *plan)
{
    int w = plan->nsegments_in_flight;
    // Receives and sends of one window must fit the Transport's request table.
    return std::max(1, std::min(w, Transport::kMaxLive / 2));
}

size_t scratch_ring(const llrdma_ar_plan_t *plan, size_t count, size_t esize, int size)
{
    if (size <= 1 || count == 0)
        return 0;
    size_t seg = std::max<size_t>(1, plan->segment_bytes / esize);
    seg = std::min(seg, block_len(count, static_cast<size_t>(size), 0));
    return static_cast<size_t>(ring_window(plan)) * seg * esize;
}

int run_ring(const Args &a)
{
    Transport &t = *a.t;
    Ring g{a, t.size(), t.rank(), 0, 0, 0, 0, ring_window(a.plan)};
    g.right = (g.r + 1) % g.p;
    g.left = (g.r - 1 + g.p) % g.p;
    size_t maxblk = block_len(a.count, g.p, 0); // block 0 is a largest block
    g.seg = std::min(std::max<size_t>(1, a.plan->segment_bytes / a.esize), maxblk);
    g.nseg = (maxblk + g.seg - 1) / g.seg;

    int rc = g.phase(true);
    if (rc == LLRDMA_AR_OK)
        rc = g.phase(false);
    return rc;
}

} // namespace ar
} // namespace llrdma
