// hier.cc -- Allreduce across nodes: per-slice hierarchical schedule.
//
// The vector is cut into U = plan.slices slices (slice j = block j of U,
// block_start/block_len).  Every node has an arena (shm_arena.cc) for its
// L ranks; the rank with local rank j < U holds slice j.
//
//  1. Reduce-scatter in the node, in rounds: a round carries `piece`
//     elements of every slice (piece = chunk / U elements, so one slot holds
//     one piece per slice); every rank copies its pieces into its slot and
//     posts; once all have, the holder of slice j folds piece j of all L
//     slots, left to right in local rank order, into its own receive buffer
//     at the slice's place (its input there was copied into its slot first).
//  2. Inter-node step: the holders of slice j on the nodes (one per node)
//     Allreduce the slice in place with plan.inter_alg -- recursive doubling,
//     Rabenseifner or the segmented ring, chosen and segmented from the hint
//     -- over the transport, node index as rank.  All U holders of a node
//     run at the same time: every slice crosses the network once per node,
//     not the whole vector through one leader.
//  3. All-gather in the node, in rounds: the holder of slice j copies piece
//     j of the round into the round's result chunk; once all posted, every
//     rank copies the other slices' pieces out.
//
// Phases 1 and 3 use the arena's in flag only; a buffer written in round g
// is read only in round g, so the arena's two-generation rule (a rank posts
// round g + 1 only after finishing round g) keeps every wait single.
//
// Floating-point order: element e of slice j is the inter-node algorithm's
// order (docs/allreduce.md: a balanced tree over the nodes for recursive
// doubling and Rabenseifner, the ring's fold from block b for the ring, with
// the slice as the vector and the node index as the rank) applied to the node
// partials P_k = ((v_k0 OP v_k1) OP v_k2) ... (node k's ranks in rank order).
// Computed once per slice on each node by partner ranks with identical
// operands, then copied: bitwise the same on every rank.  The slices depend on
// count and U only, not on the chunk, segment or window.
//
// Ranks with local rank >= U (nodes with more ranks than the smallest one)
// only copy in and out.  A node of one rank has no arena: phases 1 and 3 are
// a copy of its input into its receive buffer (U is then 1).
//
// Device vectors (copy/reduce hooks; the GPU-direct inter-node step,
// docs/allreduce.md): the same schedule and order.  Phases 1 and 3 copy
// between the vectors and the arena through the hooks and sync before each
// post (the hooks may be asynchronous, the other ranks read the arena); the
// holder folds on the device straight from the arena when the arena is
// mapped for it (shm.device_fold, slices of at least device_fold_min bytes),
// else on the CPU into its private chunk, copied to its slice by the hook.
// Phase 2 runs on device memory: the transport hands the slice and the
// scratch to the NIC, the reduce hook folds what arrives.
#include "internal.h"

#include <algorithm>

