// internal.h -- shared pieces of the Allreduce algorithms (C++ only, not installed).
#ifndef LLRDMA_ALLREDUCE_INTERNAL_H
#define LLRDMA_ALLREDUCE_INTERNAL_H

#include "llrdma_allreduce.h"

#include <cstddef>
#include <cstdint>

namespace llrdma
{
namespace ar
{

// Tags per algorithm step.  Distinct for readability of traces; correctness does
// not depend on them (see the pairwise-order rule in llrdma_allreduce.h).
enum Tag : int {
    kTagRdFold = 1,
    kTagRdExchange = 2,
    kTagRdUnfold = 3,
    kTagRabFold = 8,
    kTagRabHalving = 9,
    kTagRabDoubling = 10,
    kTagRabUnfold = 11,
    kTagRingReduce = 16,
    kTagRingGather = 17,
};

// out[i] = a[i] OP b[i]; out may alias a or b.  `a` is the left operand.
// Returns false for an unsupported pair.
bool reduce3(int op, int dtype, const void *a, const void *b, void *out, size_t count);
// reduce3's kernel for the pair (nullptr: unsupported), for callers that look
// it up once and fold many times.
using ReduceFn = void (*)(const void *a, const void *b, void *out, size_t count);
ReduceFn reduce_kernel(int op, int dtype);
// Four inputs folded in one pass into out (reduce_ops.cc, fold4): start ?
// s0 OP s1 OP s2 OP s3 : out OP s0 OP s1 OP s2 OP s3, left to right.  nullptr
// where reduce3 has no kernel either.
using Fold4Fn = void (*)(const void *const *s, void *out, size_t n, int start);
Fold4Fn fold4_kernel(int op, int dtype);
size_t dtype_size(int dtype); // 0 for an unknown dtype

// Element range of block i when `count` elements are split into `nblocks`
// blocks: the first count % nblocks blocks hold one element more.
inline size_t block_start(size_t count, size_t nblocks, size_t i)
{
    size_t q = count / nblocks, r = count % nblocks;
    return i * q + (i < r ? i : r);
}
inline size_t block_len(size_t count, size_t nblocks, size_t i)
{
    return count / nblocks + (i < count % nblocks ? 1 : 0);
}

// shm_split's slice q of a round of n elements over p ranks: block_start /
// block_len over whole 64-byte lines where the element size divides 64, so
// no two ranks write one line of the shared result (at 512 bytes on 16
// ranks, 32-byte slices put two ranks' results in every line; now 8 ranks
// fold a line each and 8 fold nothing).  Elements of other sizes: per element.
inline size_t split_grain(size_t es)
{
    return es > 0 && es <= 64 && 64 % es == 0 ? 64 / es : 1;
}
inline size_t split_start(size_t n, size_t p, size_t q, size_t es)
{
    const size_t g = split_grain(es), s = g * block_start((n + g - 1) / g, p, q);
    return s < n ? s : n;
}
inline size_t split_len(size_t n, size_t p, size_t q, size_t es)
{
    return split_start(n, p, q + 1, es) - split_start(n, p, q, es);
}
// The longest slice split_start gives.
inline size_t split_len_max(size_t n, size_t p, size_t es)
{
    const size_t g = split_grain(es), units = (n + g - 1) / g;
    return g * ((units + p - 1) / p);
}

// Largest power of two <= n (n >= 1).
inline int pow2_floor(int n)
{
    int p = 1;
    while (p <= n / 2)
        p *= 2;
    return p;
}

// Non-power-of-two fold shared by recursive doubling and Rabenseifner: with
// p2 = pow2_floor(size) and rem = size - p2, ranks 2i and 2i+1 (i < rem) pair up;
// the even one hands its vector to the odd one and sits out.
struct Fold {
    int p2 = 1, rem = 0;
    int newrank = -1; // -1: sits out
    explicit Fold(int rank, int size)
    {
        p2 = pow2_floor(size);
        rem = size - p2;
        if (rank < 2 * rem)
            newrank = (rank % 2) ? rank / 2 : -1;
        else
            newrank = rank - rem;
    }
    int real_rank(int nr) const { return nr < rem ? 2 * nr + 1 : nr + rem; }
};

// Tracks the requests of one call.  After the first error every later call
// fails fast, and the destructor (or drain()) cancels and waits whatever is still
// outstanding, so no request outlives the buffers it points into.
class Transport
{
  public:
    static constexpr int kMaxLive = 64;

