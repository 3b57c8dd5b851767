// shm_split.cc -- Allreduce through a shared arena, reduction split by rank.
//
// Ranks that share memory need no messages: per round (one chunk of the
// vector) every rank copies its input into its slot and posts the in flag;
// once all have, rank r reduces slice r of the chunk across all slots into the
// shared result and posts the red flag; once all have, every rank copies the
// whole result out.  Per rank and byte: one copy in, one read of a slice per
// slot (together one vector), one copy out, and two flag waits per round --
// where a message-based Allreduce copies each byte through the transport
// about 2(p-1)/p times each way and waits on 2 log2(p) or 2(p-1) messages.
//
// Floating-point order: slice r is ((v0 OP v1) OP v2) ... OP v(p-1), left to
// right in rank order, computed once and copied to every rank: bitwise the
// same everywhere, and the same as shm_direct.
//
// GPU buffers (copy/reduce hooks): copies in and out go through the hooks;
// with device_fold, slices of at least device_fold_min bytes are reduced by the reduce hook
// straight from the pinned arena into device scratch and copied back into the
// shared result (the GPU does the arithmetic, the CPU only waits).  Smaller
// slices, or without device_fold, the CPU folds: a device fold costs one more
// stream sync, which outweighs small slices' arithmetic (the Open MPI glue
// uses 64 KiB; 2 H200s, one rank each: 1 MB took 112 us with the device fold,
// 181 with the CPU's).
#include "internal.h"

#include <cstring>

namespace llrdma
{
namespace ar
{

// out = v0 OP v1 OP ... in rank order, elements [s, s + n) of round g.
// Tile by tile: a tile of out stays in L1 while every slot's tile is folded
// into it, so each slot is read once and out written once (p - 1 passes
// over the whole slice read and wrote out p - 1 times).  Each element's
// order is unchanged: bitwise the same.
void shm_fold_slots(const Args &a, const Arena &ar, uint64_t g, size_t s, size_t n, void *out,
                    const void *mine, void *also)
{
    const int me = a.t->rank();
    const size_t es = a.esize;
    fold_rank_order(
        a.op, a.dtype, es, a.t->size(), n, static_cast<unsigned char *>(out),
        [&](int r, size_t i) -> const void * {
            return r == me && mine ? at(const_cast<void *>(mine), i, es)
                                   : at(ar.slot(g, r), s + i, es);
        },
        [&](size_t i, const unsigned char *o, size_t m) {
            if (also)
                std::memcpy(at(also, i, es), o, m * es);
        });
}

size_t scratch_shm_split(const llrdma_ar_plan_t *plan, size_t count, size_t esize, int size)
{
    // One slice of a round, for the device fold.
    size_t per = plan->segment_bytes / esize;
    if (per == 0 || per > count)
        per = count;
    return (per / static_cast<size_t>(size) + 1) * esize;
}

namespace
{

// The device fold of slice [s, s + n) of round g into the shared result.
int fold_on_device(const Args &a, const Arena &ar, uint64_t g, size_t s, size_t n)
{
    Transport &t = *a.t;
    int rc = t.reduce(a.op, a.dtype, at(ar.slot(g, 0), s, a.esize), at(ar.slot(g, 1), s, a.esize),
                      a.scratch, n);
    for (int r = 2; r < t.size() && rc == LLRDMA_AR_OK; ++r)
        rc = t.reduce(a.op, a.dtype, a.scratch, at(ar.slot(g, r), s, a.esize), a.scratch, n);
    if (rc == LLRDMA_AR_OK)
        rc = t.copy(at(ar.result(g), s, a.esize), a.scratch, n * a.esize);
    if (rc == LLRDMA_AR_OK)
        rc = t.sync(); // the slice must be in the arena before red is posted
    return rc;
}

} // namespace

int run_shm_split(const Args &a)
{
    Transport &t = *a.t;
    Arena ar(a.shm, t.rank(), t.size());
    const bool device = t.hooked() && a.shm->device_fold;
    if (device && a.scratch_bytes < scratch_shm_split(a.plan, a.count, a.esize, t.size()))
        return ar.fail(LLRDMA_AR_ERR_INVALID);
    const void *src = a.sendbuf ? a.sendbuf : a.buf;
    return shm_rounds(
        a, ar,
        [&](uint64_t g, size_t off, size_t n) {
            size_t s = block_start(n, t.size(), t.rank()), len = block_len(n, t.size(), t.rank());
            int rc = LLRDMA_AR_OK;
            if (len > 0 && device && len * a.esize >= a.shm->device_fold_min)
                rc = fold_on_device(a, ar, g, s, len);
            else if (len > 0 && !t.hooked())
                // The own block straight from the input (ShmInput left it out of
                // the slot) and straight into the output: 2/p of the vector's
                // bytes not copied through the arena.  In place, each piece of
                // the input is read before the same piece of the output is
                // written.
                shm_fold_slots(a, ar, g, s, len, at(ar.result(g), s, a.esize),
                               at(const_cast<void *>(src), off + s, a.esize),
                               at(a.buf, off + s, a.esize));
            else if (len > 0)
                shm_fold_slots(a, ar, g, s, len, at(ar.result(g), s, a.esize));
            if (rc != LLRDMA_AR_OK)
                return rc;
            ar.lap(LLRDMA_AR_PHASE_FOLD);
            ar.post_red(g);
            if (t.hooked()) {
                // One copy of the whole chunk (a stream operation each: fewer is
                // better).  Asynchronous: the next round's sync (before its
                // post) covers it, and the result chunk is only rewritten once
                // every rank has posted round g + 2.
                rc = ar.wait_red(g);
                ar.lap(LLRDMA_AR_PHASE_WAIT_RED);
                if (rc == LLRDMA_AR_OK)
                    rc = t.copy(at(a.buf, off, a.esize), ar.result(g), n * a.esize);
                ar.lap(LLRDMA_AR_PHASE_COPY_OUT);
                return rc;
            }
            // Host: each slice out as soon as its rank has reduced it (its own
            // first), so copying out overlaps the slower ranks' folds instead
            // of waiting for all of them.
            // Up to four slices at a time, copied together (copy_n).
            for (int k = 1; k < t.size() && rc == LLRDMA_AR_OK;) {
                void *dst[4];
                const void *from[4];
                size_t len[4];
                int m = 0;
                for (; m < 4 && k < t.size() && rc == LLRDMA_AR_OK; ++k) {
                    int q = (t.rank() + k) % t.size();
                    size_t qs = block_start(n, t.size(), q), ql = block_len(n, t.size(), q);
                    rc = ar.wait_red_of(q, g);
                    if (ql == 0)
                        continue;
                    dst[m] = at(a.buf, off + qs, a.esize);
                    from[m] = at(ar.result(g), qs, a.esize);
                    len[m++] = ql * a.esize;
                }
                ar.lap(LLRDMA_AR_PHASE_WAIT_RED);
                if (rc == LLRDMA_AR_OK)
                    rc = t.copy_n(m, dst, from, len);
                ar.lap(LLRDMA_AR_PHASE_COPY_OUT);
            }
            return rc;
        },
        true);
}

} // namespace ar
} // namespace llrdma
