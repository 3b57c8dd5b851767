// The GPU peer path's core (llrdma_core/llrdma_peer.h): the decision from
// every rank's record, when to try, the round protocol on a shared arena
// (threads as ranks), and the handle cache's invalidation.
//
// The "GPU" here is host memory behind a registry of allocations with
// identities, as CUDA gives them: ops->open maps a peer's allocation by its
// identity and refuses one that was freed; ops->reduce reads peers' inputs
// only through what open mapped, so a call that skips a needed confirm round
// (a stale mapping) fails the test instead of reading the wrong buffer.
#define BOOST_TEST_MODULE test_gpu_peer
#include <boost/test/unit_test.hpp>

#include "llrdma_allreduce.h"
#include "llrdma_peer.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace
{

llrdma_peer_record_t rec_ok(int gpu)
{
    llrdma_peer_record_t r;
    std::memset(&r, 0, sizeof r);
    r.device_key = 100 + gpu;
    r.uuid[0] = static_cast<unsigned char>(gpu);
    return r;
}

int decide(std::vector<llrdma_peer_record_t> &v, int allow_shared, int *who)
{
    std::vector<const llrdma_peer_record_t *> p;
    for (auto &r : v)
        p.push_back(&r);
    return llrdma_peer_decide(p.data(), static_cast<int>(p.size()), allow_shared, who);
}

// ------------------------------------------------------------ fake GPU

// Allocations of every rank, by identity; freed ones stay known as freed.
struct Registry {
    std::mutex m;
    struct Alloc {
        int owner;
        std::vector<unsigned char> bytes;
        bool live = true;
    };
    std::map<uint64_t, Alloc> allocs;
    uint64_t next_id = 1;

    uint64_t alloc(int owner, size_t n)
    {
        std::lock_guard<std::mutex> lk(m);
        uint64_t id = next_id++;
        allocs[id] = Alloc{owner, std::vector<unsigned char>(n), true};
        return id;
    }
    void free(uint64_t id)
    {
        std::lock_guard<std::mutex> lk(m);
        allocs[id].live = false;
    }
    unsigned char *data(uint64_t id) { return allocs.at(id).bytes.data(); }
};

struct Rank;

// One rank's side: its cache of mapped peer allocations and counters.
struct Rank {
    Registry *reg = nullptr;
    int me = 0;
    int op = LLRDMA_OP_SUM, dtype = LLRDMA_DT_DOUBLE;
    llrdma_peer_cache_t *cache = nullptr;
    std::atomic<int> opens{0}, drops{0}, reduces{0}, finishes{0};
    int open_result = LLRDMA_PEER_OK; // what open reports (injection)
    bool fail_reduce = false;
    std::vector<uint64_t> dropped;

    static void drop(void *ctx, int, void *value)
    {
        auto *r = static_cast<Rank *>(ctx);
        ++r->drops;
        r->dropped.push_back(reinterpret_cast<uint64_t>(value));
    }
    int map(int q, const llrdma_peer_buf_t &b)
    {
        if (q == me || llrdma_peer_cache_find(cache, q, b.id, nullptr, nullptr))
            return LLRDMA_PEER_OK;
        {
            std::lock_guard<std::mutex> lk(reg->m);
            auto it = reg->allocs.find(b.id);
            if (it == reg->allocs.end() || !it->second.live || it->second.owner != q)
                return LLRDMA_PEER_OPEN;
        }
        ++opens;
        // The value is the identity itself: reduce checks it maps to the
        // record's allocation.
        return llrdma_peer_cache_add(cache, q, b.id, b.base, b.size, reinterpret_cast<void *>(b.id),
                                     nullptr, &Rank::drop, this) == 0
                   ? LLRDMA_PEER_OK
                   : LLRDMA_PEER_OPEN;
    }
    unsigned char *ptr(int q, const llrdma_peer_buf_t &b)
    {
        void *v = nullptr;
        if (q != me && (!llrdma_peer_cache_find(cache, q, b.id, &v, nullptr) ||
                        reinterpret_cast<uint64_t>(v) != b.id))
            return nullptr; // not mapped: a confirm round was skipped
        std::lock_guard<std::mutex> lk(reg->m);
        auto &a = reg->allocs.at(b.id);
        return a.live ? a.bytes.data() + b.offset : nullptr;
    }

    static int s_open(void *ctx, const llrdma_peer_record_t *const *recs, int n)
    {
        auto *r = static_cast<Rank *>(ctx);
        if (r->open_result != LLRDMA_PEER_OK)
            return r->open_result;
        for (int q = 0; q < n; ++q) {
            int rc = r->map(q, recs[q]->in);
            if (rc == LLRDMA_PEER_OK)
                rc = r->map(q, recs[q]->out);
            if (rc != LLRDMA_PEER_OK)
                return rc;
        }
        return LLRDMA_PEER_OK;
    }
    // Runs on the rank's thread: Boost.Test's assertions are not thread-safe (even one that
    // passes records its location in shared strings; two threads at once corrupted them:
    // std::length_error or SIGSEGV in about 1 run of 40 under load), so a failure is
    // recorded here and reported on the main thread (Node::report).
    std::mutex err_m;
    std::vector<std::string> errors;
    int error(const std::string &what)
    {
        std::lock_guard<std::mutex> lk(err_m);
        errors.push_back("rank " + std::to_string(me) + ": " + what);
        return -1;
    }
    static int s_reduce(void *ctx, const llrdma_peer_record_t *const *recs, int n, size_t first,
                        size_t count)
    {
        auto *r = static_cast<Rank *>(ctx);
        ++r->reduces;
        if (r->fail_reduce)
            return -1;
        if (count == 0)
            return 0;
        size_t es = llrdma_ar_dtype_size(r->dtype), bytes = count * es;
        std::vector<unsigned char> acc(bytes), t(bytes);
        for (int q = 0; q < n; ++q) {
            unsigned char *in = r->ptr(q, recs[q]->in);
            if (!in)
                return r->error("rank " + std::to_string(q) + "'s input not mapped");
            std::memcpy(q == 0 ? acc.data() : t.data(), in + first * es, bytes);
            if (q > 0) { // t = acc OP t: the left fold in rank order
                if (llrdma_reduce_local(r->op, r->dtype, acc.data(), t.data(), count) != 0)
                    return r->error("llrdma_reduce_local failed");
                acc.swap(t);
            }
        }
        for (int q = 0; q < n; ++q) {
            unsigned char *out = r->ptr(q, recs[q]->out);
            if (!out)
                return r->error("rank " + std::to_string(q) + "'s output not mapped");
            std::memcpy(out + first * es, acc.data(), bytes);
        }
        return 0;
    }
    std::function<void()> in_finish;    // runs first in finish (a slow rank)
    std::vector<uint64_t> finish_calls; // the call stamp of every record finish saw
    static int s_finish(void *ctx, const llrdma_peer_record_t *const *recs, int n)
    {
        auto *r = static_cast<Rank *>(ctx);
        ++r->finishes;
        if (r->in_finish)
            r->in_finish();
        for (int q = 0; q < n; ++q)
            r->finish_calls.push_back(recs[q]->call);
        return 0;
    }
};

struct Buf {
    uint64_t id = 0;
    size_t offset = 0;
    uint64_t base = 0; // 0: an address of its own (id << 20)
};

// A node of n ranks sharing one arena.
struct Node {
    int n;
    size_t chunk;
    std::vector<uint64_t> arena;
    std::vector<llrdma_ar_shm_t> shm;
    std::vector<llrdma_peer_state_t> st;
    std::vector<Rank> ranks;
    Registry reg;
    uint64_t calls = 0;

    explicit Node(int n_, size_t chunk_ = 4096)
        : n(n_), chunk(chunk_), arena(llrdma_ar_shm_bytes(n_, chunk_) / 8, 0), shm(n_), st(n_),
          ranks(n_)
    {
        for (int r = 0; r < n; ++r) {
            shm[r] = llrdma_ar_shm_t{};
            shm[r].base = arena.data();
            shm[r].chunk_bytes = chunk;
            std::memset(&st[r], 0, sizeof st[r]);
            ranks[r].reg = &reg;
            ranks[r].me = r;
            ranks[r].cache = llrdma_peer_cache_new(8);
        }
    }
    ~Node()
    {
        report();
        for (auto &r : ranks)
            llrdma_peer_cache_free(r.cache, nullptr, nullptr);
    }
    // What the ranks' threads recorded (Rank::error), on the main thread.
    void report()
    {
        for (auto &r : ranks) {
            for (auto &e : r.errors)
                BOOST_ERROR(e);
            r.errors.clear();
        }
    }

    llrdma_peer_record_t record(int r, const Buf &in, const Buf &out, size_t bytes)
    {
        llrdma_peer_record_t rec = rec_ok(r);
        rec.event_id = 1000 + r;
        auto fill = [&](llrdma_peer_buf_t &b, const Buf &x) {
            b.id = x.id;
            b.base = x.base ? x.base : x.id << 20;
            b.size = bytes + x.offset;
            b.offset = x.offset;
        };
        fill(rec.in, in);
        fill(rec.out, out);
        return rec;
    }

    // One call on every rank; recs[r] is rank r's record.
    std::vector<int> run(const std::vector<llrdma_peer_record_t> &recs, size_t count,
                         std::vector<int> *reasons = nullptr, std::vector<int> *whos = nullptr)
    {
        ++calls;
        std::vector<int> rc(n, 99), why(n, -9), who(n, -9);
        std::vector<std::thread> th;
        for (int r = 0; r < n; ++r)
            th.emplace_back([&, r] {
                shm[r].call = calls;
                llrdma_peer_ops_t ops{&ranks[r], &Rank::s_open, &Rank::s_reduce, &Rank::s_finish};
                rc[r] = llrdma_peer_run(&shm[r], r, n, &st[r], &recs[r], &ops, count, 0, &why[r],
                                        &who[r]);
            });
        for (auto &t : th)
            t.join();
        report();
        if (reasons)
            *reasons = why;
        if (whos)
            *whos = who;
        return rc;
    }
};

template <typename T> void put(Registry &reg, uint64_t id, size_t off, const std::vector<T> &v)
{
    std::memcpy(reg.data(id) + off, v.data(), v.size() * sizeof(T));
}
template <typename T> std::vector<T> get(Registry &reg, uint64_t id, size_t off, size_t count)
{
    std::vector<T> v(count);
    std::memcpy(v.data(), reg.data(id) + off, count * sizeof(T));
    return v;
}

// Inputs whose sum depends on the order (1e16 + 1 - 1e16 ...).
std::vector<double> input(int r, size_t count, int salt)
{
    std::vector<double> v(count);
    for (size_t i = 0; i < count; ++i)
        v[i] = (r % 2 ? -1e16 : 1e16) * ((i + r + salt) % 3) + 0.5 * r + static_cast<double>(i);
    return v;
}

} // namespace

