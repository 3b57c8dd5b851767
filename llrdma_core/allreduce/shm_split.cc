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

int shm_fold_arriving(const Args &a, Arena &ar, uint64_t g, size_t s, size_t n, void *out,
                      const void *mine, void *also)
{
    const int me = a.t->rank(), p = a.t->size();
    const size_t es = a.esize;
    auto src = [&](int r, size_t i) -> const void * {
        return r == me && mine ? at(const_cast<void *>(mine), i, es) : at(ar.slot(g, r), s + i, es);
    };
    llrdma_ar_wait_t ws{};
    bool waited = false;
    for (int done = 0; done < p;) {
        // Ranks [done, k) are there; a first pass needs two of them.
        int k = done;
        while (k < p && (k == me || ar.in_posted(k, g)))
            ++k;
        if (k < done + (done == 0 ? 2 : 1)) {
            waited = true;
            int rc = ar.wait_in_of(k, g, ws);
            if (rc != LLRDMA_AR_OK)
                return rc;
            ar.lap(LLRDMA_AR_PHASE_WAIT_IN);
            continue;
        }
        // The pass that ends the fold also writes each piece into `also`
        // while it is in L1.
        auto nothing = [](size_t, const unsigned char *, size_t) {};
        auto write_also = [&](size_t i, const unsigned char *o, size_t m) {
            if (also)
                std::memcpy(at(also, i, es), o, m * es);
        };
        if (k == p)
            fold_ranks(a.op, a.dtype, es, done, k, n, static_cast<unsigned char *>(out), src,
                       write_also);
        else
            fold_ranks(a.op, a.dtype, es, done, k, n, static_cast<unsigned char *>(out), src,
                       nothing);
        ar.lap(LLRDMA_AR_PHASE_FOLD);
        done = k;
    }
    a.shm->arriving_rounds += waited;
    return LLRDMA_AR_OK;
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

// Host: each other rank's slice of round g out as soon as that rank has
// reduced it, in whichever order they finish (the own slice is already in
// the output), so copying out overlaps the slower ranks' folds instead of
// waiting for the next rank in line.  The ranks not ready on the first
// look are taken as they become ready; when none is, the first is waited for.
int copy_out_as_ready(const Args &a, Arena &ar, uint64_t g, size_t off, size_t n)
{
    Transport &t = *a.t;
    const int p = t.size(), me = t.rank();
    auto out = [&](int q) {
        size_t qs = block_start(n, p, q), ql = block_len(n, p, q);
        int rc = ql > 0 ? t.copy(at(a.buf, off + qs, a.esize), at(ar.result(g), qs, a.esize),
                                 ql * a.esize)
                        : LLRDMA_AR_OK;
        ar.lap(LLRDMA_AR_PHASE_COPY_OUT);
        return rc;
    };
    constexpr int kPendMax = 256; // more ranks than that: the rest in line
    int pend[kPendMax], np = 0, rc = LLRDMA_AR_OK;
    for (int k = 1; k < p && rc == LLRDMA_AR_OK; ++k) {
        int q = (me + k) % p;
        if (ar.red_posted(q, g)) {
            rc = out(q);
        } else if (np < kPendMax) {
            pend[np++] = q;
        } else if ((rc = ar.wait_red_of(q, g)) == LLRDMA_AR_OK) {
            ar.lap(LLRDMA_AR_PHASE_WAIT_RED);
            rc = out(q);
        }
    }
    while (np > 0 && rc == LLRDMA_AR_OK) {
        int kept = 0;
        for (int i = 0; i < np && rc == LLRDMA_AR_OK; ++i) {
            if (ar.red_posted(pend[i], g))
                rc = out(pend[i]);
            else
                pend[kept++] = pend[i];
        }
        if (kept == np && rc == LLRDMA_AR_OK) {
            // None ready: wait for the first (the wait's own liveness and
            // abort checks), then look again.
            if ((rc = ar.wait_red_of(pend[0], g)) == LLRDMA_AR_OK) {
                ar.lap(LLRDMA_AR_PHASE_WAIT_RED);
                rc = out(pend[0]);
                --kept;
                std::memmove(pend, pend + 1, static_cast<size_t>(kept) * sizeof(int));
            }
        }
        np = kept;
    }
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
                // the input is read before (or in an earlier pass than) the
                // same piece of the output is written.  ShmInput did not wait
                // for the inputs: the fold takes them as they arrive.
                rc = shm_fold_arriving(a, ar, g, s, len, at(ar.result(g), s, a.esize),
                                       at(const_cast<void *>(src), off + s, a.esize),
                                       at(a.buf, off + s, a.esize));
            else if (!t.hooked())
                // No block of its own (fewer elements than ranks): what its
                // copy out reads needs every input anyway; wait as ShmInput
                // would have.
                rc = ar.wait_in(g);
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
            return copy_out_as_ready(a, ar, g, off, n);
        },
        true);
}

} // namespace ar
} // namespace llrdma
