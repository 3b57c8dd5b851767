// recursive_doubling.cc -- latency-optimal Allreduce for small messages.
//
// log2(p2) exchange steps of the whole vector (+2 fold steps when the size is
// not a power of two), each one message per rank: the fewest message latencies
// of the three algorithms, at the price of sending the full vector every step.
//
// Non-power-of-two (p2 = largest power of two <= size, rem = size - p2): rank
// 2i (i < rem) sends its vector to 2i+1, which reduces v[2i] OP v[2i+1] and
// takes part as new rank i; ranks >= 2*rem take part as new rank rank-rem.  At
// the end each odd rank 2i+1 sends the result back to 2i.
//
// Floating-point order: at step `mask` (1, 2, 4, ...) a rank and its partner
// (newrank ^ mask) hold the reductions of two adjacent aligned groups of new
// ranks; both compute (lower group) OP (higher group) on the same operands, so
// they get the same bits.  The result is therefore the balanced binary tree
// over the new ranks in increasing order, e.g. for 4 ranks
// (v0 OP v1) OP (v2 OP v3).  For 6 ranks the leaves are L0 = v0 OP v1,
// L1 = v2 OP v3, L2 = v4, L3 = v5 and the result is (L0 OP L1) OP (L2 OP L3).
// Rabenseifner produces the identical tree, so the two agree bit for bit.
#include "internal.h"

namespace llrdma
{
namespace ar
{

int fold_in(const Args &a, const Fold &f, int tag)
{
    Transport &t = *a.t;
    int rank = t.rank();
    if (rank >= 2 * f.rem)
        return LLRDMA_AR_OK;
    size_t bytes = a.count * a.esize;
    if (rank % 2 == 0)
        return t.send(a.buf, bytes, rank + 1, tag);
    int rc = t.recv(a.scratch, bytes, rank - 1, tag);
    if (rc != LLRDMA_AR_OK)
        return rc;
    return t.reduce(a.op, a.dtype, a.scratch, a.buf, a.buf, a.count); // v[2i] OP v[2i+1]
}

int fold_out(const Args &a, const Fold &f, int tag)
{
    Transport &t = *a.t;
    int rank = t.rank();
    if (rank >= 2 * f.rem)
        return LLRDMA_AR_OK;
    size_t bytes = a.count * a.esize;
    if (rank % 2 == 0)
        return t.recv(a.buf, bytes, rank + 1, tag);
    return t.send(a.buf, bytes, rank - 1, tag);
}

size_t scratch_recursive_doubling(size_t count, size_t esize, int size)
{
    return size > 1 ? count * esize : 0;
}

int run_recursive_doubling(const Args &a)
{
    Transport &t = *a.t;
    Fold f(t.rank(), t.size());
    size_t bytes = a.count * a.esize;

    int rc = fold_in(a, f, kTagRdFold);
    if (rc != LLRDMA_AR_OK)
        return rc;
    if (f.newrank >= 0) {
        for (int mask = 1; mask < f.p2; mask <<= 1) {
            int partner = f.newrank ^ mask;
            rc = t.sendrecv(a.buf, bytes, a.scratch, bytes, f.real_rank(partner), kTagRdExchange);
            if (rc != LLRDMA_AR_OK)
                return rc;
            if (f.newrank < partner)
                rc = t.reduce(a.op, a.dtype, a.buf, a.scratch, a.buf, a.count);
            else
                rc = t.reduce(a.op, a.dtype, a.scratch, a.buf, a.buf, a.count);
            if (rc != LLRDMA_AR_OK)
                return rc;
        }
    }
    return fold_out(a, f, kTagRdUnfold);
}

} // namespace ar
} // namespace llrdma