BOOST_AUTO_TEST_CASE(decide_names_the_first_reason)
{
    std::vector<llrdma_peer_record_t> v{rec_ok(0), rec_ok(1), rec_ok(2)};
    int who = 7;
    BOOST_CHECK_EQUAL(decide(v, 0, &who), LLRDMA_PEER_OK);
    BOOST_CHECK_EQUAL(who, -1);
    v[2].reason = LLRDMA_PEER_MANAGED;
    v[1].reason = LLRDMA_PEER_HOST_RECV;
    BOOST_CHECK_EQUAL(decide(v, 0, &who), LLRDMA_PEER_HOST_RECV);
    BOOST_CHECK_EQUAL(who, 1);
    v[1].reason = v[2].reason = LLRDMA_PEER_OK;
    // Same GPU, same UUID: shared; same GPU, other UUID: MIG instances.
    v[2].device_key = v[0].device_key;
    v[2].uuid[0] = v[0].uuid[0];
    BOOST_CHECK_EQUAL(decide(v, 0, &who), LLRDMA_PEER_SHARED_GPU);
    BOOST_CHECK_EQUAL(who, 2);
    BOOST_CHECK_EQUAL(decide(v, 1, &who), LLRDMA_PEER_OK); // forced
    v[2].uuid[0] = 9;
    BOOST_CHECK_EQUAL(decide(v, 0, &who), LLRDMA_PEER_MIG);
    BOOST_CHECK_EQUAL(who, 2);
    // A reason of a rank comes before any pairing; garbage is a device error.
    v[0].reason = 12345;
    BOOST_CHECK_EQUAL(decide(v, 0, &who), LLRDMA_PEER_DEVICE);
    BOOST_CHECK_EQUAL(who, 0);
    BOOST_CHECK_EQUAL(llrdma_peer_decide(nullptr, 2, 0, &who), LLRDMA_PEER_NO_LIBRARY);
    BOOST_CHECK(llrdma_peer_reason_sticky(LLRDMA_PEER_SHARED_GPU));
    BOOST_CHECK(llrdma_peer_reason_sticky(LLRDMA_PEER_NO_ACCESS));
    BOOST_CHECK(!llrdma_peer_reason_sticky(LLRDMA_PEER_MANAGED));
    BOOST_CHECK(!llrdma_peer_reason_sticky(LLRDMA_PEER_OPEN));
    BOOST_CHECK_EQUAL(std::string(llrdma_peer_reason_text(LLRDMA_PEER_MIG)),
                      "ranks on MIG instances of one GPU");
    BOOST_CHECK_EQUAL(std::string(llrdma_peer_reason_text(-1)), "?");
}