namespace llrdma
{
namespace ar
{

namespace
{

// The inter-node group of one slice as a communicator: rank = node index,
// peer k = the slice's holder on node k (hier.peers[k]).
struct SubComm {
    const llrdma_ar_comm_t *outer;
    const int *peers;
};

int sub_isend(void *ctx, const void *buf, size_t bytes, int peer, int tag, void **req)
{
    auto *s = static_cast<SubComm *>(ctx);
    return s->outer->isend(s->outer->ctx, buf, bytes, s->peers[peer], tag, req);
}

int sub_irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req)
{
    auto *s = static_cast<SubComm *>(ctx);
    return s->outer->irecv(s->outer->ctx, buf, bytes, s->peers[peer], tag, req);
}

int sub_waitall(void *ctx, int n, void **reqs)
{
    auto *s = static_cast<SubComm *>(ctx);
    return s->outer->waitall(s->outer->ctx, n, reqs);
}

int sub_waitall_sizes(void *ctx, int n, void **reqs, size_t *bytes)
{
    auto *s = static_cast<SubComm *>(ctx);
    return s->outer->waitall_sizes(s->outer->ctx, n, reqs, bytes);
}

int sub_cancel(void *ctx, void *req)
{
    auto *s = static_cast<SubComm *>(ctx);
    return s->outer->cancel ? s->outer->cancel(s->outer->ctx, req) : 0;
}

// The memory hooks, for device vectors: the outer comm's, with its context.
int sub_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    auto *s = static_cast<SubComm *>(ctx);
    return s->outer->copy(s->outer->ctx, dst, src, bytes);
}

int sub_reduce(void *ctx, int op, int dtype, const void *a, const void *b, void *out, size_t n)
{
    auto *s = static_cast<SubComm *>(ctx);
    return s->outer->reduce(s->outer->ctx, op, dtype, a, b, out, n);
}

int sub_sync(void *ctx)
{
    auto *s = static_cast<SubComm *>(ctx);
    return s->outer->sync(s->outer->ctx);
}

// Elements of slice j in the round starting `off` elements into every slice
// (0 for j >= slices: a rank that holds no slice).
size_t piece_len(size_t count, int slices, int j, size_t off, size_t piece)
{
    if (j >= slices)
        return 0;
    size_t len = block_len(count, static_cast<size_t>(slices), static_cast<size_t>(j));
    return off < len ? std::min(piece, len - off) : 0;
}

// Phase 2 for this rank's slice [start, start + n) of a.buf.  `failed`: this
// node failed before phase 2 (its arena is broken, or this rank could not
// stage its input): the step still runs, carrying the failure in empty
// messages where the transport reports received sizes, so the slice's
// holders on the other nodes fail the call too instead of waiting for
// messages that never come (and nothing is left to be matched next call).
int inter_node(const Args &a, const llrdma_ar_comm_t *outer, size_t start, size_t n,
               bool failed = false)
{
    const llrdma_ar_hier_t &h = *a.hier;
    SubComm sc{outer, h.peers};
    llrdma_ar_comm_t sub{};
    sub.ctx = &sc;
    sub.rank = h.node;
    sub.size = h.nnodes;
    sub.isend = sub_isend;
    sub.irecv = sub_irecv;
    sub.waitall = sub_waitall;
    sub.waitall_sizes = outer->waitall_sizes ? sub_waitall_sizes : nullptr;
    sub.cancel = sub_cancel;
    if (outer->copy) { // scratch is the caller's: no alloc hook needed
        sub.copy = sub_copy;
        sub.reduce = sub_reduce;
        sub.sync = outer->sync ? sub_sync : nullptr;
    }
    llrdma_ar_plan_t inner = hier_inner_plan(a.plan);
    Transport t2(&sub);
    t2.carry(true); // only where sub.waitall_sizes is set (Transport::carry)
    if (failed) {
        if (!t2.carrying())
            return LLRDMA_AR_ERR_TRANSPORT; // nothing can tell the other nodes
        t2.failed_before(LLRDMA_AR_ERR_TRANSPORT);
    }
    Args b{&t2,       at(a.buf, start, a.esize), n,      a.dtype, a.op,    a.esize,
           a.scratch, a.scratch_bytes,           &inner, nullptr, nullptr, nullptr};
    int rc;
    switch (inner.alg) {
    case LLRDMA_AR_RECURSIVE_DOUBLING:
        rc = run_recursive_doubling(b);
        break;
    case LLRDMA_AR_RABENSEIFNER:
        rc = run_rabenseifner(b);
        break;
    default:
        rc = run_ring(b);
        break;
    }
    int drc = t2.drain();
    return rc != LLRDMA_AR_OK ? rc : drc;
}

} // namespace

llrdma_ar_plan_t hier_inner_plan(const llrdma_ar_plan_t *plan)
{
    llrdma_ar_plan_t p{};
    p.alg = plan->inter_alg;
    p.segment_bytes = plan->segment_bytes;
    p.nsegments_in_flight = plan->nsegments_in_flight;
    p.why = plan->inter_why;
    return p;
}

size_t scratch_hier(const llrdma_ar_plan_t *plan, size_t count, size_t esize)
{
    if (plan->slices < 1 || plan->nodes < 2)
        return 0;
    llrdma_ar_plan_t inner = hier_inner_plan(plan);
    size_t n = block_len(count, static_cast<size_t>(plan->slices), 0); // the largest slice
    switch (inner.alg) {
    case LLRDMA_AR_RECURSIVE_DOUBLING:
        return scratch_recursive_doubling(n, esize, plan->nodes);
    case LLRDMA_AR_RABENSEIFNER:
        return scratch_rabenseifner(n, esize, plan->nodes);
    default:
        return scratch_ring(&inner, n, esize, plan->nodes);
    }
}

