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
    return split_len_max(per, static_cast<size_t>(size), esize) * esize;
}

namespace
{

// Whether this call's host copies out stream (llrdma_ar_shm_t.stream_min).
bool streams(const Args &a)
{
    return a.shm->stream_min > 0 && a.count * a.esize >= a.shm->stream_min;
}

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

// A shared round's slice: elements [s, s + len) of the round, cut into k
// tiles of about kShareTileBytes (tile j: [start(j), start(j + 1))).
constexpr size_t kShareTileBytes = 16384;
struct Slice {
    size_t s, len;
    unsigned k;
    size_t start(unsigned j) const { return s + len * j / k; }
};

Slice slice_of(size_t n, int p, int q, size_t es)
{
    Slice x{split_start(n, p, q, es), split_len(n, p, q, es), 0};
    size_t k = (x.len * es + kShareTileBytes - 1) / kShareTileBytes;
    if (k > Arena::kShareTilesMax)
        k = Arena::kShareTilesMax;
    x.k = static_cast<unsigned>(k < x.len ? k : x.len);
    return x;
}

// One shared round (llrdma_ar_shm_t.share_min): copy in slice by slice,
// each announced; fold tiles of the slices every rank has copied in, this
// rank's own first (from the front, straight into its output too), others'
// from the back; then copy out every slice once all its tiles are done.
// The result is the same bits as the unshared round's: every tile is
// folded in rank order by fold_rank_order, whoever folds it.  The progress
// word counts g * (p + 1) + slices copied, so it only grows.
int shared_round(const Args &a, Arena &ar, uint64_t g, size_t off, size_t n,
                 const unsigned char *src)
{
    Transport &t = *a.t;
    const int p = t.size(), me = t.rank();
    const size_t es = a.esize;
    const uint64_t base = g * (static_cast<uint64_t>(p) + 1);
    unsigned char *slot = ar.slot(g, me);
    // With copy hooks (device buffers) the input goes in by one stream copy
    // and a sync (which also covers the last round's copy out), announced
    // whole: the others' rounds are the same either way, so ranks with
    // device and host buffers share one round.
    const bool hooked = t.hooked();
    if (hooked) {
        int rc = t.copy(slot, src + off * es, n * es);
        if (rc == LLRDMA_AR_OK)
            rc = t.sync();
        if (rc != LLRDMA_AR_OK)
            return rc;
        ar.post_progress(base + static_cast<uint64_t>(p));
    } else {
        for (int q = 0; q < p; ++q) {
            const size_t s = split_start(n, p, q, es), len = split_len(n, p, q, es);
            if (len > 0)
                std::memcpy(slot + s * es, src + (off + s) * es, len * es);
            ar.post_progress(base + static_cast<uint64_t>(q) + 1);
        }
    }
    ar.post_in(g); // round numbers for whoever reads the in flag (placement)
    ar.lap(LLRDMA_AR_PHASE_COPY_IN);

    auto fold = [&](int q, const Slice &x, unsigned j, bool own) {
        const size_t ts = x.start(j), tl = x.start(j + 1) - ts;
        // The CPU folds from the arena (pinned or not: host memory); only
        // a host rank writes its own tiles straight into its output.
        shm_fold_slots(a, ar, g, ts, tl, at(ar.result(g), ts, es), nullptr,
                       own && !hooked ? at(a.buf, off + ts, es) : nullptr);
        if (a.shm->on_tile)
            a.shm->on_tile(a.shm->on_tile_ctx, me);
        ar.tile_done(q);
    };
    const Slice mine = slice_of(n, p, me, es);
    // Tiles [0, own) of this rank's slice: folded here, so (host buffers)
    // already in the output; read only by the host copy out.
    unsigned own = 0;
    bool own_left = mine.k > 0;
    int ready = 0, lag = me;
    llrdma_ar_wait_t ws{};
    uint64_t next_check = 0;
    for (;;) {
        if (ready < p)
            ready = ar.ready_slices(base, &lag);
        if (own_left && me < ready) {
            long j = ar.claim(me, g, mine.k, true);
            if (j >= 0) {
                fold(me, mine, static_cast<unsigned>(j), true);
                ++own;
                continue;
            }
            own_left = false;
        }
        bool stole = false;
        for (int k = 1; k < p && !stole; ++k) {
            const int q = (me + k) % p;
            if (q >= ready)
                continue;
            const Slice x = slice_of(n, p, q, es);
            long j = x.k > 0 ? ar.claim(q, g, x.k, false) : -1;
            if (j >= 0) {
                fold(q, x, static_cast<unsigned>(j), false);
                ++a.shm->share_stolen;
                stole = true;
            }
        }
        if (stole)
            continue;
        if (ready == p && !own_left)
            break; // every tile claimed: copy out as they finish
        int rc = ar.pause(lag, ws, next_check);
        if (rc != LLRDMA_AR_OK)
            return rc;
    }
    ar.lap(LLRDMA_AR_PHASE_FOLD);
    int rc = LLRDMA_AR_OK;
    if (hooked) {
        // Every slice done, then one stream copy of the chunk, synced by the
        // next round's copy in or the caller (result(g) is rewritten only in
        // round g + 2, after every rank announced round g + 1's input).
        for (int k = 0; k < p && rc == LLRDMA_AR_OK; ++k) {
            const Slice x = slice_of(n, p, k, es);
            if (x.k > 0)
                rc = ar.wait_slice(k, g, x.k);
        }
        ar.lap(LLRDMA_AR_PHASE_WAIT_RED);
        if (rc == LLRDMA_AR_OK)
            rc = t.copy(at(a.buf, off, es), ar.result(g), n * es);
        ar.lap(LLRDMA_AR_PHASE_COPY_OUT);
        return rc;
    }
    // Out, up to four slices at a time (copy_n), this rank's first (only
    // its tiles that others folded).
    const bool stream = streams(a);
    for (int k = 0; k < p && rc == LLRDMA_AR_OK;) {
        void *dst[4];
        const void *from[4];
        size_t len[4];
        int m = 0;
        for (; m < 4 && k < p && rc == LLRDMA_AR_OK; ++k) {
            const int q = (me + k) % p;
            const Slice x = q == me ? mine : slice_of(n, p, q, es);
            if (x.k == 0)
                continue;
            const size_t from_el = q == me ? x.start(own) : x.s, end = x.s + x.len;
            if (from_el == end)
                continue;
            rc = ar.wait_slice(q, g, x.k);
            dst[m] = at(a.buf, off + from_el, es);
            from[m] = at(ar.result(g), from_el, es);
            len[m++] = (end - from_el) * es;
        }
        ar.lap(LLRDMA_AR_PHASE_WAIT_RED);
        if (rc == LLRDMA_AR_OK)
            rc = t.copy_n(m, dst, from, len, stream);
        ar.lap(LLRDMA_AR_PHASE_COPY_OUT);
    }
    if (stream)
        ++a.shm->stream_outs;
    return rc;
}

} // namespace