BOOST_AUTO_TEST_CASE(attempt_needs_an_arena_that_holds_a_record)
{
    std::vector<uint64_t> arena(llrdma_ar_shm_bytes(4, 4096) / 8);
    llrdma_ar_shm_t shm{};
    shm.base = arena.data();
    shm.chunk_bytes = 4096;
    llrdma_peer_state_t st;
    std::memset(&st, 0, sizeof st);
    BOOST_CHECK_EQUAL(llrdma_peer_attempt(&st, &shm, 2, 1), 1);
    BOOST_CHECK_EQUAL(llrdma_peer_attempt(&st, &shm, 1, 1), 0);
    BOOST_CHECK_EQUAL(llrdma_peer_attempt(&st, &shm, LLRDMA_PEER_MAX_RANKS + 1, 1), 0);
    shm.chunk_bytes = 256; // smaller than a record
    BOOST_CHECK_LT(shm.chunk_bytes, sizeof(llrdma_peer_record_t));
    BOOST_CHECK_EQUAL(llrdma_peer_attempt(&st, &shm, 2, 1), 0);
    shm.chunk_bytes = 4096;
    st.next_call = 5;
    BOOST_CHECK_EQUAL(llrdma_peer_attempt(&st, &shm, 2, 4), 0);
    BOOST_CHECK_EQUAL(llrdma_peer_attempt(&st, &shm, 2, 5), 1);
    st.never = 1;
    BOOST_CHECK_EQUAL(llrdma_peer_attempt(&st, &shm, 2, 5), 0);
    shm.base = nullptr;
    st.never = 0;
    BOOST_CHECK_EQUAL(llrdma_peer_attempt(&st, &shm, 2, 5), 0);
    BOOST_CHECK_EQUAL(llrdma_peer_first_time(&st, LLRDMA_PEER_MIG), 1);
    BOOST_CHECK_EQUAL(llrdma_peer_first_time(&st, LLRDMA_PEER_MIG), 0);
    BOOST_CHECK_EQUAL(llrdma_peer_first_time(&st, LLRDMA_PEER_OPEN), 1);
}

BOOST_AUTO_TEST_CASE(peer_run_is_the_left_fold_on_every_rank)
{
    // Every rank's output holds ((v0 + v1) + v2) ... bit for bit, for counts
    // that leave blocks empty or uneven, in place or not.
    for (int n : {2, 3, 4, 5, 16})
        for (size_t count : {size_t(1), size_t(2), size_t(7), size_t(1000), size_t(4099)})
            for (bool in_place : {false, true}) {
                Node node(n);
                std::vector<Buf> in(n), out(n);
                std::vector<llrdma_peer_record_t> recs;
                size_t bytes = count * 8;
                for (int r = 0; r < n; ++r) {
                    out[r] = Buf{node.reg.alloc(r, bytes + 24), 24};
                    in[r] = in_place ? out[r] : Buf{node.reg.alloc(r, bytes + 8), 8};
                    put(node.reg, in[r].id, in[r].offset, input(r, count, 1));
                    recs.push_back(node.record(r, in[r], out[r], bytes));
                }
                std::vector<double> ref = input(0, count, 1);
                for (int r = 1; r < n; ++r) {
                    std::vector<double> v = input(r, count, 1);
                    for (size_t i = 0; i < count; ++i)
                        ref[i] = ref[i] + v[i];
                }
                std::vector<int> rc = node.run(recs, count);
                for (int r = 0; r < n; ++r) {
                    BOOST_REQUIRE_EQUAL(rc[r], LLRDMA_AR_OK);
                    auto got = get<double>(node.reg, out[r].id, out[r].offset, count);
                    BOOST_CHECK_MESSAGE(std::memcmp(got.data(), ref.data(), bytes) == 0,
                                        "n=" << n << " count=" << count << " in_place=" << in_place
                                             << " rank " << r);
                    BOOST_CHECK_EQUAL(node.ranks[r].reduces.load(), 1);
                    BOOST_CHECK_EQUAL(node.ranks[r].finishes.load(), 1);
                }
            }
}