    explicit Transport(const llrdma_ar_comm_t *c) : c_(c) {}
    ~Transport() { drain(); }
    Transport(const Transport &) = delete;
    Transport &operator=(const Transport &) = delete;

    int rank() const { return c_->rank; }
    int size() const { return c_->size; }
    const llrdma_ar_comm_t *comm() const { return c_; }

    // *req = nullptr for zero bytes (nothing sent); wait() accepts that.
    int isend(const void *buf, size_t bytes, int peer, int tag, void **req);
    int irecv(void *buf, size_t bytes, int peer, int tag, void **req);
    // Waits the given requests (nullptrs skipped) and sets them to nullptr.
    int wait(int n, void **reqs);
    int wait(void **req) { return wait(1, req); }
    // Send and receive with one peer, then wait both.
    int sendrecv(const void *sbuf, size_t sbytes, void *rbuf, size_t rbytes, int peer, int tag);
    // Blocking single transfers.
    int send(const void *buf, size_t bytes, int peer, int tag)
    {
        void *r;
        int rc = isend(buf, bytes, peer, tag, &r);
        return rc != LLRDMA_AR_OK ? rc : wait(&r);
    }
    int recv(void *buf, size_t bytes, int peer, int tag)
    {
        void *r;
        int rc = irecv(buf, bytes, peer, tag, &r);
        return rc != LLRDMA_AR_OK ? rc : wait(&r);
    }
    // Local data movement: through the comm's hooks when set (device memory),
    // else memcpy / reduce3.  reduce: out = a OP b, out may alias a or b.
    int copy(void *dst, const void *src, size_t bytes);
    // k copies at once (host memory: interleaved, for the arena's copy out).
    // stream (host memory, k <= 4): by non-temporal stores.
    int copy_n(int k, void *const *dst, const void *const *src, const size_t *bytes,
               bool stream = false);
    int reduce(int op, int dtype, const void *a, const void *b, void *out, size_t count);
    // True when copy/reduce go through hooks (buffers the core may not touch).
    bool hooked() const { return c_->copy != nullptr; }
    // Waits until every hook call so far took effect (no-op without a sync hook).
    int sync();
    // Cancels and waits everything outstanding; returns the sticky error.
    int drain();
    int error() const { return err_; }
    // The message algorithms carry a failure in their own messages when the
    // comm reports received sizes (llrdma_ar_comm_t.waitall_sizes): after a
    // local failure (a hook) this rank goes on with the schedule, touching
    // no buffer (copies and reductions skipped) and sending every message
    // with 0 bytes; a receive that gets 0 bytes where it expected data
    // means the sender failed, and this rank carries on the same way.  So
    // every rank whose result needs the failed data fails the call, and no
    // message of the call is left over to be matched by the next one.  The
    // ops then return LLRDMA_AR_OK and error() (or drain()) says the call
    // failed.  Without waitall_sizes, or for the arena's algorithms (their
    // failures travel in the arena), a failure cancels everything at once.
    void carry(bool on) { carry_ = on && c_->waitall_sizes != nullptr; }
    bool carrying() const { return carry_; }
    // A failure before the call (llrdma_ar_comm_t.failed), carried.
    void failed_before(int rc) { (void)local(rc); }

  private:
    int fail(int rc);
    int local(int rc); // a local failure: carried, or fail()
    void track(void *req, size_t expect);
    size_t untrack(void *req);