// Whether a call shares its folds: its first round (the largest) holds at
// least share_min bytes; the same on every rank.
static bool shares(const Args &a)
{
    // Not by whether this rank has copy hooks: in one call some ranks may
    // hold device buffers and others host ones, and all must take the same
    // rounds.
    if (a.shm->share_min == 0 || a.t->size() < 2)
        return false;
    const size_t per = shm_round_elems(a), first = a.count < per ? a.count : per;
    return first * a.esize >= a.shm->share_min;
}

// This host rank's slice [s, s + len) of round g (offset off in the call):
// the own block straight from the input (ShmInput left it out of the slot)
// and straight into the output, 2/p of the vector's bytes not copied
// through the arena.  Each tile is folded into the output, in this core's
// cache, and then copied whole into the shared result: the fold's stores
// to result lines that the other ranks read last time (each a read for
// ownership from their caches) had stalled it; one copy of a finished
// tile takes them in bulk (2 ranks, 2-core machine: 32 KB 7.5-7.9 ->
// 6.2-6.8 us, 16 KB 4.4-4.6 -> 3.6-4.0; docs/allreduce.md).  In place,
// the output is this rank's input: folding into it is only right where
// the first pass reads this rank's input (ranks 0 and 1; 0-3 where fold4
// takes four inputs per pass); other ranks fold into the result and copy
// each tile out, as before.
static void fold_own_host(const Args &a, const Arena &ar, uint64_t g, size_t off, size_t s,
                          size_t len, const void *src)
{
    const int first_pass = fold_first_pass(a.op, a.dtype, a.t->size());
    void *mine_out = at(a.buf, off + s, a.esize), *res = at(ar.result(g), s, a.esize);
    const void *mine_in = at(const_cast<void *>(src), off + s, a.esize);
    if (src != a.buf || a.t->rank() < first_pass)
        shm_fold_slots(a, ar, g, s, len, mine_out, mine_in, res);
    else
        shm_fold_slots(a, ar, g, s, len, res, mine_in, mine_out);
}

