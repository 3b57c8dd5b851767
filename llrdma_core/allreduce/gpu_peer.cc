// gpu_peer.cc -- the GPU peer path's selection, round protocol and handle
// cache (llrdma_core/llrdma_peer.h).  No CUDA: the GPU work is the caller's
// ops; this file decides, orders and remembers.
#include "internal.h"
#include "llrdma_peer.h"

#include <cstring>
#include <list>
#include <new>

using namespace llrdma::ar;

namespace
{

// Published in a slot of the confirm round.
struct Confirm {
    uint64_t magic, call, round;
    int32_t reason;
};

// The slot holds a stamp of this call and round.
template <typename T> bool stamped(const T &x, uint64_t call, uint64_t round)
{
    return x.magic == LLRDMA_PEER_MAGIC && x.call == call && x.round == round;
}

static_assert(sizeof(llrdma_peer_record_t) % 8 == 0, "records are copied as words");

bool identities_changed(const llrdma_peer_state_t *st, bool had_last,
                        const llrdma_peer_record_t *const *recs, int n)
{
    if (!had_last)
        return true;
    for (int q = 0; q < n; ++q)
        if (st->last[q][0] != recs[q]->in.id || st->last[q][1] != recs[q]->out.id ||
            st->last[q][2] != recs[q]->event_id)
            return true;
    return false;
}

// Where buffers live: known to the rank alone, decided per call, and coded
// 1..3 in a placement word (Arena::post_place).
static_assert(LLRDMA_PEER_HOST_RECV == 1 && LLRDMA_PEER_HOST_SEND == 2 && LLRDMA_PEER_MANAGED == 3,
              "placement reasons fit the placement word's code");
bool placement(int reason)
{
    return reason == LLRDMA_PEER_HOST_RECV || reason == LLRDMA_PEER_HOST_SEND ||
           reason == LLRDMA_PEER_MANAGED;
}

// Same on every rank: every rank follows the same records.
void note_fallback(llrdma_peer_state_t *st, int reason)
{
    st->have_last = 0;
    if (llrdma_peer_reason_sticky(reason)) {
        st->never = 1;
        st->never_reason = reason;
        return;
    }
    // Where the buffers live changes from call to call (a host call between
    // device calls is common): try again next call.  A CUDA refusal tends
    // to repeat: back off.
    if (placement(reason)) {
        st->backoff = 0;
        return;
    }
    st->backoff = st->backoff == 0 ? 1 : st->backoff * 2;
    if (st->backoff > LLRDMA_PEER_BACKOFF_MAX)
        st->backoff = LLRDMA_PEER_BACKOFF_MAX;
}

} // namespace

extern "C" const char *llrdma_peer_reason_text(int reason)
{
    static const char *const kText[LLRDMA_PEER_NREASONS] = {
        "ok",
        "receive buffer in host memory",
        "send buffer in host memory",
        "managed memory (CUDA IPC cannot export it)",
        "CUDA refused an IPC handle for the buffer",
        "a peer's IPC handle did not open",
        "ranks share a GPU",
        "ranks on MIG instances of one GPU",
        "no peer access between the GPUs",
        "GPU library missing or without IPC",
        "GPU facts or the interprocess event unavailable",
    };
    return reason >= 0 && reason < LLRDMA_PEER_NREASONS ? kText[reason] : "?";
}

extern "C" int llrdma_peer_reason_sticky(int reason)
{
    return reason >= LLRDMA_PEER_SHARED_GPU && reason < LLRDMA_PEER_NREASONS;
}

extern "C" int llrdma_peer_decide(const llrdma_peer_record_t *const *recs, int n, int allow_shared,
                                  int *who)
{
    int dummy;
    int &w = who ? *who : dummy;
    w = -1;
    if (!recs || n < 1 || n > LLRDMA_PEER_MAX_RANKS)
        return LLRDMA_PEER_NO_LIBRARY;
    for (int q = 0; q < n; ++q) {
        int r = recs[q]->reason;
        if (r != LLRDMA_PEER_OK) {
            w = q;
            return r > 0 && r < LLRDMA_PEER_NREASONS ? r : LLRDMA_PEER_DEVICE;
        }
    }
    if (allow_shared)
        return LLRDMA_PEER_OK;
    // The first pair (by the higher rank) on one physical GPU: the same UUID
    // is one device, different UUIDs are MIG instances of it.
    for (int q = 1; q < n; ++q)
        for (int o = 0; o < q; ++o)
            if (recs[q]->device_key == recs[o]->device_key) {
                w = q;
                return std::memcmp(recs[q]->uuid, recs[o]->uuid, sizeof recs[q]->uuid) == 0
                           ? LLRDMA_PEER_SHARED_GPU
                           : LLRDMA_PEER_MIG;
            }
    return LLRDMA_PEER_OK;
}

