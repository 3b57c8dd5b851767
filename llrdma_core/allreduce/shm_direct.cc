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
// GPU buffers (copy/reduce hooks): with device_fold the reduce hook folds the
// pinned arena straight into the device buffer (nothing to copy back);
// otherwise the CPU folds into this rank's private chunk of the arena and the
// copy hook moves it.  Both are asynchronous: the next round's sync, before
// its post, covers them, and the slots they read are only rewritten once
// every rank has posted the next round.
#include "internal.h"

namespace llrdma
{
namespace ar
{

int run_shm_direct(const Args &a)
{
    Transport &t = *a.t;
    Arena ar(a.shm, t.rank(), t.size());
    const bool hooked = t.hooked(), device = hooked && a.shm->device_fold;
    return shm_rounds(a, ar, [&](uint64_t g, size_t off, size_t n) {
        void *out = at(a.buf, off, a.esize);
        if (device) {
            int rc = t.reduce(a.op, a.dtype, ar.slot(g, 0), ar.slot(g, 1), out, n);
            for (int r = 2; r < t.size() && rc == LLRDMA_AR_OK; ++r)
                rc = t.reduce(a.op, a.dtype, out, ar.slot(g, r), out, n);
            return rc;
        }
        if (hooked) {
            shm_fold_slots(a, ar, g, 0, n, ar.own(g));
            return t.copy(out, ar.own(g), n * a.esize);
        }
        shm_fold_slots(a, ar, g, 0, n, out);
        return LLRDMA_AR_OK;
    });
}

} // namespace ar
} // namespace llrdma