BOOST_AUTO_TEST_CASE(other_ops_and_types)
{
    const int n = 3;
    const size_t count = 301;
    for (int op : {LLRDMA_OP_MAX, LLRDMA_OP_PROD, LLRDMA_OP_BXOR}) {
        Node node(n);
        std::vector<Buf> b(n);
        std::vector<llrdma_peer_record_t> recs;
        std::vector<std::vector<int32_t>> v(n, std::vector<int32_t>(count));
        for (int r = 0; r < n; ++r) {
            node.ranks[r].op = op;
            node.ranks[r].dtype = LLRDMA_DT_INT32;
            for (size_t i = 0; i < count; ++i)
                v[r][i] = static_cast<int32_t>((i * 7 + r * 13) % 29) - 14;
            b[r] = Buf{node.reg.alloc(r, count * 4), 0};
            put(node.reg, b[r].id, 0, v[r]);
            recs.push_back(node.record(r, b[r], b[r], count * 4));
        }
        std::vector<int32_t> ref = v[0];
        for (int r = 1; r < n; ++r) {
            std::vector<int32_t> t = v[r];
            llrdma_reduce_local(op, LLRDMA_DT_INT32, ref.data(), t.data(), count);
            ref = t;
        }
        std::vector<int> rc = node.run(recs, count);
        for (int r = 0; r < n; ++r) {
            BOOST_REQUIRE_EQUAL(rc[r], LLRDMA_AR_OK);
            BOOST_CHECK(get<int32_t>(node.reg, b[r].id, 0, count) == ref);
        }
    }
}

BOOST_AUTO_TEST_CASE(confirm_round_only_when_an_allocation_changes)
{
    // Handles are mapped once per allocation: the same buffers again need no
    // confirm round and no open; a rank that frees its buffer and gets a new
    // allocation at the same address gets it mapped anew on every other rank,
    // and the stale mapping is dropped.
    const int n = 3;
    const size_t count = 100, bytes = count * 8;
    Node node(n);
    std::vector<Buf> b(n);
    auto records = [&] {
        std::vector<llrdma_peer_record_t> recs;
        for (int r = 0; r < n; ++r) {
            put(node.reg, b[r].id, 0, input(r, count, static_cast<int>(node.calls)));
            recs.push_back(node.record(r, b[r], b[r], bytes));
        }
        return recs;
    };
    for (int r = 0; r < n; ++r)
        b[r] = Buf{node.reg.alloc(r, bytes), 0};
    auto rc = node.run(records(), count);
    for (int r = 0; r < n; ++r) {
        BOOST_REQUIRE_EQUAL(rc[r], LLRDMA_AR_OK);
        BOOST_CHECK_EQUAL(node.ranks[r].opens.load(), n - 1); // in == out: one per peer
    }
    for (int i = 0; i < 3; ++i) {
        rc = node.run(records(), count);
        for (int r = 0; r < n; ++r) {
            BOOST_REQUIRE_EQUAL(rc[r], LLRDMA_AR_OK);
            BOOST_CHECK_EQUAL(node.ranks[r].opens.load(), n - 1);
        }
    }
    // Rank 1 reallocates at the same address: a new identity.
    uint64_t old = b[1].id;
    node.reg.free(old);
    b[1] = Buf{node.reg.alloc(1, bytes), 0, old << 20};
    rc = node.run(records(), count);
    std::vector<double> ref = input(0, count, static_cast<int>(node.calls - 1));
    for (int r = 0; r < n; ++r) {
        BOOST_REQUIRE_EQUAL(rc[r], LLRDMA_AR_OK);
        BOOST_CHECK_EQUAL(node.ranks[r].opens.load(), r == 1 ? n - 1 : n);
        if (r != 1) {
            BOOST_CHECK_EQUAL(node.ranks[r].drops.load(), 1);
            BOOST_CHECK_EQUAL(node.ranks[r].dropped.at(0), old);
        }
    }
    // The result is from the new buffer's data.
    for (int r = 1; r < n; ++r) {
        auto v = input(r, count, static_cast<int>(node.calls - 1));
        for (size_t i = 0; i < count; ++i)
            ref[i] = ref[i] + v[i];
    }
    for (int r = 0; r < n; ++r)
        BOOST_CHECK(get<double>(node.reg, b[r].id, 0, count) == ref);
}