extern "C" int llrdma_peer_attempt(const llrdma_peer_state_t *st, const llrdma_ar_shm_t *shm, int n,
                                   uint64_t call)
{
    if (!st || !shm || !shm->base || n < 2 || n > LLRDMA_PEER_MAX_RANKS || st->never)
        return 0;
    if (shm->chunk_bytes < sizeof(llrdma_peer_record_t))
        return 0;
    return call >= st->next_call;
}

extern "C" int llrdma_peer_first_time(llrdma_peer_state_t *st, int reason)
{
    if (!st || reason < 0 || reason >= 32)
        return 0;
    uint32_t bit = 1u << reason;
    if (st->said & bit)
        return 0;
    st->said |= bit;
    return 1;
}

extern "C" int llrdma_peer_run(llrdma_ar_shm_t *shm, int rank, int n, llrdma_peer_state_t *st,
                               const llrdma_peer_record_t *mine, const llrdma_peer_ops_t *ops,
                               size_t count, int allow_shared, int *reason, int *who)
{
    int dummy_r, dummy_w;
    int &why = reason ? *reason : dummy_r;
    int &w = who ? *who : dummy_w;
    why = LLRDMA_PEER_OK;
    w = -1;
    if (!shm || !shm->base || !st || !mine || !ops || !ops->open || !ops->reduce || !ops->finish ||
        n < 2 || n > LLRDMA_PEER_MAX_RANKS || rank < 0 || rank >= n ||
        shm->chunk_bytes < sizeof(llrdma_peer_record_t))
        return LLRDMA_AR_ERR_INVALID;

    // Whatever ends this call other than success leaves no claim that every
    // rank mapped the last identities (a failed rank may not have).
    const bool had_last = st->have_last != 0;
    st->have_last = 0;
    Arena ar(shm, rank, n);
    const uint64_t call = shm->call;
    // 0. Placement.  A rank whose buffers are in host or managed memory knows
    // the outcome alone (a fallback): it says so in its placement word and
    // goes on without waiting for anyone, so host calls pay no round for
    // the GPU path.  The others read every word before any round: one
    // such rank is a fallback for all, with the same state change.
    const unsigned placed = placement(mine->reason) ? static_cast<unsigned>(mine->reason) : 0u;
    ar.post_place(call, placed);
    if (placed) {
        why = mine->reason;
        w = rank;
        note_fallback(st, why);
        st->next_call = call + 1;
        return LLRDMA_PEER_FALLBACK;
    }
    unsigned codes[LLRDMA_PEER_MAX_RANKS];
    int rc = ar.wait_place(call, codes, &w);
    if (rc != LLRDMA_AR_OK)
        return rc;
    for (int q = 0; q < n; ++q)
        if (codes[q] != 0) {
            why = static_cast<int>(codes[q]);
            w = q;
            note_fallback(st, why);
            st->next_call = call + 1;
            return LLRDMA_PEER_FALLBACK;
        }
    // 1. Publish.  Slots alternate by round parity, and a rank writes a slot
    // only after every rank posted the round before; a call without a
    // confirm round has two rounds, so the next call's record lands in the
    // slot of this one's: read it only before posting the next round.
    uint64_t g = ar.next_round();
    llrdma_peer_record_t own = *mine;
    own.magic = LLRDMA_PEER_MAGIC;
    own.call = call;
    own.round = g;
    std::memcpy(ar.slot(g, rank), &own, sizeof own);
    ar.post_in(g);
    rc = ar.wait_in(g);
    if (rc != LLRDMA_AR_OK)
        return rc;
    // Copied out now: once this rank posts its next round, a rank that
    // finished this call may publish its next record in the same slot.
    llrdma_peer_record_t copy[LLRDMA_PEER_MAX_RANKS];
    const llrdma_peer_record_t *recs[LLRDMA_PEER_MAX_RANKS];
    for (int q = 0; q < n; ++q) {
        std::memcpy(&copy[q], ar.slot(g, q), sizeof copy[q]);
        recs[q] = &copy[q];
    }
    for (int q = 0; q < n; ++q)
        if (!stamped(copy[q], call, g)) {
            w = q;
            return ar.fail(LLRDMA_PEER_ERR_SYNC);
        }

    // 2. Decide, the same way everywhere.
    int d = llrdma_peer_decide(recs, n, allow_shared, &w);
    if (d != LLRDMA_PEER_OK) {
        why = d;
        note_fallback(st, d);
        st->next_call = shm->call + (st->backoff ? st->backoff : 1);
        return LLRDMA_PEER_FALLBACK;
    }

    // 3. Confirm, when any rank has something new to map.  The condition is
    // computed from the records alone, so every rank agrees on the round.
    if (identities_changed(st, had_last, recs, n)) {
        uint64_t g2 = ar.next_round();
        Confirm c{LLRDMA_PEER_MAGIC, call, g2, ops->open(ops->ctx, recs, n)};
        std::memcpy(ar.slot(g2, rank), &c, sizeof c);
        ar.post_in(g2);
        if ((rc = ar.wait_in(g2)) != LLRDMA_AR_OK)
            return rc;
        Confirm got[LLRDMA_PEER_MAX_RANKS];
        for (int q = 0; q < n; ++q) {
            std::memcpy(&got[q], ar.slot(g2, q), sizeof got[q]);
            if (!stamped(got[q], call, g2)) {
                w = q;
                return ar.fail(LLRDMA_PEER_ERR_SYNC);
            }
        }
        for (int q = 0; q < n && why == LLRDMA_PEER_OK; ++q) {
            const Confirm &o = got[q];
            if (o.reason != LLRDMA_PEER_OK) {
                why =
                    o.reason > 0 && o.reason < LLRDMA_PEER_NREASONS ? o.reason : LLRDMA_PEER_DEVICE;
                w = q;
            }
        }
        if (why != LLRDMA_PEER_OK) {
            note_fallback(st, why);
            st->next_call = shm->call + (st->backoff ? st->backoff : 1);
            return LLRDMA_PEER_FALLBACK;
        }
    }

    // 4. This rank's block, into every rank's output; then the event.
    size_t first = block_start(count, static_cast<size_t>(n), static_cast<size_t>(rank));
    size_t len = block_len(count, static_cast<size_t>(n), static_cast<size_t>(rank));
    if (ops->reduce(ops->ctx, recs, n, first, len) != 0)
        return ar.fail(LLRDMA_AR_ERR_MEMORY);
    g = ar.next_round();
    ar.post_in(g); // "my event is recorded": the others may wait on it
    if ((rc = ar.wait_in(g)) != LLRDMA_AR_OK)
        return rc;

    // 5. Every rank's block has landed here, and nobody reads ours any more.
    if (ops->finish(ops->ctx, recs, n) != 0)
        return ar.fail(LLRDMA_AR_ERR_MEMORY);
    for (int q = 0; q < n; ++q) {
        st->last[q][0] = recs[q]->in.id;
        st->last[q][1] = recs[q]->out.id;
        st->last[q][2] = recs[q]->event_id;
    }
    st->have_last = 1;
    st->backoff = 0;
    st->next_call = 0;
    return LLRDMA_AR_OK;
}

