// rabenseifner.cc -- reduce-scatter (recursive halving) + allgather (recursive
// doubling) for medium messages.
//
// Each rank sends about 2 * (p2-1)/p2 of the vector in 2*log2(p2) messages:
// bandwidth close to the ring's with logarithmic latency.  Non-power-of-two
// sizes are folded exactly as in recursive_doubling.cc (two extra full-vector
// messages, which is why the planner prefers the ring for large vectors there).
//
// The vector is cut into p2 blocks (block_start/block_len: the first
// count % p2 blocks hold one element more; with count < p2 some are empty and
// their messages are skipped on both sides).  At step mask = 1, 2, 4, ... a new
// rank and its partner (newrank ^ mask) share the same block range [lo, hi); the
// one with the mask bit clear keeps the lower half, the other the upper half,
// and each reduces the half it keeps.  The allgather replays the steps in
// reverse, exchanging kept halves.
//
// Floating-point order: at step `mask` both partners hold reductions of two
// adjacent aligned groups of new ranks and the keeper computes (lower group) OP
// (higher group), so every element is the balanced binary tree over the new
// ranks in increasing order -- the same tree as recursive_doubling.cc.  Each
// element is reduced on one rank only and then copied, so all ranks hold the
// same bits.
#include "internal.h"

namespace llrdma
{
namespace ar
{

size_t scratch_rabenseifner(size_t count, size_t esize, int size)
{
    // The fold receives a full vector; a kept half can exceed count / 2 elements
    // when blocks are uneven, so the simple bound is one full vector.
    return size > 1 ? count * esize : 0;
}

int run_rabenseifner(const Args &a)
{
    Transport &t = *a.t;
    Fold f(t.rank(), t.size());
    const size_t p2 = static_cast<size_t>(f.p2);
    const size_t es = a.esize;

    int rc = fold_in(a, f, kTagRabFold);
    if (rc != LLRDMA_AR_OK)
        return rc;

    if (f.newrank >= 0) {
        // Block range held before each halving step, replayed by the allgather.
        size_t saved_lo[32], saved_hi[32];
        size_t lo = 0, hi = p2;
        int steps = 0;
        for (int mask = 1; static_cast<size_t>(mask) < p2; mask <<= 1, ++steps) {
            int partner = f.newrank ^ mask;
            bool lower = f.newrank < partner;
            size_t mid = lo + (hi - lo) / 2;
            size_t klo = lower ? lo : mid, khi = lower ? mid : hi; // kept blocks
            size_t glo = lower ? mid : lo, ghi = lower ? hi : mid; // given blocks
            size_t ks = block_start(a.count, p2, klo), kn = block_start(a.count, p2, khi) - ks;
            size_t gs = block_start(a.count, p2, glo), gn = block_start(a.count, p2, ghi) - gs;

            rc = t.sendrecv(at(a.buf, gs, es), gn * es, a.scratch, kn * es, f.real_rank(partner),
                            kTagRabHalving);
            if (rc != LLRDMA_AR_OK)
                return rc;
            void *mine = at(a.buf, ks, es);
            if (lower)
                rc = t.reduce(a.op, a.dtype, mine, a.scratch, mine, kn);
            else
                rc = t.reduce(a.op, a.dtype, a.scratch, mine, mine, kn);
            if (rc != LLRDMA_AR_OK)
                return rc;
            saved_lo[steps] = lo;
            saved_hi[steps] = hi;
            lo = klo;
            hi = khi;
        }
        // Allgather: undo the halving, last step first.
        for (int s = steps - 1; s >= 0; --s) {
            int partner = f.newrank ^ (1 << s);
            size_t plo = saved_lo[s], phi = saved_hi[s];
            size_t olo = (lo == plo) ? hi : plo, ohi = (lo == plo) ? phi : lo; // partner's half
            size_t ms = block_start(a.count, p2, lo), mn = block_start(a.count, p2, hi) - ms;
            size_t os = block_start(a.count, p2, olo), on = block_start(a.count, p2, ohi) - os;
            rc = t.sendrecv(at(a.buf, ms, es), mn * es, at(a.buf, os, es), on * es,
                            f.real_rank(partner), kTagRabDoubling);
            if (rc != LLRDMA_AR_OK)
                return rc;
            lo = plo;
            hi = phi;
        }
    }
    return fold_out(a, f, kTagRabUnfold);
}

} // namespace ar
} // namespace llrdma