BOOST_AUTO_TEST_CASE(fallback_leaves_buffers_alone_and_backs_off)
{
    const int n = 3;
    const size_t count = 64, bytes = count * 8;
    Node node(n);
    std::vector<Buf> b(n);
    for (int r = 0; r < n; ++r)
        b[r] = Buf{node.reg.alloc(r, bytes), 0};
    auto records = [&](int host_rank) {
        std::vector<llrdma_peer_record_t> recs;
        for (int r = 0; r < n; ++r) {
            put(node.reg, b[r].id, 0, input(r, count, 0));
            recs.push_back(node.record(r, b[r], b[r], bytes));
        }
        if (host_rank >= 0)
            recs[host_rank].reason = LLRDMA_PEER_EXPORT;
        return recs;
    };
    std::vector<int> why, who;
    // Calls 1.. where CUDA refuses rank 2's handle: every rank falls back, names rank 2,
    // nothing is written, and the next attempt is 1, 2, 4 ... calls later.
    std::vector<uint64_t> attempted;
    for (uint64_t call = 1; call <= 40; ++call) {
        bool any = llrdma_peer_attempt(&node.st[0], &node.shm[0], n, call);
        for (int r = 1; r < n; ++r)
            BOOST_CHECK_EQUAL(llrdma_peer_attempt(&node.st[r], &node.shm[r], n, call), any);
        if (!any) {
            ++node.calls; // the arena path's call
            continue;
        }
        attempted.push_back(call);
        auto rc = node.run(records(2), count, &why, &who);
        for (int r = 0; r < n; ++r) {
            BOOST_CHECK_EQUAL(rc[r], LLRDMA_PEER_FALLBACK);
            BOOST_CHECK_EQUAL(why[r], LLRDMA_PEER_EXPORT);
            BOOST_CHECK_EQUAL(who[r], 2);
            BOOST_CHECK(get<double>(node.reg, b[r].id, 0, count) == input(r, count, 0));
            BOOST_CHECK_EQUAL(node.ranks[r].reduces.load(), 0);
        }
    }
    BOOST_CHECK(attempted == (std::vector<uint64_t>{1, 2, 4, 8, 16, 32}));
    // Once every rank can, the peer path runs and the backoff resets.
    while (!llrdma_peer_attempt(&node.st[0], &node.shm[0], n, node.calls + 1))
        ++node.calls;
    auto rc = node.run(records(-1), count);
    for (int r = 0; r < n; ++r)
        BOOST_CHECK_EQUAL(rc[r], LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(node.st[0].backoff, 0u);
    BOOST_CHECK_EQUAL(llrdma_peer_attempt(&node.st[0], &node.shm[0], n, node.calls + 1), 1);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_broken(&node.shm[0], n), 0);
    // A call with host buffers somewhere: the next call tries again (host
    // and device calls interleave; no backoff).
    auto recs = records(-1);
    recs[1].reason = LLRDMA_PEER_HOST_RECV;
    rc = node.run(recs, count);
    for (int r = 0; r < n; ++r) {
        BOOST_CHECK_EQUAL(rc[r], LLRDMA_PEER_FALLBACK);
        BOOST_CHECK_EQUAL(llrdma_peer_attempt(&node.st[r], &node.shm[r], n, node.calls + 1), 1);
    }
}

// Host buffers pay nothing for the GPU path: a rank whose buffers are in
// host memory returns at once, before any other rank arrives, using no
// round; the others, arriving later, read its placement word and fall back
// alike; the next all-device call runs the peer path with rounds that agree.
std::atomic<int> g_asked{0};

