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
// The reduction always runs on the CPU: its operands are in the (host) arena
// even when the caller's buffers are on a GPU, whose copy hooks move data in
// and out (docs/allreduce.md, "Shared memory").
#include "internal.h"

namespace llrdma
{
namespace ar
{

// out = v0 OP v1 OP ... in rank order, elements [s, s + n) of round g.
void shm_fold_slots(const Args &a, const Arena &ar, uint64_t g, size_t s, size_t n, void *out)
{
    int p = a.t->size();
    reduce3(a.op, a.dtype, at(ar.slot(g, 0), s, a.esize), at(ar.slot(g, 1), s, a.esize), out, n);
    for (int r = 2; r < p; ++r)
        reduce3(a.op, a.dtype, out, at(ar.slot(g, r), s, a.esize), out, n);
}

// Copies this rank's input of round g into its slot and announces it.
int shm_put_input(const Args &a, Arena &ar, uint64_t g, size_t off, size_t n)
{
    Transport &t = *a.t;
    const void *src = a.sendbuf ? a.sendbuf : a.buf;
    int rc = t.copy(ar.slot(g, t.rank()), at(const_cast<void *>(src), off, a.esize), n * a.esize);
    if (rc == LLRDMA_AR_OK)
        rc = t.sync();
    if (rc != LLRDMA_AR_OK)
        return ar.fail(rc);
    ar.post_in(g);
    return ar.wait_in(g);
}

int run_shm_split(const Args &a)
{
    Transport &t = *a.t;
    Arena ar(a.shm, t.rank(), t.size());
    if (ar.broken())
        return LLRDMA_AR_ERR_TRANSPORT;
    const size_t per = shm_round_elems(a);
    for (size_t off = 0; off < a.count; off += per) {
        size_t n = a.count - off < per ? a.count - off : per;
        uint64_t g = ar.next_round();
        int rc = shm_put_input(a, ar, g, off, n);
        if (rc != LLRDMA_AR_OK)
            return rc;
        size_t s = block_start(n, t.size(), t.rank()), len = block_len(n, t.size(), t.rank());
        if (len > 0)
            shm_fold_slots(a, ar, g, s, len, at(ar.result(g), s, a.esize));
        ar.post_red(g);
        rc = ar.wait_red(g);
        if (rc == LLRDMA_AR_OK)
            rc = t.copy(at(a.buf, off, a.esize), ar.result(g), n * a.esize);
        if (rc != LLRDMA_AR_OK)
            return ar.fail(rc);
    }
    // An asynchronous last copy out completes before the caller's sync; the
    // arena's next user of this result chunk waits for our next input post,
    // which comes after a sync.
    return LLRDMA_AR_OK;
}

} // namespace ar
} // namespace llrdma
