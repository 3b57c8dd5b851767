// shm_arena.cc -- the shared arena of the shm_* algorithms: layout and flags.
//
// Layout (offsets from base, every part 64-byte aligned):
//   flags   size x 192 B   rank r: in flag at r*192 (its placement word at
//                          r*192 + 8, its copy-in progress at r*192 + 16),
//                          red flag at r*192 + 64 (the claim word of its
//                          slice in a shared fold at r*192 + 72),
//                          the caller's info line at r*192 + 128 (own cache
//                          lines: a poller never shares a line with another
//                          rank's writes)
//   abort   64 B           word 0: 1 + the call (llrdma_ar_shm_t.call) of
//                          the first failure, 0 while none; word 1: 1 + a
//                          rank found dead, 0 while none
//   lines   size x 2 x 19 x 64 B   rank r, generation g % 2: a small
//                          vector in 56-byte pieces, each line's last word
//                          the round that wrote it (Arena::post_lines)
//   slots   2 x size x chunk   generation g % 2, rank r
//   results 2 x chunk          generation g % 2
//   own     2 x size x chunk   generation g % 2, rank r: private, pinned with
//                              the rest, for shm_direct's fold with copy hooks
// Flags hold round numbers and only grow, so a waiter compares with >=.
#include "internal.h"
#include "llrdma_peer.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace llrdma
{
namespace ar
{

namespace
{

constexpr size_t kLine = 64;
constexpr size_t kFlagsPerRank = Arena::kFlagsPerRank;
constexpr unsigned kPollsPerYield = 64;

inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

// n bytes of one line's payload: a whole line, or whole words, without a
// library call (the small calls' hot path); anything else by memcpy.
inline void copy_payload(unsigned char *d, const unsigned char *s, size_t n)
{
    if (n == Arena::kLinePayload) {
        std::memcpy(d, s, Arena::kLinePayload);
    } else if (n % 8 == 0) {
        for (size_t i = 0; i < n; i += 8)
            std::memcpy(d + i, s + i, 8);
    } else {
        std::memcpy(d, s, n);
    }
}

size_t abort_offset(int size)
{
    return static_cast<size_t>(size) * kFlagsPerRank;
}

constexpr size_t kLinesPerGen = Arena::kLinesPerGen;

size_t lines_offset(int size)
{
    return abort_offset(size) + kLine;
}

size_t slots_offset(int size)
{
    return lines_offset(size) + static_cast<size_t>(size) * 2 * kLinesPerGen * kLine;
}

uint64_t *abort_word(void *base, int size, int i)
{
    return reinterpret_cast<uint64_t *>(static_cast<unsigned char *>(base) + abort_offset(size)) +
           i;
}

// First failure wins: later ones must not move the recorded call.
void mark_broken(void *base, int size, uint64_t call)
{
    uint64_t expected = 0;
    __atomic_compare_exchange_n(abort_word(base, size, 0), &expected, call + 1, false,
                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void mark_gone(void *base, int size, uint64_t call, int rank)
{
    uint64_t expected = 0;
    __atomic_compare_exchange_n(abort_word(base, size, 1), &expected,
                                static_cast<uint64_t>(rank) + 1, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
    mark_broken(base, size, call);
}

uint64_t now_ns()
{
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
}

} // namespace

Arena::Arena(llrdma_ar_shm_t *s, int rank, int size)
    : s_(s), base_(static_cast<unsigned char *>(s->base)), slots_(base_ + slots_offset(size)),
      chunk_(s->chunk_bytes), rank_(rank), size_(size)
{
}

void Arena::phase_start_timed()
{
    mark_ns_ = now_ns();
    ++s_->phase_rounds;
}

void Arena::lap_timed(llrdma_ar_phase_t phase)
{
    if (phase >= 0 && phase < LLRDMA_AR_PHASES) {
        uint64_t t = now_ns();
        s_->phase_ns[phase] += t - mark_ns_;
        mark_ns_ = t;
    }
}

void Arena::post_lines(uint64_t g, const void *src, size_t bytes)
{
    unsigned char *l = lines(g, rank_);
    auto s = static_cast<const unsigned char *>(src);
    size_t off = 0;
    for (; off + kLinePayload <= bytes; off += kLinePayload, l += kLine) {
        std::memcpy(l, s + off, kLinePayload);
        __atomic_store_n(reinterpret_cast<uint64_t *>(l + kLinePayload), g, __ATOMIC_RELEASE);
    }
    if (off < bytes) {
        copy_payload(l, s + off, bytes - off);
        __atomic_store_n(reinterpret_cast<uint64_t *>(l + kLinePayload), g, __ATOMIC_RELEASE);
    }
    // The in flag too, so that whatever reads round numbers from it (the
    // placement step's check for a rank that is ahead) sees this round.
    // Nobody waits on it here: the store stays in this rank's cache.
    post(0, g);
}

int Arena::wait_lines(uint64_t g, size_t bytes)
{
    // Up to kPollAllLines lines, every line's word is loaded in each poll
    // (each word covers its own line's payload), so the misses overlap
    // instead of each line's following the last one's.  Longer vectors: only
    // the last line is polled (post_lines writes the lines in order, each
    // word with release, so the last word's round carries every line before
    // it); polling many lines while the writer still fills the next ones
    // pulled them back and forth between the two caches.
    const size_t nl = (bytes + kLinePayload - 1) / kLinePayload;
    const size_t first = nl <= kPollAllLines ? 0 : nl - 1;
    llrdma_ar_wait_t ws{};
    for (int r = 0; r < size_; ++r) {
        if (r == rank_)
            continue;
        const unsigned char *l = lines(g, r) + kLinePayload;
        uint64_t next_check = 0;
        for (;;) {
            bool ready = true;
            for (size_t k = first; k < nl; ++k)
                ready &= __atomic_load_n(reinterpret_cast<const uint64_t *>(l + k * kLine),
                                         __ATOMIC_ACQUIRE) >= g;
            if (ready)
                break;
            int rc = idle(r, ws, next_check);
            if (rc != LLRDMA_AR_OK)
                return rc;
        }
    }
    return LLRDMA_AR_OK;
}

void Arena::read_lines(uint64_t g, int r, void *dst, size_t bytes) const
{
    // Whole payloads, the last one's stale tail too (dst has room: kLinesBuf,
    // and nobody writes that tail before this rank posts round g + 1): one
    // fixed-size copy per line, no tail case (2 lines took 137 instructions
    // that way, 64 B on 2 ranks).
    const unsigned char *l = lines(g, r);
    auto d = static_cast<unsigned char *>(dst);
    const size_t n = (bytes + kLinePayload - 1) / kLinePayload;
    for (size_t k = 0; k < n; ++k, l += kLine, d += kLinePayload)
        std::memcpy(d, l, kLinePayload);
}

void Arena::post(int which, uint64_t g)
{
    // Release: the data written before is visible to whoever sees the flag.
    __atomic_store_n(flag(rank_, which), g, __ATOMIC_RELEASE);
}

int Arena::failure() const
{
    uint64_t w = __atomic_load_n(abort_word(base_, size_, 0), __ATOMIC_ACQUIRE);
    if (w == 0 || w - 1 > s_->call)
        return LLRDMA_AR_OK;
    return __atomic_load_n(abort_word(base_, size_, 1), __ATOMIC_ACQUIRE) != 0
               ? LLRDMA_AR_ERR_PEER_GONE
               : LLRDMA_AR_ERR_TRANSPORT;
}

// A claim word: the round's stamp (40 bits), then front, back and done (8
// bits each).  A word stamped with another round is that round's, finished:
// whoever comes first this round resets it (every rank computes the same
// tile count).
namespace
{
constexpr uint64_t kStampShift = 24, kFrontShift = 16, kBackShift = 8, kField = 0xff;
uint64_t stamp_of(uint64_t g)
{
    return g & ((uint64_t(1) << 40) - 1);
}
} // namespace

uint64_t *Arena::share_word(int q) const
{
    return flag(q, 1) + 1;
}

long Arena::claim(int q, uint64_t g, unsigned tiles, bool front)
{
    uint64_t *word = share_word(q), w = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    const uint64_t st = stamp_of(g);
    for (;;) {
        if (w >> kStampShift != st) {
            const uint64_t fresh = st << kStampShift | uint64_t(tiles) << kBackShift;
            if (!__atomic_compare_exchange_n(word, &w, fresh, false, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE))
                continue;
            w = fresh;
        }
        const uint64_t f = w >> kFrontShift & kField, b = w >> kBackShift & kField;
        if (f >= b)
            return -1;
        const uint64_t next =
            front ? w + (uint64_t(1) << kFrontShift) : w - (uint64_t(1) << kBackShift);
        if (__atomic_compare_exchange_n(word, &w, next, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return static_cast<long>(front ? f : b - 1);
    }
}

void Arena::tile_done(int q)
{
    // Release: the tile's result is visible to whoever sees the count.
    __atomic_fetch_add(share_word(q), 1, __ATOMIC_RELEASE);
}

int Arena::wait_slice(int q, uint64_t g, unsigned tiles)
{
    const uint64_t want = stamp_of(g) << kStampShift;
    const uint64_t *word = share_word(q);
    llrdma_ar_wait_t ws{};
    uint64_t next_check = 0;
    for (;;) {
        uint64_t w = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        if ((w & ~((uint64_t(1) << kStampShift) - 1)) == want && (w & kField) == tiles)
            return LLRDMA_AR_OK;
        // Any rank may hold one of the slice's tiles: ask about all of them.
        int rc = idle(-1, ws, next_check);
        if (rc != LLRDMA_AR_OK)
            return rc;
    }
}

int Arena::ready_slices(uint64_t base, int *lag) const
{
    uint64_t lo = UINT64_MAX;
    for (int r = 0; r < size_; ++r) {
        if (r == rank_)
            continue;
        uint64_t v = __atomic_load_n(flag(r, 0) + 2, __ATOMIC_ACQUIRE);
        if (v < lo) {
            lo = v;
            *lag = r;
        }
    }
    if (lo <= base)
        return 0;
    return lo - base >= static_cast<uint64_t>(size_) ? size_ : static_cast<int>(lo - base);
}

void Arena::post_progress(uint64_t v)
{
    __atomic_store_n(flag(rank_, 0) + 2, v, __ATOMIC_RELEASE);
}

int Arena::idle(int r, llrdma_ar_wait_t &w, uint64_t &next_check)
{
    int rc = failure();
    if (rc != LLRDMA_AR_OK)
        return rc;
    llrdma_ar_wait_idle(&s_->wait, &w, s_->progress, s_->progress_ctx);
    if (w.polls % kPollsPerYield != 0 || !s_->alive || s_->liveness_ns == 0)
        return LLRDMA_AR_OK;
    // A rank that died never posts: ask about the one waited on (r < 0:
    // every other rank), at most every liveness_ns (the first time after
    // one interval).  The clock as the idle step just read it.
    uint64_t now = w.now_ns;
    if (next_check == 0) {
        next_check = now + s_->liveness_ns;
    } else if (now >= next_check) {
        next_check = now + s_->liveness_ns;
        for (int q = r < 0 ? 0 : r; q < (r < 0 ? size_ : r + 1); ++q)
            if (q != rank_ && !s_->alive(s_->alive_ctx, q)) {
                mark_gone(base_, size_, s_->call, q);
                return LLRDMA_AR_ERR_PEER_GONE;
            }
    }
    return LLRDMA_AR_OK;
}

int Arena::wait_one(int which, uint64_t g, int r, llrdma_ar_wait_t &ws)
{
    const uint64_t *f = flag(r, which);
    uint64_t next_check = 0;
    while (__atomic_load_n(f, __ATOMIC_ACQUIRE) < g) {
        int rc = idle(r, ws, next_check);
        if (rc != LLRDMA_AR_OK)
            return rc;
    }
    return LLRDMA_AR_OK;
}

int Arena::wait(int which, uint64_t g)
{
    llrdma_ar_wait_t ws{};
    for (int r = 0; r < size_; ++r) {
        if (r == rank_)
            continue;
        int rc = wait_one(which, g, r, ws);
        if (rc != LLRDMA_AR_OK)
            return rc;
    }
    return LLRDMA_AR_OK;
}

void Arena::post_place(uint64_t call, unsigned code)
{
    __atomic_store_n(flag(rank_, 0) + 1, call << 2 | (code & 3u), __ATOMIC_RELEASE);
}

int Arena::wait_place(uint64_t call, unsigned *codes, int *who)
{
    const uint64_t want = call << 2;
    llrdma_ar_wait_t ws{};
    for (int r = 0; r < size_; ++r) {
        if (r == rank_) {
            codes[r] = 0;
            continue;
        }
        const uint64_t *w = flag(r, 0) + 1, *in = flag(r, 0);
        uint64_t next_check = 0, v;
        while ((v = __atomic_load_n(w, __ATOMIC_ACQUIRE)) < want) {
            // Placed before any round of the call: a rank already past this
            // round count without placing this call skipped the step.
            if (__atomic_load_n(in, __ATOMIC_ACQUIRE) > s_->gen &&
                __atomic_load_n(w, __ATOMIC_ACQUIRE) < want) {
                *who = r;
                return fail(LLRDMA_PEER_ERR_SYNC);
            }
            int rc = idle(r, ws, next_check);
            if (rc != LLRDMA_AR_OK)
                return rc;
        }
        if (v >> 2 != call) {
            *who = r; // a later call: this rank lost count
            return fail(LLRDMA_PEER_ERR_SYNC);
        }
        codes[r] = static_cast<unsigned>(v & 3u);
    }
    return LLRDMA_AR_OK;
}

int Arena::fail(int rc)
{
    mark_broken(base_, size_, s_->call);
    return rc;
}

bool Arena::broken() const
{
    return failure() != LLRDMA_AR_OK;
}

int ShmInput::round(uint64_t g, size_t off, size_t n, size_t next)
{
    Transport &t = *a_.t;
    const bool hooked = t.hooked();
    auto src = static_cast<unsigned char *>(const_cast<void *>(a_.sendbuf ? a_.sendbuf : a_.buf));
    int rc = LLRDMA_AR_OK;
    if (skip_own_ && !hooked) {
        // Around the own block: the bytes before it and after it.
        const size_t es = a_.esize;
        const size_t s = split_start(n, t.size(), t.rank(), es),
                     len = split_len(n, t.size(), t.rank(), es);
        rc = t.copy(ar_.slot(g, t.rank()), src + off * es, s * es);
        if (rc == LLRDMA_AR_OK)
            rc = t.copy(ar_.slot(g, t.rank()) + (s + len) * es, src + (off + s + len) * es,
                        (n - s - len) * es);
    } else if (!prefetched_) {
        rc = t.copy(ar_.slot(g, t.rank()), src + off * a_.esize, n * a_.esize);
    }
    if (rc == LLRDMA_AR_OK && hooked)
        rc = t.sync(); // the copy in, and whatever this rank enqueued before
    if (rc != LLRDMA_AR_OK)
        return ar_.fail(rc);
    ar_.lap(LLRDMA_AR_PHASE_COPY_IN);
    ar_.post_in(g);
    if ((rc = ar_.wait_in(g)) != LLRDMA_AR_OK)
        return rc;
    ar_.lap(LLRDMA_AR_PHASE_WAIT_IN);
    // Every rank finished round g - 1, so nobody reads the slots of g + 1's
    // parity any more: enqueue the next copy in now.
    prefetched_ = hooked && next > 0;
    if (prefetched_ && (rc = t.copy(ar_.slot(g + 1, t.rank()), src + (off + n) * a_.esize,
                                    next * a_.esize)) != LLRDMA_AR_OK)
        return ar_.fail(rc);
    return LLRDMA_AR_OK;
}

size_t shm_round_elems(const Args &a)
{
    size_t bytes = a.shm->chunk_bytes;
    if (a.plan->segment_bytes > 0 && a.plan->segment_bytes < bytes)
        bytes = a.plan->segment_bytes;
    size_t n = bytes / a.esize;
    return n > 0 ? n : 1; // chunk_bytes >= 64 >= any element
}

} // namespace ar
} // namespace llrdma

using namespace llrdma::ar;

extern "C" const char *llrdma_ar_phase_name(int phase)
{
    static const char *const names[LLRDMA_AR_PHASES] = {"copy in", "wait for every input", "fold",
                                                        "wait for the other slices", "copy out"};
    return phase >= 0 && phase < LLRDMA_AR_PHASES ? names[phase] : "?";
}

extern "C" void llrdma_ar_wait_idle(const llrdma_ar_wait_policy_t *p, llrdma_ar_wait_t *w,
                                    void (*progress)(void *ctx), void *ctx)
{
    cpu_relax();
    if (++w->polls % kPollsPerYield != 0)
        return;
    if (progress)
        progress(ctx);
    uint64_t now = now_ns();
    w->now_ns = now;
    if (w->start_ns == 0)
        w->start_ns = now;
    uint64_t waited = now - w->start_ns;
    const uint64_t spin = p ? p->spin_ns : 0, nap_after = p ? p->sleep_ns : 0;
    if (nap_after > 0 && waited >= nap_after) {
        // Long waits (imbalance, a rank in a debugger) give the CPU away;
        // at most 1 ms late.
        w->nap_us = w->nap_us == 0 ? 50 : (w->nap_us >= 500 ? 1000 : w->nap_us * 2);
        std::this_thread::sleep_for(std::chrono::microseconds(w->nap_us));
    } else if (waited >= spin) {
        std::this_thread::yield();
    }
}

extern "C" int llrdma_ar_oversubscribed(int ranks_here, int online_cpus, int affinity_cpus,
                                        double quota_cpus)
{
    if (ranks_here <= 1)
        return 0;
    if (online_cpus > 0 && ranks_here > online_cpus)
        return 1;
    if (affinity_cpus > 1 && ranks_here > affinity_cpus)
        return 1;
    return quota_cpus > 0 && static_cast<double>(ranks_here) > quota_cpus;
}

extern "C" llrdma_ar_wait_policy_t llrdma_ar_wait_policy_for(int oversubscribed, long spin_us,
                                                             long sleep_ms)
{
    llrdma_ar_wait_policy_t p{};
    if (spin_us < 0)
        p.spin_ns = oversubscribed ? 0 : uint64_t(10) * 1000 * 1000;
    else
        p.spin_ns = static_cast<uint64_t>(spin_us) * 1000;
    p.sleep_ns = sleep_ms > 0 ? static_cast<uint64_t>(sleep_ms) * 1000 * 1000 : 0;
    return p;
}

extern "C" size_t llrdma_ar_shm_bytes(int comm_size, size_t chunk_bytes)
{
    if (comm_size < 1 || comm_size > (1 << 20) || chunk_bytes == 0 || chunk_bytes % kLine != 0)
        return 0;
    size_t chunks = 4 * static_cast<size_t>(comm_size) + 2;
    if (chunk_bytes > (static_cast<size_t>(-1) - slots_offset(comm_size)) / chunks)
        return 0;
    return slots_offset(comm_size) + chunks * chunk_bytes;
}

extern "C" int llrdma_ar_shm_broken(const llrdma_ar_shm_t *shm, int comm_size)
{
    if (!shm || !shm->base || comm_size < 1)
        return 0;
    return __atomic_load_n(abort_word(shm->base, comm_size, 0), __ATOMIC_ACQUIRE) != 0;
}

extern "C" void llrdma_ar_shm_fail(llrdma_ar_shm_t *shm, int comm_size)
{
    if (shm && shm->base && comm_size >= 1)
        mark_broken(shm->base, comm_size, shm->call);
}

extern "C" int llrdma_ar_shm_check(const llrdma_ar_shm_t *shm, int comm_size, int *gone_rank)
{
    if (gone_rank)
        *gone_rank = -1;
    if (!shm || !shm->base || comm_size < 1)
        return LLRDMA_AR_SHM_USABLE;
    uint64_t w = __atomic_load_n(abort_word(shm->base, comm_size, 0), __ATOMIC_ACQUIRE);
    if (w == 0)
        return LLRDMA_AR_SHM_USABLE;
    uint64_t gone = __atomic_load_n(abort_word(shm->base, comm_size, 1), __ATOMIC_ACQUIRE);
    if (gone != 0) {
        if (gone_rank)
            *gone_rank = static_cast<int>(gone - 1);
        return LLRDMA_AR_SHM_PEER_GONE;
    }
    return shm->call > w - 1 ? LLRDMA_AR_SHM_REBUILD : LLRDMA_AR_SHM_FAILED;
}

extern "C" int llrdma_ar_shm_rank_ranges(int comm_size, size_t chunk_bytes, int rank, size_t *off,
                                         size_t *len, int max)
{
    if (llrdma_ar_shm_bytes(comm_size, chunk_bytes) == 0 || rank < 0 || rank >= comm_size || !off ||
        !len || max < 4)
        return 0;
    // Chunk indexes as in Arena::slot and Arena::own.
    const size_t p = static_cast<size_t>(comm_size), r = static_cast<size_t>(rank);
    const size_t idx[4] = {r, p + r, 2 * p + 2 + r, 3 * p + 2 + r};
    for (int i = 0; i < 4; ++i) {
        off[i] = slots_offset(comm_size) + idx[i] * chunk_bytes;
        len[i] = chunk_bytes;
    }
    return 4;
}

extern "C" size_t llrdma_ar_shm_rank_pages(int comm_size, size_t chunk_bytes, int rank,
                                           size_t page_bytes, size_t *page_off, size_t max)
{
    size_t off[4], len[4];
    if (page_bytes == 0 || (page_bytes & (page_bytes - 1)) != 0 || (max && !page_off) ||
        llrdma_ar_shm_rank_ranges(comm_size, chunk_bytes, rank, off, len, 4) != 4)
        return 0;
    size_t n = 0;
    for (int i = 0; i < 4; ++i) {
        size_t first = (off[i] + page_bytes - 1) & ~(page_bytes - 1);
        size_t end = (off[i] + len[i]) & ~(page_bytes - 1);
        for (size_t p = first; p < end; p += page_bytes, ++n)
            if (n < max)
                page_off[n] = p;
    }
    return n;
}

extern "C" void llrdma_ar_numa_census(const int *status, size_t n, int node,
                                      llrdma_ar_numa_census_t *out)
{
    if (!out)
        return;
    *out = llrdma_ar_numa_census_t{0, 0, 0, 0, -1, 0};
    if (!status)
        return;
    std::vector<size_t> per_node;
    out->pages = n;
    for (size_t i = 0; i < n; ++i) {
        int s = status[i];
        if (s < 0) {
            ++out->unknown;
        } else if (s == node) {
            ++out->local;
        } else {
            ++out->remote;
            if (per_node.size() <= static_cast<size_t>(s))
                per_node.resize(static_cast<size_t>(s) + 1);
            ++per_node[static_cast<size_t>(s)];
        }
    }
    for (size_t k = 0; k < per_node.size(); ++k)
        if (per_node[k] > out->remote_most) {
            out->remote_most = per_node[k];
            out->remote_node = static_cast<int>(k);
        }
}

extern "C" void *llrdma_ar_shm_rank_info(const llrdma_ar_shm_t *shm, int comm_size, int rank)
{
    if (!shm || !shm->base || comm_size < 1 || rank < 0 || rank >= comm_size)
        return nullptr;
    return static_cast<unsigned char *>(shm->base) + static_cast<size_t>(rank) * kFlagsPerRank +
           2 * kLine;
}

extern "C" size_t llrdma_ar_shm_default_chunk(int comm_size, size_t l2_bytes)
{
    // A round that fits one core's L2 runs copy-in, fold and copy-out from
    // cache; large rounds also suit GPU buffers (a few stream operations per
    // round).  Measurements: docs/allreduce.md, "Chunk".
    constexpr size_t kMax = size_t(4) << 20, kMin = size_t(64) << 10;
    constexpr size_t kFloor = LLRDMA_AR_SHM_MIN_CHUNK;
    constexpr size_t kArenaTarget = size_t(160) << 20;
    size_t l2 = l2_bytes ? l2_bytes : size_t(1) << 20;
    size_t c = kMax;
    while (c > kMin && c > l2)
        c /= 2;
    size_t p = comm_size > 0 ? static_cast<size_t>(comm_size) : 1;
    while (c > kFloor && (4 * p + 2) * c > kArenaTarget)
        c /= 2;
    return c;
}

extern "C" size_t llrdma_ar_shm_default_stream_min(size_t l2_bytes, int cpu_intel)
{
    // From twice the L2 the output cannot stay in this core's cache anyway;
    // streamed, it also leaves the cache to the fold's inputs (H100 host,
    // 16 ranks, 4 MB: the fold 269 us a round against 395).
    return cpu_intel ? 2 * l2_bytes : 0;
}
