// test_allreduce_simcomm.h -- an in-process simulated communicator for the
// Allreduce core: one thread per rank, messages matched per (src, dst, tag) in
// posting order, like MPI.  Sends are eager (copied at once, complete at once) up
// to eager_limit bytes and rendezvous above it: a rendezvous send completes only
// when a receive matches it, and its data is read from the sender's buffer at
// that moment, so an algorithm that reuses a send buffer too early gets wrong
// results.  Failure injection breaks the whole world on the Nth call of one
// rank: that call fails, every pending request completes with an error and
// every later call fails, which is how a real transport error surfaces on all
// ranks.  A wait that takes longer than `timeout` is reported as a hang.
#ifndef TEST_ALLREDUCE_SIMCOMM_H
#define TEST_ALLREDUCE_SIMCOMM_H

#include "llrdma_allreduce.h"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace sim
{

constexpr int kErr = -77; // what the simulated transport returns on failure

enum FailKind { kFailIsend = 1, kFailIrecv = 2, kFailWaitall = 4, kFailAny = 7 };

struct Options {
    size_t eager_limit = 4096; // 0: every send is rendezvous
    bool single_tag = false;   // map all tags onto one (what the Open MPI glue does)
    int fail_rank = -1;        // inject on this rank ...
    long fail_at = 0;          // ... at its fail_at-th call (1-based) of kind fail_kind
    int fail_kind = kFailAny;
    std::chrono::milliseconds timeout{20000};
    size_t shm_chunk = 4096; // the shared arena every comm() carries (shm_* algorithms)
    size_t shm_lines_max = LLRDMA_AR_SHM_LINES_MAX; // llrdma_ar_shm_t.lines_max
    bool sizes = false;        // comm() offers waitall_sizes (failures carried in messages)
    bool time_phases = false;  // llrdma_ar_shm_t.time_phases on every rank
    size_t shm_share_min = 0;  // llrdma_ar_shm_t.share_min on every rank
    size_t shm_stream_min = 0; // llrdma_ar_shm_t.stream_min on every rank
};

struct Req {
    bool send = false;
    int src = 0, dst = 0, tag = 0;
    const void *sbuf = nullptr;
    void *rbuf = nullptr;
    size_t bytes = 0;
    size_t got = 0; // a receive's received bytes
    bool done = false;
    int status = 0;
    int owner = 0; // rank whose live count it holds
};

// A message not yet received: eager data, or a rendezvous send still pending.
struct Msg {
    std::vector<unsigned char> data;
    Req *rdv = nullptr;
};

class World;

struct RankCtx {
    World *w;
    int rank;
};

class World
{
  public:
    World(int n, Options o)
        : n_(n), opt_(o), cv_(n), live_(n, 0), calls_(n, 0), ctx_(n), shm_(n),
          arena_(llrdma_ar_shm_bytes(n, o.shm_chunk) / 64 + 1)
    {
        for (int r = 0; r < n; ++r) {
            ctx_[r] = RankCtx{this, r};
            shm_[r] = llrdma_ar_shm_t{};
            shm_[r].base = arena_.data();
            shm_[r].chunk_bytes = o.shm_chunk;
            shm_[r].lines_max = o.shm_lines_max;
            shm_[r].time_phases = o.time_phases ? 1 : 0;
            shm_[r].share_min = o.shm_share_min;
            shm_[r].stream_min = o.shm_stream_min;
        }
    }
    // The arena itself (a test poisons it to see what a call wrote).
    unsigned char *arena_data() { return reinterpret_cast<unsigned char *>(arena_.data()); }
    const llrdma_ar_shm_t &shm(int rank) const { return shm_[rank]; }
    llrdma_ar_shm_t &shm(int rank) { return shm_[rank]; }
    // The arena as seen by the threads: [arena_begin(), arena_end()).
    const unsigned char *arena_begin() const
    {
        return reinterpret_cast<const unsigned char *>(arena_.data());
    }
    const unsigned char *arena_end() const { return arena_begin() + arena_.size() * 64; }
    ~World()
    {
        for (auto &kv : unexpected_)
            for (Msg *m : kv.second)
                delete m;
    }

    llrdma_ar_comm_t comm(int rank)
    {
        llrdma_ar_comm_t c{};
        c.ctx = &ctx_[rank];
        c.rank = rank;
        c.size = n_;
        c.isend = &World::s_isend;
        c.irecv = &World::s_irecv;
        c.waitall = &World::s_waitall;
        c.cancel = &World::s_cancel;
        if (opt_.sizes)
            c.waitall_sizes = &World::s_waitall_sizes;
        c.shm = &shm_[rank];
        return c;
    }

    // Rounds rank `rank` ran in the arena's lines (llrdma_ar_shm_t.line_rounds).
    uint64_t line_rounds(int rank) const { return shm_[rank].line_rounds; }
    int live(int rank)
    {
        std::lock_guard<std::mutex> g(m_);
        return live_[rank];
    }
    bool quiescent() // no message or receive left anywhere
    {
        std::lock_guard<std::mutex> g(m_);
        for (auto &kv : unexpected_)
            if (!kv.second.empty())
                return false;
        for (auto &kv : posted_)
            if (!kv.second.empty())
                return false;
        return true;
    }
    bool broken()
    {
        std::lock_guard<std::mutex> g(m_);
        return broken_;
    }
    bool fired()
    {
        std::lock_guard<std::mutex> g(m_);
        return fired_;
    }
    size_t max_sent() // the largest message any rank sent
    {
        std::lock_guard<std::mutex> g(m_);
        return max_sent_;
    }
    std::vector<std::string> problems()
    {
        std::lock_guard<std::mutex> g(m_);
        return problems_;
    }

  private:
    using Key = std::tuple<int, int, int>;

    static World *of(void *ctx, int *rank)
    {
        RankCtx *c = static_cast<RankCtx *>(ctx);
        *rank = c->rank;
        return c->w;
    }
    static int s_isend(void *ctx, const void *buf, size_t bytes, int peer, int tag, void **req)
    {
        int r;
        World *w = of(ctx, &r);
        return w->post(true, r, peer, tag, const_cast<void *>(buf), bytes, req);
    }
    static int s_irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req)
    {
        int r;
        World *w = of(ctx, &r);
        return w->post(false, r, peer, tag, buf, bytes, req);
    }
    static int s_waitall(void *ctx, int n, void **reqs)
    {
        int r;
        World *w = of(ctx, &r);
        return w->waitall(r, n, reqs);
    }
    static int s_waitall_sizes(void *ctx, int n, void **reqs, size_t *bytes)
    {
        int r;
        World *w = of(ctx, &r);
        return w->waitall(r, n, reqs, bytes);
    }
    static int s_cancel(void *ctx, void *req)
    {
        int r;
        World *w = of(ctx, &r);
        return w->cancel(static_cast<Req *>(req));
    }

    void problem(const std::string &s) { problems_.push_back(s); }

    // Caller holds m_.  Returns true when this call must fail.
    bool inject(int rank, int kind)
    {
        if (rank != opt_.fail_rank || !(opt_.fail_kind & kind))
            return false;
        if (++calls_[rank] != opt_.fail_at)
            return false;
        fired_ = true;
        break_world();
        return true;
    }

    // Wakes only the owner: one condition variable per rank keeps 16 threads
    // from all waking on every message.
    void complete(Req *q, int status)
    {
        q->done = true;
        q->status = status;
        cv_[q->owner].notify_one();
    }

    void break_world()
    {
        broken_ = true;
        for (auto &kv : posted_)
            for (Req *q : kv.second)
                complete(q, kErr);
        posted_.clear();
        for (auto &kv : unexpected_)
            for (Msg *m : kv.second) {
                if (m->rdv)
                    complete(m->rdv, kErr);
                delete m;
            }
        unexpected_.clear();
        for (auto &cv : cv_)
            cv.notify_all();
    }

    void deliver(Req *recv, const void *data, size_t bytes)
    {
        if (bytes == 0 && opt_.sizes) { // an empty message: its sender failed
            recv->got = 0;
            complete(recv, 0);
            return;
        }
        if (bytes != recv->bytes) {
            problem("size mismatch " + std::to_string(recv->src) + "->" +
                    std::to_string(recv->dst) + " tag " + std::to_string(recv->tag) + ": sent " +
                    std::to_string(bytes) + " expected " + std::to_string(recv->bytes));
            complete(recv, kErr);
            return;
        }
        std::memcpy(recv->rbuf, data, bytes);
        recv->got = bytes;
        complete(recv, 0);
    }

    int post(bool send, int rank, int peer, int tag, void *buf, size_t bytes, void **out)
    {
        std::lock_guard<std::mutex> g(m_);
        *out = nullptr;
        if (inject(rank, send ? kFailIsend : kFailIrecv) || broken_)
            return kErr;
        if (send && bytes > max_sent_)
            max_sent_ = bytes;
        // Empty sends only with waitall_sizes (a failure carried in messages).
        if (peer < 0 || peer >= n_ || peer == rank || tag < 0 || tag >= LLRDMA_AR_TAG_MAX ||
            (bytes == 0 && !(send && opt_.sizes)) || !buf) {
            problem("bad call from rank " + std::to_string(rank) + ": peer " +
                    std::to_string(peer) + " tag " + std::to_string(tag) + " bytes " +
                    std::to_string(bytes));
            return kErr;
        }
        Req *q = new Req;
        q->send = send;
        q->src = send ? rank : peer;
        q->dst = send ? peer : rank;
        q->tag = opt_.single_tag ? 0 : tag;
        q->bytes = bytes;
        q->owner = rank;
        if (send)
            q->sbuf = buf;
        else
            q->rbuf = buf;
        ++live_[rank];
        Key k{q->src, q->dst, q->tag};
        if (send) {
            auto &pq = posted_[k];
            if (!pq.empty()) {
                Req *recv = pq.front();
                pq.pop_front();
                deliver(recv, buf, bytes);
                complete(q, 0);
            } else {
                Msg *m = new Msg;
                if (bytes <= opt_.eager_limit) {
                    m->data.assign(static_cast<unsigned char *>(buf),
                                   static_cast<unsigned char *>(buf) + bytes);
                    complete(q, 0);
                } else {
                    m->rdv = q;
                }
                unexpected_[k].push_back(m);
            }
        } else {
            auto &uq = unexpected_[k];
            if (!uq.empty()) {
                Msg *m = uq.front();
                uq.pop_front();
                if (m->rdv) {
                    deliver(q, m->rdv->sbuf, m->rdv->bytes);
                    complete(m->rdv, 0);
                } else {
                    deliver(q, m->data.data(), m->data.size());
                }
                delete m;
            } else {
                posted_[k].push_back(q);
            }
        }
        *out = q;
        return 0;
    }

    int waitall(int rank, int n, void **reqs, size_t *sizes = nullptr)
    {
        std::unique_lock<std::mutex> g(m_);
        int rc = inject(rank, kFailWaitall) ? kErr : 0;
        auto all_done = [&] {
            for (int i = 0; i < n; ++i)
                if (!static_cast<Req *>(reqs[i])->done)
                    return false;
            return true;
        };
        if (!cv_[rank].wait_for(g, opt_.timeout, all_done)) {
            problem("rank " + std::to_string(rank) + " hung in waitall");
            break_world();
        }
        for (int i = 0; i < n; ++i) {
            Req *q = static_cast<Req *>(reqs[i]);
            if (q->owner != rank)
                problem("rank " + std::to_string(rank) + " waited a foreign request");
            if (q->status != 0 && rc == 0)
                rc = q->status;
            if (sizes)
                sizes[i] = q->got;
            --live_[q->owner];
            delete q;
            reqs[i] = nullptr;
        }
        return rc;
    }

    int cancel(Req *q)
    {
        std::lock_guard<std::mutex> g(m_);
        if (q->done)
            return 0;
        Key k{q->src, q->dst, q->tag};
        if (!q->send) {
            auto &pq = posted_[k];
            for (auto it = pq.begin(); it != pq.end(); ++it)
                if (*it == q) {
                    pq.erase(it);
                    break;
                }
        } else {
            auto &uq = unexpected_[k];
            for (auto it = uq.begin(); it != uq.end(); ++it)
                if ((*it)->rdv == q) {
                    delete *it;
                    uq.erase(it);
                    break;
                }
        }
        complete(q, 0); // cancelled: completes without error, like MPI
        return 0;
    }

    int n_;
    Options opt_;
    std::mutex m_;
    std::vector<std::condition_variable> cv_;
    std::map<Key, std::deque<Msg *>> unexpected_;
    std::map<Key, std::deque<Req *>> posted_;
    std::vector<int> live_;
    std::vector<long> calls_;
    std::vector<RankCtx> ctx_;
    struct alignas(64) Line {
        unsigned char b[64];
    };
    std::vector<llrdma_ar_shm_t> shm_;
    std::vector<Line> arena_; // zero-filled, 64-byte aligned
    std::vector<std::string> problems_;
    bool broken_ = false;
    size_t max_sent_ = 0;
    bool fired_ = false;
};

// The verdict of one fault-injection run: no rank reported a problem, the world
// is consistent, and either the rank the fault was aimed at failed with a
// transport error (the injection fired) or every rank succeeded.  Returns
// whether it fired.
inline bool check_injected_run(World &w, const std::string &ctx, int frank,
                               const std::vector<int> &rcs, const std::vector<std::string> &errs)
{
    for (size_t r = 0; r < errs.size(); ++r)
        BOOST_CHECK_MESSAGE(errs[r].empty(), ctx << ": rank " << r << ": " << errs[r]);
    for (const std::string &s : w.problems())
        BOOST_ERROR(ctx << ": " << s);
    if (w.fired()) {
        BOOST_CHECK_MESSAGE(rcs[frank] == LLRDMA_AR_ERR_TRANSPORT, ctx);
        return true;
    }
    for (size_t r = 0; r < rcs.size(); ++r)
        BOOST_CHECK_MESSAGE(rcs[r] == 0, ctx);
    return false;
}

} // namespace sim

#endif