    static constexpr size_t kSend = static_cast<size_t>(-1);
    const llrdma_ar_comm_t *c_;
    void *live_[kMaxLive];    // [0, nlive_) only: not zeroed per call (64 words)
    size_t expect_[kMaxLive]; // a receive's bytes, kSend for a send (set by track)
    int nlive_ = 0;
    int err_ = LLRDMA_AR_OK;
    bool fatal_ = false;    // nothing more may be posted (drained)
    bool carry_ = false;    // see carry()
    bool poisoned_ = false; // carrying a failure: 0-byte sends, no local work
};

// Arguments common to all algorithms.  recvbuf already holds this rank's input.
struct Args {
    Transport *t;
    void *buf;    // recvbuf, in place
    size_t count; // elements, > 0
    int dtype, op;
    size_t esize;  // element size
    void *scratch; // at least scratch_bytes() of this algorithm
    size_t scratch_bytes;
    const llrdma_ar_plan_t *plan;
    // The shm_* algorithms only: the caller's sendbuf (nullptr: in place) and
    // the arena.  They read the input from sendbuf themselves, so llrdma_ar_run
    // skips its sendbuf -> recvbuf copy for them.
    const void *sendbuf;
    llrdma_ar_shm_t *shm;
    // LLRDMA_AR_HIER only: this rank's place in the node layout (it also
    // reads sendbuf itself).
    const llrdma_ar_hier_t *hier;
};

// The shared arena of the shm_* algorithms (shm_arena.cc): layout, flags and
// the waits.  A rank announces "my input of round g is in my slot" (in flag)
// and, for shm_split, "my slice of round g is reduced" (red flag).  Slots and
// results alternate between two generations, which makes one wait per flag
// enough: a rank posts round g+1 only after finishing round g, so once every
// rank has posted round g, nobody still reads what round g+1 overwrites
// (the buffers of round g-1).
class Arena
{
  public:
    Arena(llrdma_ar_shm_t *s, int rank, int size);
    // In line: a small call takes each several times (2 ranks, 1 KB: about
    // 40 instructions a call as calls into shm_arena.cc).
    unsigned char *slot(uint64_t g, int r) const
    {
        return slots_ +
               (static_cast<size_t>(g % 2) * static_cast<size_t>(size_) + static_cast<size_t>(r)) *
                   chunk_;
    }
    unsigned char *result(uint64_t g) const
    {
        return slots_ + (2 * static_cast<size_t>(size_) + static_cast<size_t>(g % 2)) * chunk_;
    }
    unsigned char *own(uint64_t g) const // this rank's private chunk
    {
        return slots_ + (2 * static_cast<size_t>(size_) + 2 +
                         static_cast<size_t>(g % 2) * static_cast<size_t>(size_) +
                         static_cast<size_t>(rank_)) *
                            chunk_;
    }
    static constexpr size_t kFlagsPerRank = 3 * 64; // in, red, info: a line each
    void post_in(uint64_t g) { post(0, g); }
    void post_red(uint64_t g) { post(1, g); }
    // LLRDMA_AR_OK once every other rank posted round g, LLRDMA_AR_ERR_TRANSPORT
    // when a rank failed instead.
    int wait_in(uint64_t g) { return wait(0, g); }
    int wait_red(uint64_t g) { return wait(1, g); }
    // Rank r only: its red flag reached g (a per-rank ready counter).
    int wait_red_of(int r, uint64_t g)
    {
        llrdma_ar_wait_t ws{};
        return wait_one(1, g, r, ws);
    }
    // Vectors of at most lines_max (<= kLinesMax) bytes (shm_direct): the
    // data travels in 64-byte lines whose last word is the round number, two
    // generations per rank.  A reader polls the lines themselves, so one
    // cache-line transfer brings both data and flag; a separate flag costs a
    // second, serial one (2 ranks of the 2-core VM: 64 B took about 0.25 us
    // that way, docs/benchmarks-h200.md).  A line is written payload first,
    // word 7 last (release), read after word 7 (acquire): no line is ever
    // seen half written.  The same two-generation rule as the slots.
    static constexpr size_t kLinePayload = 56;
    static constexpr size_t kLinesMax = LLRDMA_AR_SHM_LINES_MAX;
    // wait_lines polls every line's word of vectors of at most this many lines.
    static constexpr size_t kPollAllLines = 5;
    static constexpr size_t kLinesPerGen = (kLinesMax + kLinePayload - 1) / kLinePayload;
    // What read_lines may write: every line's whole payload.
    static constexpr size_t kLinesBuf = kLinesPerGen * kLinePayload;
    int rank() const { return rank_; }
    // Copies bytes (<= kLinesMax) of src into this rank's lines of round g.
    void post_lines(uint64_t g, const void *src, size_t bytes);
    // LLRDMA_AR_OK once every other rank's lines of round g are written.
    int wait_lines(uint64_t g, size_t bytes);
    // Rank r's bytes of round g into dst (contiguous), in whole lines' payloads:
    // dst must hold kLinesBuf bytes (what follows `bytes` is stale).
    void read_lines(uint64_t g, int r, void *dst, size_t bytes) const;
    // Rank r's data of round g where a vector of at most kLinePayload bytes
    // lies whole, to be read in place (after wait_lines; it stays until this
    // rank posts round g + 1, so until it is done with round g).
    const unsigned char *line_data(uint64_t g, int r) const { return lines(g, r); }
    // The placement word (word 1 of this rank's in-flag line): call number
    // and a small code (0..3), read by the others without a round, so that
    // a rank that knows its outcome alone need not wait for anyone
    // (llrdma_peer_run).  Stamps only grow.
    void post_place(uint64_t call, unsigned code);
    // LLRDMA_AR_OK once every other rank placed `call`: codes[r] (0..3) for
    // each rank (its own: 0, the caller's code).  LLRDMA_PEER_ERR_SYNC, *who set, when a
    // rank placed a later call or posted a round this rank has not started
    // (it is not in this step: the ranks disagree); the arena's errors as
    // wait_in.
    int wait_place(uint64_t call, unsigned *codes, int *who);
    // Shared folds (shm_split, llrdma_ar_shm_t.share_min): the slices' tiles
    // go to whichever rank claims them.  Copy-in progress: this rank's word
    // (monotonic; shm_split encodes round and slices copied in it).
    void post_progress(uint64_t v);
    // How many slices, from the first, every other rank has copied in, its
    // progress word read against base (0..size); *lag: the rank furthest
    // behind.
    int ready_slices(uint64_t base, int *lag) const;
    // A tile of slice q of round g (tiles in it, <= kShareTilesMax), from
    // the front (its owner) or the back (the others): its index, or -1 when
    // none is left.
    static constexpr unsigned kShareTilesMax = 255;
    long claim(int q, uint64_t g, unsigned tiles, bool front);
    // One more tile of slice q is in the result (after its fold's writes).
    void tile_done(int q);
    // LLRDMA_AR_OK once all `tiles` tiles of slice q of round g are done;
    // the arena's errors as wait_in (liveness asked of every rank).
    int wait_slice(int q, uint64_t g, unsigned tiles);
    // One idle step of a wait on rank r (< 0: any rank), as the arena's own
    // waits take it: LLRDMA_AR_OK to keep waiting.
    int pause(int r, llrdma_ar_wait_t &w, uint64_t &next_check) { return idle(r, w, next_check); }
    // Marks the arena broken (every rank's waits end) and returns rc.
    int fail(int rc);
    // The recorded failure as it concerns this rank's call (s_->call):
    // LLRDMA_AR_OK while there is none, and for one recorded in a later
    // call.  Its rank finished this call, and every wait of a call is on
    // every other rank, so all this call waits for is posted; a waiter that
    // read a flag just before its post and the record just after must not
    // fail this call for it (docs/allreduce.md, "Failures").
    int failure() const;
    bool broken() const; // failure() != LLRDMA_AR_OK
    uint64_t next_round() { return ++s_->gen; }
    size_t chunk() const { return s_->chunk_bytes; }
    // Phase timing (llrdma_ar_shm_t.time_phases): start() at a round's
    // beginning, lap(phase) at the end of each phase adds the time since the
    // last mark to it.  Nothing while timing is off.
    void phase_start()
    {
        if (s_->time_phases)
            phase_start_timed();
    }
    void lap(llrdma_ar_phase_t phase)
    {
        if (s_->time_phases)
            lap_timed(phase);
    }

