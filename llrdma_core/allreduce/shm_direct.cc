// shm_direct.cc -- Allreduce through a shared arena, every rank reduces all.
//
// For small vectors the second flag wait of shm_split costs more than it
// saves: here every rank copies its input into its slot, posts the in flag,
// and once all have, folds all slots itself straight into its own buffer.
// One flag wait per round; each rank reads p vectors instead of one, which is
// cheap while p * bytes is small (the planner's bound).
//
// Floating-point order: ((v0 OP v1) OP v2) ... OP v(p-1) in rank order on every
// rank: the same bits everywhere, and the same as shm_split.
//
// With copy hooks (GPU buffers) the fold goes to this rank's private chunk of
// the arena (pinned with it), then through the copy hook to the caller's
// buffer.  Private chunks alternate by round like the slots, so that copy
// needs no wait of its own: the next round's sync covers it before the chunk
// comes back.
#include "internal.h"

namespace llrdma
{
namespace ar
{

int run_shm_direct(const Args &a)
{
    Transport &t = *a.t;
    Arena ar(a.shm, t.rank(), t.size());
    if (ar.broken())
        return LLRDMA_AR_ERR_TRANSPORT;
    const size_t per = shm_round_elems(a);
    const bool hooked = t.hooked();
    int rc = LLRDMA_AR_OK;
    for (size_t off = 0; off < a.count && rc == LLRDMA_AR_OK; off += per) {
        size_t n = a.count - off < per ? a.count - off : per;
        uint64_t g = ar.next_round();
        rc = shm_put_input(a, ar, g, off, n);
        if (rc != LLRDMA_AR_OK)
            break;
        void *out = hooked ? ar.own(g) : at(a.buf, off, a.esize);
        shm_fold_slots(a, ar, g, 0, n, out);
        if (hooked && (rc = t.copy(at(a.buf, off, a.esize), out, n * a.esize)) != LLRDMA_AR_OK)
            rc = ar.fail(rc);
    }
    return rc;
}

} // namespace ar
} // namespace llrdma