// ------------------------------------------------------------- the cache

struct llrdma_peer_cache {
    struct Entry {
        int rank;
        uint64_t id, base, size;
        void *value;
        unsigned char handle[LLRDMA_PEER_HANDLE_BYTES];
    };
    size_t max_per_rank;
    std::list<Entry> lru; // most recently used first
};

extern "C" llrdma_peer_cache_t *llrdma_peer_cache_new(size_t max_per_rank)
{
    auto *c = new (std::nothrow) llrdma_peer_cache;
    if (c)
        c->max_per_rank = max_per_rank > 0 ? max_per_rank : 1;
    return c;
}

extern "C" void llrdma_peer_cache_free(llrdma_peer_cache_t *c, llrdma_peer_drop_fn drop, void *ctx)
{
    if (!c)
        return;
    if (drop)
        for (auto &e : c->lru)
            drop(ctx, e.rank, e.value);
    delete c;
}

extern "C" int llrdma_peer_cache_find(llrdma_peer_cache_t *c, int rank, uint64_t id, void **value,
                                      unsigned char *handle)
{
    if (!c)
        return 0;
    for (auto it = c->lru.begin(); it != c->lru.end(); ++it)
        if (it->rank == rank && it->id == id) {
            c->lru.splice(c->lru.begin(), c->lru, it);
            if (value)
                *value = it->value;
            if (handle)
                std::memcpy(handle, it->handle, LLRDMA_PEER_HANDLE_BYTES);
            return 1;
        }
    return 0;
}

extern "C" int llrdma_peer_cache_add(llrdma_peer_cache_t *c, int rank, uint64_t id, uint64_t base,
                                     uint64_t size, void *value, const unsigned char *handle,
                                     llrdma_peer_drop_fn drop, void *ctx)
{
    if (!c)
        return -1;
    llrdma_peer_cache::Entry e{rank, id, base, size, value, {}};
    if (handle)
        std::memcpy(e.handle, handle, LLRDMA_PEER_HANDLE_BYTES);
    try {
        c->lru.push_front(e);
    } catch (const std::bad_alloc &) {
        return -1;
    }
    // Overlap with a different id of the same rank: that allocation is gone
    // (its address now belongs to this one).  Same id: replaced.
    size_t kept = 1;
    for (auto it = std::next(c->lru.begin()); it != c->lru.end();) {
        bool same_rank = it->rank == rank;
        bool stale =
            same_rank && (it->id == id || (it->base < base + size && base < it->base + it->size));
        if (stale || (same_rank && kept >= c->max_per_rank)) {
            if (drop)
                drop(ctx, it->rank, it->value);
            it = c->lru.erase(it);
            continue;
        }
        if (same_rank)
            ++kept;
        ++it;
    }
    return 0;
}

extern "C" size_t llrdma_peer_cache_size(const llrdma_peer_cache_t *c)
{
    return c ? c->lru.size() : 0;
}
