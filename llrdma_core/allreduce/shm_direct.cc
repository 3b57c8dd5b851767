// shm_direct.cc -- Allreduce through a shared arena, every rank reduces all.
//
// For small vectors the second flag wait of shm_split costs more than it
// saves: here every rank copies its input into its slot, posts the in flag,
// and once all have, folds all slots itself straight into its own buffer.
// One flag wait per round; each rank reads p vectors instead of one, which is
// cheap while p * bytes is small (the planner's bound).
//
// Vectors of at most llrdma_ar_shm_t.lines_max bytes travel in the arena's
// lines instead (data and round number in one cache line: Arena::post_lines).
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

#include <cstring>

namespace llrdma
{
namespace ar
{

namespace
{

// A vector of at most lines_max bytes: one round in the lines (data and
// round number together), folded in rank order from copies on the stack (a
// line holds 56 bytes, so elements may straddle two lines).  Every rank
// takes it for the same calls, whatever its buffers: with copy hooks (device
// memory) the input and the result pass through this rank's two private
// chunks of the arena (pinned; the vector is at most a chunk), and the rank
// waits for each hook copy before it goes on.
// One round in the lines from host memory: in (bytes) posted, every rank's
// lines folded in rank order into out (which may be in).
int lines_round(Arena &ar, int size, const void *in, void *out, size_t count, size_t bytes,
                ReduceFn fold)
{
    alignas(64) unsigned char v0[Arena::kLinesBuf], v1[Arena::kLinesBuf];
    uint64_t g = ar.next_round();
    ar.post_lines(g, in, bytes);
    int rc = ar.wait_lines(g, bytes);
    if (rc != LLRDMA_AR_OK)
        return ar.fail(rc);
    if (bytes <= Arena::kLinePayload) {
        // One line: folded where it lies, no copy (the common 8-byte case).
        fold(ar.line_data(g, 0), ar.line_data(g, 1), out, count);
        for (int r = 2; r < size; ++r)
            fold(out, ar.line_data(g, r), out, count);
        return LLRDMA_AR_OK;
    }
    // Every rank folds in rank order, so all get the same bits; its own
    // vector is the same bytes in `in` as in its lines, so it is not
    // copied back (unless `out` already holds the partial result there).
    const void *a = in, *b = in;
    if (ar.rank() != 0) {
        ar.read_lines(g, 0, v0, bytes);
        a = v0;
    }
    if (ar.rank() != 1) {
        ar.read_lines(g, 1, v1, bytes);
        b = v1;
    }
    fold(a, b, out, count);
    for (int r = 2; r < size; ++r) {
        if (r != ar.rank() || in == out) {
            ar.read_lines(g, r, v1, bytes);
            b = v1;
        } else {
            b = in;
        }
        fold(out, b, out, count);
    }
    return LLRDMA_AR_OK;
}

int run_in_lines(const Args &a, Arena &ar)
{
    Transport &t = *a.t;
    const size_t bytes = a.count * a.esize;
    const void *in = a.sendbuf ? a.sendbuf : a.buf;
    if (ar.broken())
        return LLRDMA_AR_ERR_TRANSPORT;
    int rc;
    ReduceFn fold = reduce_kernel(a.op, a.dtype);
    if (!fold)
        return LLRDMA_AR_ERR_INVALID; // the planner refused the pair before
    if (!t.hooked()) {
        if ((rc = lines_round(ar, t.size(), in, a.buf, a.count, bytes, fold)) == LLRDMA_AR_OK)
            ++a.shm->line_rounds;
        return rc;
    }
    alignas(64) unsigned char v0[Arena::kLinesBuf], v1[Arena::kLinesBuf];
    uint64_t g = ar.next_round();
    if ((rc = t.copy(ar.own(g), in, bytes)) != LLRDMA_AR_OK || (rc = t.sync()) != LLRDMA_AR_OK)
        return ar.fail(rc);
    ar.post_lines(g, ar.own(g), bytes);
    if ((rc = ar.wait_lines(g, bytes)) != LLRDMA_AR_OK)
        return ar.fail(rc);
    void *o = ar.own(g + 1);
    ar.read_lines(g, 0, v0, bytes);
    ar.read_lines(g, 1, v1, bytes);
    fold(v0, v1, o, a.count);
    for (int r = 2; r < t.size(); ++r) {
        ar.read_lines(g, r, v1, bytes);
        fold(o, v1, o, a.count);
    }
    if ((rc = t.copy(a.buf, o, bytes)) != LLRDMA_AR_OK || (rc = t.sync()) != LLRDMA_AR_OK)
        return ar.fail(rc);
    ++a.shm->line_rounds;
    return LLRDMA_AR_OK;
}

} // namespace

int run_shm_direct(const Args &a)
{
    Transport &t = *a.t;
    Arena ar(a.shm, t.rank(), t.size());
    const size_t bytes = a.count * a.esize;
    // Not by buffer kind: ranks whose buffers differ must run the same rounds.
    if (lines_fit(a.shm, t.size(), bytes))
        return run_in_lines(a, ar);
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
        ar.lap(LLRDMA_AR_PHASE_FOLD);
        return LLRDMA_AR_OK;
    });
}

} // namespace ar
} // namespace llrdma