int run_shm_split(const Args &a)
{
    Transport &t = *a.t;
    Arena ar(a.shm, t.rank(), t.size());
    if (shares(a)) {
        if (ar.broken())
            return LLRDMA_AR_ERR_TRANSPORT;
        auto src = static_cast<const unsigned char *>(a.sendbuf ? a.sendbuf : a.buf);
        const size_t per = shm_round_elems(a);
        for (size_t off = 0; off < a.count; off += per) {
            const size_t n = a.count - off < per ? a.count - off : per;
            const uint64_t g = ar.next_round();
            ar.phase_start();
            int rc = shared_round(a, ar, g, off, n, src);
            if (rc != LLRDMA_AR_OK)
                return ar.fail(rc);
            ++a.shm->share_rounds;
        }
        return LLRDMA_AR_OK;
    }
    const bool device = t.hooked() && a.shm->device_fold;
    if (device && a.scratch_bytes < scratch_shm_split(a.plan, a.count, a.esize, t.size()))
        return ar.fail(LLRDMA_AR_ERR_INVALID);
    const void *src = a.sendbuf ? a.sendbuf : a.buf;
    return shm_rounds(
        a, ar,
        [&](uint64_t g, size_t off, size_t n) {
            size_t s = split_start(n, t.size(), t.rank(), a.esize),
                   len = split_len(n, t.size(), t.rank(), a.esize);
            int rc = LLRDMA_AR_OK;
            if (len > 0 && device && len * a.esize >= a.shm->device_fold_min)
                rc = fold_on_device(a, ar, g, s, len);
            else if (len > 0 && !t.hooked())
                fold_own_host(a, ar, g, off, s, len, src);
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
            const bool stream = streams(a);
            for (int k = 1; k < t.size() && rc == LLRDMA_AR_OK;) {
                void *dst[4];
                const void *from[4];
                size_t len[4];
                int m = 0;
                for (; m < 4 && k < t.size() && rc == LLRDMA_AR_OK; ++k) {
                    int q = (t.rank() + k) % t.size();
                    size_t qs = split_start(n, t.size(), q, a.esize),
                           ql = split_len(n, t.size(), q, a.esize);
                    // An empty slice (fewer lines than ranks) has nothing
                    // to wait for: its red flag is another line to fetch.
                    if (ql == 0)
                        continue;
                    rc = ar.wait_red_of(q, g);
                    dst[m] = at(a.buf, off + qs, a.esize);
                    from[m] = at(ar.result(g), qs, a.esize);
                    len[m++] = ql * a.esize;
                }
                ar.lap(LLRDMA_AR_PHASE_WAIT_RED);
                if (rc == LLRDMA_AR_OK)
                    rc = t.copy_n(m, dst, from, len, stream);
                ar.lap(LLRDMA_AR_PHASE_COPY_OUT);
            }
            if (stream)
                ++a.shm->stream_outs;
            return rc;
        },
        true);
}

} // namespace ar
} // namespace llrdma