  private:
    void phase_start_timed();
    void lap_timed(llrdma_ar_phase_t phase);
    uint64_t *flag(int r, int which) const
    {
        return reinterpret_cast<uint64_t *>(base_ + static_cast<size_t>(r) * kFlagsPerRank +
                                            static_cast<size_t>(which) * 64);
    }
    // In line for the same reason as slot(); the lines end where the slots
    // begin (the layout: shm_arena.cc), so no member of its own.
    unsigned char *lines(uint64_t g, int r) const
    {
        return slots_ - (static_cast<size_t>(size_ - r) * 2 - static_cast<size_t>(g % 2)) *
                            kLinesPerGen * 64;
    }
    void post(int which, uint64_t g);
    int wait(int which, uint64_t g);
    // ws: the wait's state, shared by every rank a wait goes through, so
    // the policy's spin and sleep budgets count the whole wait.
    int wait_one(int which, uint64_t g, int r, llrdma_ar_wait_t &ws);
    // Between polls of rank r (< 0: any rank): the abort word, progress,
    // liveness.  LLRDMA_AR_OK to keep waiting.
    int idle(int r, llrdma_ar_wait_t &w, uint64_t &next_check);
    uint64_t *share_word(int q) const;

    llrdma_ar_shm_t *s_;
    unsigned char *base_;
    unsigned char *slots_; // base_ + the slots' offset (the layout: shm_arena.cc)
    size_t chunk_;
    int rank_, size_;
    uint64_t mark_ns_ = 0;
};

// The largest vector in the lines on an arena of `size` ranks.  From three
// ranks only vectors whose every line's word a reader polls (kPollAllLines):
// otherwise a reader polls each other rank's last line and then misses on
// its other lines one rank after the other, which on 8 ranks of the device
// machine made 512 B (ten lines) 1.2-1.6x slower than the slots; on 2 ranks
// the lines won up to 2 KB (docs/allreduce.md).
inline size_t lines_limit(size_t lines_max, int size)
{
    size_t m = lines_max < Arena::kLinesMax ? lines_max : Arena::kLinesMax;
    const size_t polled = Arena::kPollAllLines * Arena::kLinePayload;
    return size > 2 && m > polled ? polled : m;
}
// llrdma_ar_lines_fit, in line for the calls' hot path.
inline bool lines_fit(const llrdma_ar_shm_t *shm, int size, size_t bytes)
{
    return shm && shm->base && size >= 2 && bytes <= lines_limit(shm->lines_max, size) &&
           bytes <= shm->chunk_bytes;
}

// Non-power-of-two fold (recursive_doubling.cc): fold_in leaves the odd rank of
// each pair holding v[2i] OP v[2i+1]; fold_out copies the final vector back to
// the even rank.  Scratch: one full vector.
int fold_in(const Args &a, const Fold &f, int tag);
int fold_out(const Args &a, const Fold &f, int tag);

int run_recursive_doubling(const Args &a);
int run_rabenseifner(const Args &a);
int run_ring(const Args &a);
int run_shm_direct(const Args &a);
int run_shm_split(const Args &a);
int run_hier(const Args &a);
// The inter-node step's plan of a LLRDMA_AR_HIER plan (alg = inter_alg).
llrdma_ar_plan_t hier_inner_plan(const llrdma_ar_plan_t *plan);
size_t scratch_hier(const llrdma_ar_plan_t *plan, size_t count, size_t esize);
// Elements per shm round: the plan's segment, at most the arena's chunk.
size_t shm_round_elems(const Args &a);
// The input side of every shm round (shm_arena.cc): copy this rank's input
// elements into its slot, announce them, wait for every rank's.  With hooks
// the copy of the next round is enqueued as soon as this round's slots are
// safe to overwrite, so it overlaps this round's reduction.
class ShmInput
{
  public:
    // skip_own: this rank's own block of each round (block_start/block_len
    // of the round over the ranks) stays out of its slot, on host buffers:
    // shm_split's folder of that block reads it from the input itself, and
    // nobody else reads it.
    ShmInput(const Args &a, Arena &ar, bool skip_own) : a_(a), ar_(ar), skip_own_(skip_own) {}
    // Round g covers elements [off, off + n); `next` elements follow in round
    // g + 1 (0: last round).  Returns LLRDMA_AR_OK or an error (arena broken).
    int round(uint64_t g, size_t off, size_t n, size_t next);