extern "C" size_t llrdma_ar_lines_limit(size_t lines_max, int size)
{
    return llrdma::ar::lines_limit(lines_max, size);
}

extern "C" int llrdma_ar_lines_fit(const llrdma_ar_shm_t *shm, int size, size_t bytes)
{
    return llrdma::ar::lines_fit(shm, size, bytes);
}

namespace
{
// The lines round of llrdma_ar_shm_direct_host and llrdma_ar_lines_run,
// once their arguments are checked.
int lines_call(llrdma_ar_shm_t *shm, int rank, int size, const void *sendbuf, void *recvbuf,
               size_t count, size_t es, llrdma::ar::ReduceFn fold)
{
    using namespace llrdma::ar;
    Arena ar(shm, rank, size);
    if (ar.broken())
        return LLRDMA_AR_ERR_TRANSPORT;
    int rc = lines_round(ar, size, sendbuf ? sendbuf : recvbuf, recvbuf, count, count * es, fold);
    if (rc == LLRDMA_AR_OK)
        ++shm->line_rounds;
    return rc;
}

// One round through the slots from host memory, as run_shm_direct runs a
// vector of at most one round (shm_round_elems) -- the same copy in, flag,
// wait and tile-by-tile fold in rank order, so ranks on either path agree
// round for round and bit for bit -- without the transport, the argument
// block and the round loop, which cost a 1 KB call on 2 ranks about a fifth
// of its instructions (docs/benchmarks-h200.md, 2026-12-06).
inline __attribute__((always_inline)) int slots_call(llrdma_ar_shm_t *shm, int rank, int size,
                                                     const void *in, void *out, size_t count,
                                                     size_t es, int dtype, int op)
{
    using namespace llrdma::ar;
    Arena ar(shm, rank, size);
    if (ar.broken())
        return LLRDMA_AR_ERR_TRANSPORT;
    const size_t bytes = count * es;
    uint64_t g = ar.next_round();
    ar.phase_start();
    std::memcpy(ar.slot(g, rank), in, bytes);
    ar.lap(LLRDMA_AR_PHASE_COPY_IN);
    ar.post_in(g);
    int rc = ar.wait_in(g);
    if (rc != LLRDMA_AR_OK)
        return ar.fail(rc);
    ar.lap(LLRDMA_AR_PHASE_WAIT_IN);
    fold_rank_order(
        op, dtype, es, size, count, static_cast<unsigned char *>(out),
        [&](int r, size_t i) -> const void * { return ar.slot(g, r) + i * es; },
        [](size_t, const unsigned char *, size_t) {});
    ar.lap(LLRDMA_AR_PHASE_FOLD);
    return LLRDMA_AR_OK;
}

bool host_args_ok(const llrdma_ar_shm_t *shm, int rank, int size, const void *recvbuf, size_t count,
                  size_t es, int dtype, int op)
{
    size_t bytes;
    // Overflow by multiplication: a division costs tens of cycles on every call.
    return shm && shm->base && recvbuf && size >= 2 && rank >= 0 && rank < size && es > 0 &&
           !__builtin_mul_overflow(count, es, &bytes) && llrdma_ar_supported(dtype, op);
}
} // namespace