int run_hier(const Args &a)
{
    Transport &t = *a.t;
    const llrdma_ar_hier_t &h = *a.hier;
    const int U = a.plan->slices, L = h.local_size, me = h.local_rank;
    const size_t es = a.esize, count = a.count;
    const bool holder = me < U;
    const size_t start = holder ? block_start(count, U, me) : 0;
    const size_t mine = holder ? block_len(count, U, me) : 0;
    const size_t longest = block_len(count, U, 0);
    auto src = static_cast<const unsigned char *>(a.sendbuf ? a.sendbuf : a.buf);
    int rc = LLRDMA_AR_OK;

    const bool failed_before = t.comm()->failed != 0;
    // A failure before phase 2 on this node: its holders still run phase 2,
    // carrying it (inter_node), then the call fails here.
    auto carry_out = [&](int err) {
        if (mine > 0 && h.nnodes > 1)
            (void)inter_node(a, t.comm(), start, mine, true);
        return err;
    };

    if (L == 1) { // no arena: the node partial is the input
        if (failed_before)
            return carry_out(LLRDMA_AR_ERR_MEMORY);
        if (a.sendbuf && (rc = t.copy(a.buf, a.sendbuf, count * es)) != LLRDMA_AR_OK)
            return carry_out(rc);
        if (mine > 0 && h.nnodes > 1)
            rc = inter_node(a, t.comm(), start, mine);
        return rc;
    }

    Arena ar(a.shm, me, L);
    if (ar.broken())
        return carry_out(LLRDMA_AR_ERR_TRANSPORT);
    if (failed_before) // the node's other ranks end in phase 1
        return carry_out(ar.fail(LLRDMA_AR_ERR_MEMORY));
    const size_t piece = a.shm->chunk_bytes / es / static_cast<size_t>(U);
    if (piece == 0) // the glue sizes the chunk for U pieces of any element
        return ar.fail(LLRDMA_AR_ERR_INVALID);

    // 1. Reduce-scatter through the arena.
    const bool hooked = t.hooked();
    for (size_t off = 0; off < longest; off += piece) {
        uint64_t g = ar.next_round();
        unsigned char *slot = ar.slot(g, me);
        for (int j = 0; j < U && rc == LLRDMA_AR_OK; ++j) {
            size_t n = piece_len(count, U, j, off, piece);
            if (n > 0)
                rc = t.copy(slot + j * piece * es, src + (block_start(count, U, j) + off) * es,
                            n * es);
        }
        if (rc == LLRDMA_AR_OK && hooked)
            rc = t.sync(); // the copies in (and the last round's fold) before the post
        if (rc != LLRDMA_AR_OK)
            return carry_out(ar.fail(rc));
        ar.post_in(g);
        if ((rc = ar.wait_in(g)) != LLRDMA_AR_OK)
            return carry_out(ar.fail(rc));
        size_t n = piece_len(count, U, me, off, piece);
        if (n == 0)
            continue;
        size_t o = static_cast<size_t>(me) * piece * es;
        void *out = at(a.buf, start + off, es);
        if (hooked && a.shm->device_fold && n * es >= a.shm->device_fold_min) {
            // The GPU reads the pinned slots; the next round's sync (or the
            // transport, before the slice leaves) orders it.
            rc = t.reduce(a.op, a.dtype, ar.slot(g, 0) + o, ar.slot(g, 1) + o, out, n);
            for (int r = 2; r < L && rc == LLRDMA_AR_OK; ++r)
                rc = t.reduce(a.op, a.dtype, out, ar.slot(g, r) + o, out, n);
        } else {
            // Host fold; with hooks into the private chunk, then to the slice
            // (the chunk is next written in round g + 2, after this round's
            // copy was synced in round g + 1).
            void *acc = hooked ? static_cast<void *>(ar.own(g)) : out;
            reduce3(a.op, a.dtype, ar.slot(g, 0) + o, ar.slot(g, 1) + o, acc, n);
            for (int r = 2; r < L; ++r)
                reduce3(a.op, a.dtype, acc, ar.slot(g, r) + o, acc, n);
            if (hooked)
                rc = t.copy(out, acc, n * es);
        }
        if (rc != LLRDMA_AR_OK)
            return carry_out(ar.fail(rc));
    }

    // 2. The slice across nodes.  A failure here must not leave the node's
    // other ranks waiting in phase 3: it breaks the arena.
    if (mine > 0 && h.nnodes > 1 && (rc = inter_node(a, t.comm(), start, mine)) != LLRDMA_AR_OK)
        return ar.fail(rc);

    // 3. All-gather through the arena.
    for (size_t off = 0; off < longest; off += piece) {
        uint64_t g = ar.next_round();
        unsigned char *res = ar.result(g);
        size_t n = piece_len(count, U, me, off, piece);
        if (n > 0)
            rc = t.copy(res + static_cast<size_t>(me) * piece * es, at(a.buf, start + off, es),
                        n * es);
        if (rc == LLRDMA_AR_OK && hooked)
            rc = t.sync(); // the piece (and the last round's copies out) before the post
        if (rc != LLRDMA_AR_OK)
            return ar.fail(rc);
        ar.post_in(g);
        if ((rc = ar.wait_in(g)) != LLRDMA_AR_OK)
            return ar.fail(rc);
        for (int j = 0; j < U && rc == LLRDMA_AR_OK; ++j) {
            size_t nj = piece_len(count, U, j, off, piece);
            if (j != me && nj > 0)
                rc = t.copy(at(a.buf, block_start(count, U, j) + off, es),
                            res + static_cast<size_t>(j) * piece * es, nj * es);
        }
        if (rc != LLRDMA_AR_OK)
            return ar.fail(rc);
    }
    // Hooked: the last copies out may still be queued; the caller's end of
    // the call (the stream's) waits for them, and the result chunk they read
    // is next written two rounds on, after every rank synced again.
    return LLRDMA_AR_OK;
}

} // namespace ar
} // namespace llrdma