  private:
    const Args &a_;
    Arena &ar_;
    bool skip_own_;
    bool prefetched_ = false;
};
size_t scratch_shm_split(const llrdma_ar_plan_t *plan, size_t count, size_t esize, int size);

// The round loop both shm algorithms share: cuts the vector into rounds of
// shm_round_elems(), runs the input side of each, then body(g, off, n) for
// what follows it; stops at the first error (the arena is then broken).
template <typename Body> int shm_rounds(const Args &a, Arena &ar, Body body, bool skip_own = false)
{
    if (ar.broken())
        return LLRDMA_AR_ERR_TRANSPORT;
    ShmInput in(a, ar, skip_own);
    const size_t per = shm_round_elems(a);
    for (size_t off = 0; off < a.count; off += per) {
        size_t n = a.count - off < per ? a.count - off : per;
        size_t rest = a.count - off - n;
        uint64_t g = ar.next_round();
        ar.phase_start();
        int rc = in.round(g, off, n, rest < per ? rest : per);
        if (rc == LLRDMA_AR_OK)
            rc = body(g, off, n);
        if (rc != LLRDMA_AR_OK)
            return ar.fail(rc);
    }
    return LLRDMA_AR_OK;
}
// The fold's tile: a tile of out stays in L1 while every input's is folded in.
constexpr size_t kFoldTileBytes = 4096;
// fold_rank_order's four-input kernel: from four ranks on (null: two inputs
// a pass).
inline Fold4Fn fold4_for(int op, int dtype, int p)
{
    return p >= 4 ? fold4_kernel(op, dtype) : nullptr;
}
// How many inputs fold_rank_order's first pass over a tile reads (ranks 0 to
// this - 1) before it writes out's tile; any of them may be out itself.
inline int fold_first_pass(int op, int dtype, int p)
{
    return fold4_for(op, dtype, p) ? 4 : 2;
}
// The arena's fold, the one place its order is written: out = v0 OP v1 OP
// ... OP v(p-1) in rank order, tile by tile; src(r, i) is rank r's input at
// element i, done(i, o, m) gets each finished piece of out (m elements at
// o) while it is in L1.  Every path through the arena folds with it, which
// is what makes them agree bit for bit.
template <typename Src, typename Done>
inline void fold_rank_order(int op, int dtype, size_t es, int p, size_t n, unsigned char *out,
                            Src src, Done done)
{
    // One tile without a division for the small vectors of the hot path.
    const size_t tile = n * es <= kFoldTileBytes  ? n
                        : kFoldTileBytes / es > 0 ? kFoldTileBytes / es
                                                  : 1;
    // From four ranks on, four inputs per pass (fold4): the same bits.
    Fold4Fn f4 = fold4_for(op, dtype, p);
    for (size_t i = 0; i < n; i += tile) {
        const size_t m = n - i < tile ? n - i : tile;
        unsigned char *o = out + i * es;
        int r = 2;
        if (f4) {
            const void *s4[4] = {src(0, i), src(1, i), src(2, i), src(3, i)};
            f4(s4, o, m, 1);
            for (r = 4; r + 4 <= p; r += 4) {
                const void *t4[4] = {src(r, i), src(r + 1, i), src(r + 2, i), src(r + 3, i)};
                f4(t4, o, m, 0);
            }
        } else {
            reduce3(op, dtype, src(0, i), src(1, i), o, m);
        }
        for (; r < p; ++r)
            reduce3(op, dtype, o, src(r, i), o, m);
        done(i, o, m);
    }
}
// out = v0 OP v1 OP ... OP v(p-1), elements [s, s + n) of the slots of round g.
// mine (optional): this rank's input for those elements, read instead of its
// slot; also (optional): a second place each finished piece of out is
// written to while it is still in L1.
void shm_fold_slots(const Args &a, const Arena &ar, uint64_t g, size_t s, size_t n, void *out,
                    const void *mine = nullptr, void *also = nullptr);

size_t scratch_recursive_doubling(size_t count, size_t esize, int size);
size_t scratch_rabenseifner(size_t count, size_t esize, int size);
size_t scratch_ring(const llrdma_ar_plan_t *plan, size_t count, size_t esize, int size);

// Ring window actually used: the plan's, bounded by Transport::kMaxLive.
int ring_window(const llrdma_ar_plan_t *plan);

inline unsigned char *at(void *base, size_t elem, size_t esize)
{
    return static_cast<unsigned char *>(base) + elem * esize;
}

} // namespace ar
} // namespace llrdma

#endif