extern "C" int llrdma_ar_shm_direct_host(const llrdma_ar_plan_t *plan, llrdma_ar_shm_t *shm,
                                         int rank, int size, const void *sendbuf, void *recvbuf,
                                         size_t count, int dtype, int op)
{
    using namespace llrdma::ar;
    if (count == 0)
        return LLRDMA_AR_OK;
    const size_t es = dtype_size(dtype);
    if (!plan || plan->alg != LLRDMA_AR_SHM_DIRECT ||
        !host_args_ok(shm, rank, size, recvbuf, count, es, dtype, op))
        return LLRDMA_AR_ERR_INVALID;
    if (lines_fit(shm, size, count * es))
        return lines_call(shm, rank, size, sendbuf, recvbuf, count, es,
                          reduce_kernel(op, dtype)); // host_args_ok checked the pair
    if (shm->chunk_bytes == 0) // an arena the set-up sized (llrdma_ar_shm_bytes) has a chunk
        return LLRDMA_AR_ERR_INVALID;
    // One round (shm_round_elems: the chunk, or the plan's smaller segment).
    const size_t bytes = count * es, seg = plan->segment_bytes;
    if (bytes <= shm->chunk_bytes && (seg == 0 || bytes <= seg))
        return slots_call(shm, rank, size, sendbuf ? sendbuf : recvbuf, recvbuf, count, es, dtype,
                          op);
    // No message, hook or scratch: a transport of the arena alone.
    llrdma_ar_comm_t c{};
    c.rank = rank;
    c.size = size;
    c.shm = shm;
    Transport t(&c);
    const void *in = sendbuf == recvbuf ? nullptr : sendbuf;
    Args a{&t, recvbuf, count, dtype, op, es, nullptr, 0, plan, in, shm, nullptr};
    return run_shm_direct(a);
}

extern "C" int llrdma_ar_lines_prepare(const llrdma_ar_plan_t *plan, const llrdma_ar_shm_t *shm,
                                       int rank, int size, size_t count, int dtype, int op,
                                       llrdma_ar_lines_call_t *c)
{
    using namespace llrdma::ar;
    if (!c)
        return 0;
    *c = llrdma_ar_lines_call_t{};
    const size_t es = dtype_size(dtype);
    // llrdma_ar_shm_direct_host's own tests, in its order (recvbuf is the
    // run's: any non-null pointer stands for it here).
    if (count == 0 || !plan || plan->alg != LLRDMA_AR_SHM_DIRECT ||
        !host_args_ok(shm, rank, size, c, count, es, dtype, op) ||
        !lines_fit(shm, size, count * es))
        return 0;
    c->fold = reduce_kernel(op, dtype);
    c->count = count;
    c->esize = es;
    c->rank = rank;
    c->size = size;
    return 1;
}

extern "C" int llrdma_ar_lines_run(const llrdma_ar_lines_call_t *c, llrdma_ar_shm_t *shm,
                                   const void *sendbuf, void *recvbuf)
{
    if (!c || !c->fold || !shm || !shm->base || !recvbuf)
        return LLRDMA_AR_ERR_INVALID;
    return lines_call(shm, c->rank, c->size, sendbuf, recvbuf, c->count, c->esize, c->fold);
}