BOOST_AUTO_TEST_CASE(a_host_rank_waits_for_nobody)
{
    const int n = 3;
    const size_t count = 64, bytes = count * 8;
    Node node(n);
    std::vector<Buf> b(n);
    std::vector<llrdma_peer_record_t> recs;
    for (int r = 0; r < n; ++r) {
        b[r] = Buf{node.reg.alloc(r, bytes), 0};
        put(node.reg, b[r].id, 0, input(r, count, 0));
        recs.push_back(node.record(r, b[r], b[r], bytes));
    }
    auto host = recs;
    host[1].reason = LLRDMA_PEER_HOST_RECV;
    node.calls = 1;
    for (int r = 0; r < n; ++r)
        node.shm[r].call = 1;
    // Rank 1 alone.  Were it to wait, the liveness check would end the
    // wait (the others are "dead") with LLRDMA_AR_ERR_PEER_GONE.
    node.shm[1].alive = [](void *, int) {
        ++g_asked;
        return 0;
    };
    node.shm[1].liveness_ns = 1000000;
    llrdma_peer_ops_t ops1{&node.ranks[1], &Rank::s_open, &Rank::s_reduce, &Rank::s_finish};
    int why = -9, who = -9;
    int rc =
        llrdma_peer_run(&node.shm[1], 1, n, &node.st[1], &host[1], &ops1, count, 0, &why, &who);
    BOOST_REQUIRE_EQUAL(rc, LLRDMA_PEER_FALLBACK); // the rest would wait for a broken arena
    BOOST_CHECK_EQUAL(why, LLRDMA_PEER_HOST_RECV);
    BOOST_CHECK_EQUAL(who, 1);
    BOOST_CHECK_EQUAL(g_asked.load(), 0);
    BOOST_CHECK_EQUAL(node.shm[1].gen, 0u); // no round
    BOOST_CHECK(!llrdma_ar_shm_broken(&node.shm[1], n));
    node.shm[1].alive = nullptr;
    // The device ranks come later: rank 1's word decides for them too.
    std::vector<int> rcs(n, 99), whys(n, -9), whos(n, -9);
    std::vector<std::thread> th;
    for (int r : {0, 2})
        th.emplace_back([&, r] {
            llrdma_peer_ops_t ops{&node.ranks[r], &Rank::s_open, &Rank::s_reduce, &Rank::s_finish};
            rcs[r] = llrdma_peer_run(&node.shm[r], r, n, &node.st[r], &host[r], &ops, count, 0,
                                     &whys[r], &whos[r]);
        });
    for (auto &t : th)
        t.join();
    for (int r : {0, 2}) {
        BOOST_CHECK_EQUAL(rcs[r], LLRDMA_PEER_FALLBACK);
        BOOST_CHECK_EQUAL(whys[r], LLRDMA_PEER_HOST_RECV);
        BOOST_CHECK_EQUAL(whos[r], 1);
        BOOST_CHECK_EQUAL(node.shm[r].gen, 0u);
        BOOST_CHECK_EQUAL(node.ranks[r].reduces.load(), 0);
        BOOST_CHECK(get<double>(node.reg, b[r].id, 0, count) == input(r, count, 0));
    }
    // Every rank tries again next call, and it works.
    for (int r = 0; r < n; ++r)
        BOOST_CHECK_EQUAL(llrdma_peer_attempt(&node.st[r], &node.shm[r], n, 2), 1);
    auto rc2 = node.run(recs, count);
    for (int r = 0; r < n; ++r)
        BOOST_CHECK_EQUAL(rc2[r], LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(node.shm[0].gen, node.shm[1].gen);
    BOOST_CHECK_EQUAL(node.shm[1].gen, node.shm[2].gen);
}

BOOST_AUTO_TEST_CASE(no_peer_access_stops_the_communicator_for_good)
{
    const int n = 2;
    const size_t count = 10;
    Node node(n);
    std::vector<llrdma_peer_record_t> recs;
    for (int r = 0; r < n; ++r) {
        Buf b{node.reg.alloc(r, count * 8), 0};
        recs.push_back(node.record(r, b, b, count * 8));
    }
    node.ranks[1].open_result = LLRDMA_PEER_NO_ACCESS;
    std::vector<int> why, who;
    auto rc = node.run(recs, count, &why, &who);
    for (int r = 0; r < n; ++r) {
        BOOST_CHECK_EQUAL(rc[r], LLRDMA_PEER_FALLBACK);
        BOOST_CHECK_EQUAL(why[r], LLRDMA_PEER_NO_ACCESS);
        BOOST_CHECK_EQUAL(who[r], 1);
        BOOST_CHECK_EQUAL(node.st[r].never, 1);
        BOOST_CHECK_EQUAL(llrdma_peer_attempt(&node.st[r], &node.shm[r], n, 1000), 0);
    }
}

BOOST_AUTO_TEST_CASE(a_failed_open_of_a_freed_allocation_falls_back)
{
    // A record naming an allocation its owner already freed: open refuses
    // it, every rank falls back (per call, not for good).
    const int n = 2;
    Node node(n);
    std::vector<llrdma_peer_record_t> recs;
    std::vector<Buf> b(n);
    for (int r = 0; r < n; ++r) {
        b[r] = Buf{node.reg.alloc(r, 80), 0};
        recs.push_back(node.record(r, b[r], b[r], 80));
    }
    node.reg.free(b[0].id);
    std::vector<int> why, who;
    auto rc = node.run(recs, 10, &why, &who);
    for (int r = 0; r < n; ++r) {
        BOOST_CHECK_EQUAL(rc[r], LLRDMA_PEER_FALLBACK);
        BOOST_CHECK_EQUAL(why[r], LLRDMA_PEER_OPEN);
        BOOST_CHECK_EQUAL(who[r], 1); // rank 1 could not open rank 0's
        BOOST_CHECK_EQUAL(node.st[r].never, 0);
    }
}

BOOST_AUTO_TEST_CASE(a_failing_reduce_fails_every_rank)
{
    for (int bad : {0, 2}) {
        const int n = 3;
        Node node(n);
        std::vector<llrdma_peer_record_t> recs;
        for (int r = 0; r < n; ++r) {
            Buf b{node.reg.alloc(r, 80), 0};
            recs.push_back(node.record(r, b, b, 80));
        }
        node.ranks[bad].fail_reduce = true;
        auto rc = node.run(recs, 10);
        for (int r = 0; r < n; ++r) {
            BOOST_CHECK_NE(rc[r], LLRDMA_AR_OK);
            BOOST_CHECK_NE(rc[r], LLRDMA_PEER_FALLBACK);
            BOOST_CHECK_EQUAL(node.st[r].have_last, 0);
        }
        BOOST_CHECK_EQUAL(llrdma_ar_shm_broken(&node.shm[0], n), 1);
    }
}

// The H200 matrix-4 hang: a rank whose call counter differed (an
// uninitialised module field) skipped the peer path in a call its peer
// tried, so the peer read an arena data slot as a record, took a reason
// nobody gave, and the ranks' rounds drifted apart.  Now the record's stamp
// does not match: the trying rank fails the call with LLRDMA_PEER_ERR_SYNC
// naming that rank, and the other rank's arena call (shm_split: every call
// the peer path tries from the default coll_llrdma_gpu_peer_min) fails
// instead of waiting for a reduction round that never comes.
BOOST_AUTO_TEST_CASE(a_rank_in_the_arena_path_is_detected_not_read_as_a_record)
{
    const int n = 2;
    const size_t count = 512;
    Node node(n);
    llrdma_peer_record_t rec = rec_ok(0);
    // Data that looks like a record with reason "shared GPU" to the old code.
    std::vector<int32_t> data(count * 2, LLRDMA_PEER_SHARED_GPU);
    llrdma_ar_plan_t plan{};
    BOOST_REQUIRE_EQUAL(
        llrdma_ar_plan_shm(count * 8, 8, n, 0, 0, node.chunk, LLRDMA_AR_SHM_SPLIT, 0, &plan),
        LLRDMA_AR_OK);
    int rc0 = 99, rc1 = 99, why = -9, who = -9;
    std::thread t0([&] {
        node.shm[0].call = 1;
        llrdma_peer_ops_t ops{&node.ranks[0], &Rank::s_open, &Rank::s_reduce, &Rank::s_finish};
        rc0 = llrdma_peer_run(&node.shm[0], 0, n, &node.st[0], &rec, &ops, count, 0, &why, &who);
    });
    std::thread t1([&] {
        node.shm[1].call = 1;
        llrdma_ar_comm_t c{};
        c.rank = 1;
        c.size = n;
        c.shm = &node.shm[1];
        // The arena algorithms send no message: a transport that must not be used.
        c.isend = [](void *, const void *, size_t, int, int, void **) { return -1; };
        c.irecv = [](void *, void *, size_t, int, int, void **) { return -1; };
        c.waitall = [](void *, int, void **) { return -1; };
        rc1 = llrdma_ar_run(&plan, &c, nullptr, data.data(), count, LLRDMA_DT_INT64, LLRDMA_OP_SUM,
                            nullptr, 0);
    });
    t0.join();
    t1.join();
    BOOST_CHECK_EQUAL(rc0, LLRDMA_PEER_ERR_SYNC);
    BOOST_CHECK_EQUAL(who, 1);
    BOOST_CHECK_NE(rc1, LLRDMA_AR_OK);
    BOOST_CHECK(llrdma_ar_shm_broken(&node.shm[0], n));
    BOOST_CHECK_EQUAL(node.ranks[0].reduces.load(), 0); // nothing written
}

// A record left in a slot by an earlier call is not this call's: a rank
// whose call number differs fails the call on every rank, never a guess.
BOOST_AUTO_TEST_CASE(a_record_of_another_call_is_not_used)
{
    const int n = 3;
    Node node(n);
    std::vector<llrdma_peer_record_t> recs{rec_ok(0), rec_ok(1), rec_ok(2)};
    std::vector<int> rc(n, 99), who(n, -9);
    std::vector<std::thread> th;
    for (int r = 0; r < n; ++r)
        th.emplace_back([&, r] {
            node.shm[r].call = r == 2 ? 6 : 7; // rank 2 lost count
            llrdma_peer_ops_t ops{&node.ranks[r], &Rank::s_open, &Rank::s_reduce, &Rank::s_finish};
            int why;
            rc[r] = llrdma_peer_run(&node.shm[r], r, n, &node.st[r], &recs[r], &ops, 4, 0, &why,
                                    &who[r]);
        });
    for (auto &t : th)
        t.join();
    // Rank 2 finds the others' placement words stamped with a later call;
    // they, waiting for its word of this call, see the arena it broke.
    BOOST_CHECK_EQUAL(rc[2], LLRDMA_PEER_ERR_SYNC);
    BOOST_CHECK_EQUAL(who[2], 0);
    for (int r = 0; r < n; ++r) {
        BOOST_CHECK(rc[r] == LLRDMA_PEER_ERR_SYNC || rc[r] == LLRDMA_AR_ERR_TRANSPORT);
        BOOST_CHECK_EQUAL(node.ranks[r].reduces.load(), 0);
    }
    BOOST_CHECK(llrdma_ar_shm_broken(&node.shm[0], n));
}

// A call without a confirm round has two rounds, so a rank that finished it
// publishes its next record in the slot a slow rank's finish still reads:
// the slow rank must work from its own copy of this call's records.
BOOST_AUTO_TEST_CASE(a_fast_rank_s_next_record_does_not_reach_a_slow_rank)
{
    const int n = 2;
    const size_t count = 64, bytes = count * 8;
    Node node(n);
    std::vector<Buf> b(n);
    std::vector<llrdma_peer_record_t> recs;
    for (int r = 0; r < n; ++r) {
        b[r] = Buf{node.reg.alloc(r, bytes), 0};
        put(node.reg, b[r].id, 0, input(r, count, 0));
        recs.push_back(node.record(r, b[r], b[r], bytes));
    }
    auto rc = node.run(recs, count); // maps everything: later calls have 2 rounds
    BOOST_REQUIRE(rc[0] == LLRDMA_AR_OK && rc[1] == LLRDMA_AR_OK);
    std::atomic<int> published{0};
    node.ranks[1].finish_calls.clear();
    node.ranks[1].in_finish = [&] {
        // Rank 0 starts its next call (a host call: a fallback) meanwhile.
        for (int i = 0; i < 2000 && !published.load(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    };
    std::vector<int> rc2(n, 99), rc3(n, 99);
    std::thread t0([&] {
        llrdma_peer_ops_t ops{&node.ranks[0], &Rank::s_open, &Rank::s_reduce, &Rank::s_finish};
        int why, who;
        node.shm[0].call = 2;
        rc2[0] =
            llrdma_peer_run(&node.shm[0], 0, n, &node.st[0], &recs[0], &ops, count, 0, &why, &who);
        llrdma_peer_record_t host = rec_ok(0);
        host.reason = LLRDMA_PEER_HOST_RECV;
        node.shm[0].call = 3;
        published = 1;
        rc3[0] =
            llrdma_peer_run(&node.shm[0], 0, n, &node.st[0], &host, &ops, count, 0, &why, &who);
    });
    std::thread t1([&] {
        llrdma_peer_ops_t ops{&node.ranks[1], &Rank::s_open, &Rank::s_reduce, &Rank::s_finish};
        int why, who;
        node.shm[1].call = 2;
        rc2[1] =
            llrdma_peer_run(&node.shm[1], 1, n, &node.st[1], &recs[1], &ops, count, 0, &why, &who);
        node.ranks[1].in_finish = nullptr;
        node.shm[1].call = 3;
        rc3[1] =
            llrdma_peer_run(&node.shm[1], 1, n, &node.st[1], &recs[1], &ops, count, 0, &why, &who);
    });
    t0.join();
    t1.join();
    BOOST_CHECK_EQUAL(rc2[0], LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(rc2[1], LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(rc3[0], LLRDMA_PEER_FALLBACK);
    BOOST_CHECK_EQUAL(rc3[1], LLRDMA_PEER_FALLBACK);
    // Rank 1's finish in call 2 saw call 2's records only.
    BOOST_REQUIRE_EQUAL(node.ranks[1].finish_calls.size(), size_t(n));
    for (uint64_t c : node.ranks[1].finish_calls)
        BOOST_CHECK_EQUAL(c, 2u);
    // Both ranks remember the same identities (the next call agrees on the
    // confirm round).
    BOOST_CHECK_EQUAL(std::memcmp(node.st[0].last, node.st[1].last, sizeof node.st[0].last), 0);
}

BOOST_AUTO_TEST_CASE(bad_arguments)
{
    Node node(2);
    llrdma_peer_record_t rec = rec_ok(0);
    llrdma_peer_ops_t ops{&node.ranks[0], &Rank::s_open, &Rank::s_reduce, &Rank::s_finish};
    BOOST_CHECK_EQUAL(
        llrdma_peer_run(&node.shm[0], 0, 1, &node.st[0], &rec, &ops, 1, 0, nullptr, nullptr),
        LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(
        llrdma_peer_run(&node.shm[0], 2, 2, &node.st[0], &rec, &ops, 1, 0, nullptr, nullptr),
        LLRDMA_AR_ERR_INVALID);
    ops.finish = nullptr;
    BOOST_CHECK_EQUAL(
        llrdma_peer_run(&node.shm[0], 0, 2, &node.st[0], &rec, &ops, 1, 0, nullptr, nullptr),
        LLRDMA_AR_ERR_INVALID);
    Node small(2, 256);
    ops.finish = &Rank::s_finish;
    BOOST_CHECK_EQUAL(
        llrdma_peer_run(&small.shm[0], 0, 2, &small.st[0], &rec, &ops, 1, 0, nullptr, nullptr),
        LLRDMA_AR_ERR_INVALID);
}

// ------------------------------------------------------------- the cache

namespace
{
struct Drops {
    std::vector<std::pair<int, uintptr_t>> got;
    static void fn(void *ctx, int rank, void *v)
    {
        static_cast<Drops *>(ctx)->got.push_back({rank, reinterpret_cast<uintptr_t>(v)});
    }
};
void *val(uintptr_t v)
{
    return reinterpret_cast<void *>(v);
}
} // namespace

BOOST_AUTO_TEST_CASE(cache_invalidates_by_allocation_identity)
{
    llrdma_peer_cache_t *c = llrdma_peer_cache_new(3);
    Drops d;
    unsigned char h[LLRDMA_PEER_HANDLE_BYTES], got[LLRDMA_PEER_HANDLE_BYTES];
    std::memset(h, 0xab, sizeof h);
    void *v = nullptr;
    BOOST_CHECK_EQUAL(llrdma_peer_cache_find(c, 1, 10, &v, nullptr), 0);
    BOOST_CHECK_EQUAL(llrdma_peer_cache_add(c, 1, 10, 0x1000, 0x1000, val(1), h, Drops::fn, &d), 0);
    BOOST_CHECK_EQUAL(llrdma_peer_cache_find(c, 1, 10, &v, got), 1);
    BOOST_CHECK_EQUAL(v, val(1));
    BOOST_CHECK(std::memcmp(got, h, sizeof h) == 0);
    // Another rank's allocation at the same address is another allocation.
    BOOST_CHECK_EQUAL(
        llrdma_peer_cache_add(c, 2, 11, 0x1000, 0x1000, val(2), nullptr, Drops::fn, &d), 0);
    BOOST_CHECK(d.got.empty());
    // Rank 1 freed id 10 and got id 12 at an overlapping range: 10 is dropped.
    BOOST_CHECK_EQUAL(
        llrdma_peer_cache_add(c, 1, 12, 0x1800, 0x100, val(3), nullptr, Drops::fn, &d), 0);
    BOOST_REQUIRE_EQUAL(d.got.size(), 1u);
    BOOST_CHECK(d.got[0] == std::make_pair(1, uintptr_t(1)));
    BOOST_CHECK_EQUAL(llrdma_peer_cache_find(c, 1, 10, &v, nullptr), 0);
    BOOST_CHECK_EQUAL(llrdma_peer_cache_find(c, 2, 11, &v, nullptr), 1);
    // Adjacent, not overlapping: both stay.
    BOOST_CHECK_EQUAL(
        llrdma_peer_cache_add(c, 1, 13, 0x1900, 0x100, val(4), nullptr, Drops::fn, &d), 0);
    BOOST_CHECK_EQUAL(d.got.size(), 1u);
    // At most 3 per rank: the least recently used goes (12 was used last).
    BOOST_CHECK_EQUAL(llrdma_peer_cache_find(c, 1, 12, &v, nullptr), 1);
    BOOST_CHECK_EQUAL(
        llrdma_peer_cache_add(c, 1, 14, 0x5000, 0x100, val(5), nullptr, Drops::fn, &d), 0);
    BOOST_CHECK_EQUAL(d.got.size(), 1u);
    BOOST_CHECK_EQUAL(
        llrdma_peer_cache_add(c, 1, 15, 0x6000, 0x100, val(6), nullptr, Drops::fn, &d), 0);
    BOOST_REQUIRE_EQUAL(d.got.size(), 2u);
    BOOST_CHECK(d.got[1] == std::make_pair(1, uintptr_t(4))); // id 13, least recent
    BOOST_CHECK_EQUAL(llrdma_peer_cache_find(c, 2, 11, &v, nullptr), 1);
    BOOST_CHECK_EQUAL(llrdma_peer_cache_size(c), 4u);
    // The same id again replaces the entry.
    BOOST_CHECK_EQUAL(
        llrdma_peer_cache_add(c, 2, 11, 0x1000, 0x1000, val(7), nullptr, Drops::fn, &d), 0);
    BOOST_CHECK_EQUAL(d.got.size(), 3u);
    BOOST_CHECK_EQUAL(llrdma_peer_cache_find(c, 2, 11, &v, nullptr), 1);
    BOOST_CHECK_EQUAL(v, val(7));
    Drops all;
    llrdma_peer_cache_free(c, Drops::fn, &all);
    BOOST_CHECK_EQUAL(all.got.size(), 4u);
    llrdma_peer_cache_free(nullptr, nullptr, nullptr);
    BOOST_CHECK_EQUAL(llrdma_peer_cache_find(nullptr, 1, 1, &v, nullptr), 0);
}
