// The hierarchical Allreduce (hier.cc) on simulated communicators spanning
// simulated nodes: one thread per rank, messages through test_allreduce_simcomm.h,
// one arena per node (shared by that node's threads only).  Regular and
// irregular layouts (2+2, 3+1, 2+2+1, one rank per node, interleaved and
// permuted ranks), every op x datatype, awkward counts, tiny chunks (many
// rounds), forced inter-node algorithms, segments and windows, back-to-back
// calls; results bitwise against the documented order (node partials in
// rank order, then the inter-node algorithm's order per slice) and close to a
// sequential reference.  Transport failures: nothing hangs, nothing is left.
#define BOOST_TEST_MODULE test_allreduce_sim_hier
#include <boost/test/unit_test.hpp>

#include "llrdma_allreduce.h"
#include "test_allreduce_devheap.h"
#include "test_allreduce_ref.h"
#include "test_allreduce_simcomm.h"

#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace
{

using namespace simref;

// A communicator's node layout: key[r] = node of rank r (any values).
struct Layout {
    std::string name;
    std::vector<int> key;
};

std::vector<int> blocks(std::initializer_list<int> sizes)
{
    std::vector<int> k;
    int node = 0;
    for (int s : sizes) {
        for (int i = 0; i < s; ++i)
            k.push_back(node);
        ++node;
    }
    return k;
}

std::vector<Layout> layouts()
{
    return {
        {"2+2", blocks({2, 2})},           {"3+1", blocks({3, 1})},
        {"1+3", blocks({1, 3})},           {"2+2+1", blocks({2, 2, 1})},
        {"1+1+1", blocks({1, 1, 1})},      {"4+4", blocks({4, 4})},
        {"3+3+2", blocks({3, 3, 2})},      {"2+2+2+2", blocks({2, 2, 2, 2})},
        {"interleaved 2+2", {0, 1, 0, 1}}, {"permuted 3+2+2", {2, 0, 1, 0, 2, 1, 0}},
    };
}

// The layout of that name (a test naming one that does not exist fails).
Layout layout_named(const std::string &name)
{
    for (const Layout &x : layouts())
        if (x.name == name)
            return x;
    BOOST_FAIL("no layout " << name);
    return {};
}

// Per-rank layout and per-node arenas for one World.
class Nodes
{
  public:
    Nodes(const std::vector<int> &key, size_t chunk) : p_(static_cast<int>(key.size()))
    {
        me_.resize(p_);
        peers_.assign(p_, std::vector<int>(p_, -1));
        shm_.resize(p_);
        // No Boost assertion here: run_world builds its Nodes on threads of its own, and
        // Boost.Test is not thread-safe.  The callers check ok().
        for (int r = 0; r < p_; ++r)
            if (llrdma_ar_layout(p_, key.data(), r, &topo_, &me_[r], peers_[r].data(), p_) !=
                LLRDMA_AR_OK) {
                ok_ = false;
                return;
            }
        arenas_.resize(topo_.nnodes);
        for (int r = 0; r < p_; ++r) {
            const llrdma_ar_hier_t &h = me_[r];
            if (h.local_size == 1)
                continue;
            auto &a = arenas_[h.node];
            if (a.empty())
                a.resize(llrdma_ar_shm_bytes(h.local_size, chunk) / 64 + 1);
            shm_[r].base = a.data();
            shm_[r].chunk_bytes = chunk;
        }
    }
    void attach(llrdma_ar_comm_t &c, int r)
    {
        c.hier = &me_[r];
        c.shm = me_[r].local_size > 1 ? &shm_[r] : nullptr;
    }
    bool ok() const { return ok_; }
    const llrdma_ar_topo_t &topo() const { return topo_; }
    const llrdma_ar_hier_t &me(int r) const { return me_[r]; }
    // Rank r's node arena (empty for a node of one rank).
    std::pair<const unsigned char *, const unsigned char *> arena_of(int r) const
    {
        const auto &a = arenas_[me_[r].node];
        auto b = reinterpret_cast<const unsigned char *>(a.data());
        return {b, b + a.size() * sizeof(Line)};
    }

  private:
    struct alignas(64) Line {
        unsigned char b[64];
    };
    int p_;
    llrdma_ar_topo_t topo_{};
    std::vector<llrdma_ar_hier_t> me_;
    std::vector<std::vector<int>> peers_;
    std::vector<llrdma_ar_shm_t> shm_;
    std::vector<std::vector<Line>> arenas_;
    bool ok_ = true;
};

struct Case {
    Combo c;
    size_t count;
    int inplace; // 0 separate, 1 sendbuf NULL, 2 sendbuf == recvbuf
    llrdma_ar_plan_t plan;
    uint64_t seed;
    Bytes exact, seq;
};

// The documented order: node partials (ranks of the node in rank order, left
// fold), then per slice the inter-node algorithm's order over the nodes.
Bytes hier_order(const Combo &c, const std::vector<Bytes> &in, const std::vector<int> &key,
                 size_t count, const llrdma_ar_plan_t &plan)
{
    int p = static_cast<int>(in.size());
    llrdma_ar_topo_t topo;
    llrdma_ar_hier_t h;
    std::vector<int> peers(p);
    llrdma_ar_layout(p, key.data(), 0, &topo, &h, peers.data(), p);
    std::vector<Bytes> partial(topo.nnodes);
    std::vector<int> node_of(p);
    for (int r = 0; r < p; ++r) {
        llrdma_ar_hier_t hr;
        llrdma_ar_layout(p, key.data(), r, &topo, &hr, peers.data(), p);
        node_of[r] = hr.node;
    }
    for (int r = 0; r < p; ++r) {
        Bytes &acc = partial[node_of[r]];
        if (acc.empty())
            acc = in[r];
        else
            fold_into(c, acc, in[r], 0, count);
    }
    size_t es = llrdma_ar_dtype_size(c.dt);
    Bytes out(count * es);
    size_t U = static_cast<size_t>(plan.slices);
    for (size_t j = 0; j < U; ++j) {
        size_t s = j * (count / U) + std::min(j, count % U), n = count / U + (j < count % U);
        std::vector<Bytes> sl;
        for (const Bytes &pk : partial)
            sl.emplace_back(pk.begin() + s * es, pk.begin() + (s + n) * es);
        Bytes r = sl.size() == 1                     ? sl[0]
                  : plan.inter_alg == LLRDMA_AR_RING ? ring_order(c, sl, n)
                                                     : tree_order(c, sl, n);
        std::copy(r.begin(), r.end(), out.begin() + s * es);
    }
    return out;
}

llrdma_ar_plan_t hier_plan(int inter, int slices, int nodes, size_t seg, int window)
{
    llrdma_ar_plan_t p{};
    p.alg = LLRDMA_AR_HIER;
    p.segment_bytes = seg;
    p.nsegments_in_flight = window;
    p.why = "test";
    p.inter_alg = inter;
    p.inter_why = "test";
    p.slices = slices;
    p.nodes = nodes;
    return p;
}

void prepare(Case &k, const std::vector<int> &key)
{
    int p = static_cast<int>(key.size());
    std::vector<Bytes> in;
    for (int r = 0; r < p; ++r)
        in.push_back(input(k.c, k.seed, r, p, k.count));
    k.exact = hier_order(k.c, in, key, k.count, k.plan);
    k.seq = sequential(k.c, in, k.count);
}

std::string describe(const Case &k, const std::string &layout, size_t chunk)
{
    std::ostringstream s;
    s << layout << " chunk=" << chunk << " count=" << k.count << " " << llrdma_ar_dtype_name(k.c.dt)
      << " " << llrdma_ar_op_name(k.c.op) << " inplace=" << k.inplace
      << " inter=" << llrdma_ar_alg_name(k.plan.inter_alg) << " slices=" << k.plan.slices
      << " seg=" << k.plan.segment_bytes << " window=" << k.plan.nsegments_in_flight;
    return s.str();
}

std::string run_rank(sim::World &w, Nodes &nodes, int r, int p, const Case &k)
{
    llrdma_ar_comm_t comm = w.comm(r);
    nodes.attach(comm, r);
    size_t es = llrdma_ar_dtype_size(k.c.dt);
    Bytes send = input(k.c, k.seed, r, p, k.count), orig = send;
    Bytes recv = k.inplace ? send : Bytes(send.size(), 0xA5);
    const void *sb = k.inplace == 1 ? nullptr : k.inplace == 2 ? recv.data() : send.data();
    // Caller scratch of exactly the advertised size on odd ranks, core's on even.
    Bytes scratch(r % 2 ? llrdma_ar_scratch_bytes(&k.plan, k.count, k.c.dt, p) : 0);
    int rc = llrdma_ar_run(&k.plan, &comm, sb, recv.data(), k.count, k.c.dt, k.c.op,
                           scratch.empty() ? nullptr : scratch.data(), scratch.size());
    std::ostringstream e;
    if (rc != LLRDMA_AR_OK)
        e << "rc " << rc;
    else if (w.live(r) != 0)
        e << w.live(r) << " requests left";
    else if (!k.inplace && send != orig)
        e << "sendbuf modified";
    for (size_t i = 0; e.str().empty() && i < k.count; ++i) {
        const unsigned char *got = &recv[i * es];
        if (!same(k.c.dt, got, &k.exact[i * es]))
            e << "element " << i << " differs from the documented order";
        else if (is_float(k.c.dt) ? !close(k.c.dt, got, &k.seq[i * es])
                                  : !same(k.c.dt, got, &k.seq[i * es]))
            e << "element " << i << " differs from the sequential reference";
    }
    return e.str().empty() ? "" : "rank " + std::to_string(r) + ": " + e.str();
}

std::vector<std::string> run_world(const Layout &l, size_t chunk, const std::vector<Case> &cases,
                                   sim::Options opt)
{
    int p = static_cast<int>(l.key.size());
    sim::World w(p, opt);
    Nodes nodes(l.key, chunk);
    if (!nodes.ok())
        return {l.name + ": llrdma_ar_layout failed"};
    std::vector<std::string> errs;
    std::mutex em;
    std::vector<std::thread> th;
    for (int r = 0; r < p; ++r)
        th.emplace_back([&, r] {
            for (const Case &k : cases) {
                std::string s = run_rank(w, nodes, r, p, k);
                if (!s.empty()) {
                    std::lock_guard<std::mutex> g(em);
                    errs.push_back(describe(k, l.name, chunk) + ": " + s);
                }
            }
        });
    for (auto &t : th)
        t.join();
    if (!w.quiescent())
        errs.push_back(l.name + ": unmatched messages left");
    for (const std::string &s : w.problems())
        errs.push_back(l.name + ": " + s);
    return errs;
}

void report(const std::vector<std::string> &errs)
{
    for (size_t i = 0; i < errs.size() && i < 10; ++i)
        BOOST_ERROR(errs[i]);
    BOOST_CHECK_MESSAGE(errs.empty(), errs.size() << " failures");
}

const int kInter[] = {LLRDMA_AR_RECURSIVE_DOUBLING, LLRDMA_AR_RABENSEIFNER, LLRDMA_AR_RING};

} // namespace

BOOST_AUTO_TEST_CASE(every_layout_every_slice_count)
{
    // Per layout: every inter-node algorithm x every slice count the layout
    // allows x awkward counts, rotating through op x dtype, in-place modes,
    // segments and windows; chunks of 64 bytes (one element per piece for the
    // 16-byte types: many rounds) and 4K, all calls back to back.
    static const std::vector<Combo> combos = all_combos();
    size_t rot = 0;
    for (const Layout &l : layouts()) {
        int p = static_cast<int>(l.key.size());
        Nodes probe(l.key, 64);
        BOOST_REQUIRE(probe.ok());
        const llrdma_ar_topo_t t = probe.topo();
        for (size_t chunk : {size_t(64), size_t(4096)}) {
            std::vector<Case> cases;
            for (int inter : kInter)
                for (int u = 1; u <= t.min_local; ++u)
                    for (size_t n : {size_t(1), size_t(u), size_t(u + 1), size_t(p + 2),
                                     size_t(1000), size_t(4097)}) {
                        if (n < static_cast<size_t>(u))
                            continue;
                        size_t i = rot++;
                        Combo c = combos[i % combos.size()];
                        size_t es = llrdma_ar_dtype_size(c.dt);
                        size_t seg = (i % 3 == 0 ? 1 : i % 3 == 1 ? 5 : 512) * es;
                        Case k{c,
                               n,
                               static_cast<int>(i % 3),
                               hier_plan(inter, u, t.nnodes, seg, 1 + static_cast<int>(i % 4)),
                               mix(i),
                               {},
                               {}};
                        prepare(k, l.key);
                        cases.push_back(k);
                    }
            sim::Options opt;
            opt.eager_limit = rot % 2 ? 0 : 4096; // rendezvous or eager
            opt.single_tag = true;                // what the Open MPI glue does
            report(run_world(l, chunk, cases, opt));
        }
    }
}

BOOST_AUTO_TEST_CASE(every_op_and_dtype)
{
    for (const char *name : {"3+1", "2+2+1"}) {
        Layout l = layout_named(name);
        Nodes probe(l.key, 64);
        BOOST_REQUIRE(probe.ok());
        std::vector<Case> cases;
        size_t i = 0;
        for (int inter : kInter)
            for (const Combo &c : all_combos()) {
                Case k{c,
                       37,
                       static_cast<int>(i % 3),
                       hier_plan(inter, probe.topo().min_local, probe.topo().nnodes,
                                 3 * llrdma_ar_dtype_size(c.dt), 2),
                       mix(500 + i++),
                       {},
                       {}};
                prepare(k, l.key);
                cases.push_back(k);
            }
        report(run_world(l, 256, cases, sim::Options{}));
    }
}

BOOST_AUTO_TEST_CASE(planned_calls_large_vectors)
{
    // The planner's own plans (hints 0, 8K, 64K), ~1 MB vectors, 2 ranks per
    // node: both slices busy, the ring's segment from the hint.
    Layout l{"2+2+2", blocks({2, 2, 2})};
    Nodes probe(l.key, 4096);
    BOOST_REQUIRE(probe.ok());
    llrdma_ar_topo_t t = probe.topo();
    t.arenas = 1;
    std::vector<Case> cases;
    for (uint64_t hint : {uint64_t(0), uint64_t(8192), uint64_t(65536)})
        for (size_t n : {size_t(3), size_t(1000), size_t(131075)}) {
            Case k{{LLRDMA_DT_DOUBLE, LLRDMA_OP_SUM}, n, 0, {}, mix(hint + n), {}, {}};
            BOOST_REQUIRE(llrdma_ar_plan_hier(n * 8, 8, &t, hint, 0, LLRDMA_AR_AUTO, 0, &k.plan) ==
                          LLRDMA_AR_OK);
            prepare(k, l.key);
            cases.push_back(k);
        }
    report(run_world(l, 4096, cases, sim::Options{}));
}

BOOST_AUTO_TEST_CASE(largest_inter_node_message)
{
    // llrdma_ar_hier_msg_max (the glue's PML-or-put choice per call) against
    // the largest message the simulated inter-node step really sends, for the
    // planner's plans and forced algorithms, on powers of two of nodes and not.
    for (const Layout &l :
         {Layout{"2+2", blocks({2, 2})}, Layout{"2+2+2", blocks({2, 2, 2})},
          Layout{"2+2+2+2", blocks({2, 2, 2, 2})}, Layout{"3+1+2", blocks({3, 1, 2})}}) {
        Nodes probe(l.key, 4096);
        BOOST_REQUIRE(probe.ok());
        llrdma_ar_topo_t t = probe.topo();
        t.arenas = 1;
        for (int forced : {int(LLRDMA_AR_AUTO), int(LLRDMA_AR_RECURSIVE_DOUBLING),
                           int(LLRDMA_AR_RABENSEIFNER), int(LLRDMA_AR_RING)})
            for (uint64_t hint : {uint64_t(0), uint64_t(65536)})
                for (size_t n : {size_t(1), size_t(1001), size_t(20001), size_t(70001)}) {
                    Case k{{LLRDMA_DT_DOUBLE, LLRDMA_OP_SUM}, n, 0, {}, mix(hint + n), {}, {}};
                    BOOST_REQUIRE(llrdma_ar_plan_hier(n * 8, 8, &t, hint, 0, forced, 0, &k.plan) ==
                                  LLRDMA_AR_OK);
                    prepare(k, l.key);
                    int p = static_cast<int>(l.key.size());
                    sim::World w(p, sim::Options{});
                    Nodes nodes(l.key, 4096);
                    BOOST_REQUIRE(nodes.ok());
                    std::vector<std::string> errs(static_cast<size_t>(p));
                    std::vector<std::thread> th;
                    for (int r = 0; r < p; ++r)
                        th.emplace_back([&, r] { errs[r] = run_rank(w, nodes, r, p, k); });
                    for (auto &x : th)
                        x.join();
                    for (const std::string &e : errs)
                        BOOST_CHECK_MESSAGE(e.empty(), describe(k, l.name, 4096) << ": " << e);
                    BOOST_CHECK_MESSAGE(w.max_sent() == llrdma_ar_hier_msg_max(&k.plan, n, 8),
                                        describe(k, l.name, 4096)
                                            << ": sent at most " << w.max_sent()
                                            << " bytes, llrdma_ar_hier_msg_max says "
                                            << llrdma_ar_hier_msg_max(&k.plan, n, 8));
                }
    }
    // Not a hierarchical plan, or one node: no inter-node message.
    llrdma_ar_plan_t flat;
    BOOST_REQUIRE(llrdma_ar_plan(1 << 20, 8, 4, 0, 0, 0, &flat) == LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(llrdma_ar_hier_msg_max(&flat, 1 << 17, 8), 0u);
    BOOST_CHECK_EQUAL(llrdma_ar_hier_msg_max(nullptr, 1 << 17, 8), 0u);
}

BOOST_AUTO_TEST_CASE(two_communicators_at_once)
{
    // Two hierarchical communicators (e.g. the halves of a split) at the same time.
    std::vector<std::string> ea, eb;
    Layout a{"3+1", blocks({3, 1})}, b{"2+2+1", blocks({2, 2, 1})};
    std::vector<Case> ca, cb;
    for (int inter : kInter) {
        Case k{{LLRDMA_DT_INT64, LLRDMA_OP_SUM}, 333, 0, hier_plan(inter, 1, 2, 64, 3), 1, {}, {}};
        prepare(k, a.key);
        ca.push_back(k);
        Case m{{LLRDMA_DT_DOUBLE, LLRDMA_OP_MAX}, 333, 1, hier_plan(inter, 1, 3, 64, 2), 2, {}, {}};
        prepare(m, b.key);
        cb.push_back(m);
    }
    std::thread ta([&] { ea = run_world(a, 128, ca, sim::Options{}); });
    std::thread tb([&] { eb = run_world(b, 128, cb, sim::Options{}); });
    ta.join();
    tb.join();
    report(ea);
    report(eb);
}

BOOST_AUTO_TEST_CASE(transport_failure_ends_every_rank)
{
    // Break the transport at many points of the inter-node step: no rank may
    // hang (ranks of the failing holder's node wait in the arena), leave a
    // request, or report success with a wrong result; the failing rank sees
    // the error.
    Combo c{LLRDMA_DT_DOUBLE, LLRDMA_OP_SUM};
    int fired = 0, runs = 0;
    for (const char *name : {"2+2", "3+1", "2+2+1"})
        for (int inter : kInter) {
            Layout l = layout_named(name);
            int p = static_cast<int>(l.key.size());
            Nodes probe(l.key, 256);
            BOOST_REQUIRE(probe.ok());
            Case k{c, 1000, 0, hier_plan(inter, probe.topo().min_local, probe.topo().nnodes, 64, 3),
                   5, {},   {}};
            prepare(k, l.key);
            for (int frank : {0, p - 1})
                for (int kind : {sim::kFailIsend, sim::kFailIrecv, sim::kFailWaitall})
                    for (long at : {1L, 2L, 5L, 17L, 100000L}) {
                        sim::Options opt;
                        opt.eager_limit = at % 2 ? 0 : 4096;
                        opt.fail_rank = frank;
                        opt.fail_at = at;
                        opt.fail_kind = kind;
                        opt.timeout = std::chrono::milliseconds(5000);
                        sim::World w(p, opt);
                        Nodes nodes(l.key, 256);
                        BOOST_REQUIRE(nodes.ok());
                        std::vector<int> rcs(p);
                        std::vector<std::string> errs(p);
                        std::vector<std::thread> th;
                        for (int r = 0; r < p; ++r)
                            th.emplace_back([&, r] {
                                llrdma_ar_comm_t comm = w.comm(r);
                                nodes.attach(comm, r);
                                Bytes buf = input(c, k.seed, r, p, k.count);
                                rcs[r] = llrdma_ar_run(&k.plan, &comm, nullptr, buf.data(), k.count,
                                                       c.dt, c.op, nullptr, 0);
                                if (w.live(r) != 0)
                                    errs[r] = "requests left";
                                else if (rcs[r] == 0 &&
                                         !std::equal(buf.begin(), buf.end(), k.exact.begin()))
                                    errs[r] = "wrong result reported as success";
                                else if (rcs[r] != 0 && rcs[r] != LLRDMA_AR_ERR_TRANSPORT)
                                    errs[r] = "unexpected rc " + std::to_string(rcs[r]);
                            });
                        for (auto &t : th)
                            t.join();
                        ++runs;
                        std::string ctx = describe(k, l.name, 256) + " fail rank " +
                                          std::to_string(frank) + " kind " + std::to_string(kind) +
                                          " at " + std::to_string(at);
                        if (sim::check_injected_run(w, ctx, frank, rcs, errs))
                            ++fired;
                    }
        }
    BOOST_TEST_MESSAGE(fired << " of " << runs << " runs injected a failure");
    BOOST_CHECK(fired > runs / 3);
}

BOOST_AUTO_TEST_CASE(argument_checks)
{
    Layout l{"2+2", blocks({2, 2})};
    sim::World w(4, sim::Options{});
    Nodes nodes(l.key, 256);
    BOOST_REQUIRE(nodes.ok());
    llrdma_ar_comm_t comm = w.comm(0);
    nodes.attach(comm, 0);
    double x[8] = {}, y[8];
    auto run = [&](const llrdma_ar_plan_t &p, const llrdma_ar_comm_t &c) {
        return llrdma_ar_run(&p, &c, x, y, 8, LLRDMA_DT_DOUBLE, LLRDMA_OP_SUM, nullptr, 0);
    };
    llrdma_ar_plan_t good = hier_plan(LLRDMA_AR_RING, 2, 2, 64, 2);
    llrdma_ar_comm_t no_hier = comm;
    no_hier.hier = nullptr;
    BOOST_CHECK_EQUAL(run(good, no_hier), LLRDMA_AR_ERR_INVALID);
    llrdma_ar_comm_t no_arena = comm;
    no_arena.shm = nullptr;
    BOOST_CHECK_EQUAL(run(good, no_arena), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(run(hier_plan(LLRDMA_AR_RING, 3, 2, 64, 2), comm), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(run(hier_plan(LLRDMA_AR_RING, 2, 3, 64, 2), comm), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(run(hier_plan(LLRDMA_AR_SHM_SPLIT, 2, 2, 64, 2), comm),
                      LLRDMA_AR_ERR_INVALID);
    // Hooks (device vectors) without device scratch: the core may not use host memory.
    llrdma_ar_comm_t hooked = comm;
    hooked.copy = [](void *, void *, const void *, size_t) { return 0; };
    hooked.reduce = [](void *, int, int, const void *, const void *, void *, size_t) { return 0; };
    BOOST_CHECK_EQUAL(run(good, hooked), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK(w.quiescent());
}

BOOST_AUTO_TEST_CASE(a_failure_before_the_call_reaches_every_node)
{
    // One rank could not stage its input (llrdma_ar_comm_t.failed): its
    // node's arena ends the node's ranks, and its node's holders still run
    // the inter-node step with empty messages, so every rank of every node
    // fails the call -- none waits for a message that never comes (the sim
    // reports a wait past its timeout as a hang) and none is left over.
    Combo c{LLRDMA_DT_DOUBLE, LLRDMA_OP_SUM};
    int runs = 0;
    for (const char *name : {"2+2", "3+1", "1+3", "2+2+1", "1+1+1", "permuted 3+2+2"})
        for (int inter : kInter) {
            Layout l = layout_named(name);
            int p = static_cast<int>(l.key.size());
            Nodes probe(l.key, 256);
            BOOST_REQUIRE(probe.ok());
            Case k{c, 1000, 0, hier_plan(inter, probe.topo().min_local, probe.topo().nnodes, 64, 3),
                   5, {},   {}};
            prepare(k, l.key);
            for (int frank : {0, p / 2, p - 1}) {
                sim::Options opt;
                opt.sizes = true;
                opt.timeout = std::chrono::milliseconds(3000);
                sim::World w(p, opt);
                Nodes nodes(l.key, 256);
                BOOST_REQUIRE(nodes.ok());
                std::vector<int> rcs(p);
                std::vector<std::thread> th;
                for (int r = 0; r < p; ++r)
                    th.emplace_back([&, r] {
                        llrdma_ar_comm_t comm = w.comm(r);
                        nodes.attach(comm, r);
                        comm.failed = r == frank;
                        Bytes buf = input(c, k.seed, r, p, k.count);
                        rcs[r] = llrdma_ar_run(&k.plan, &comm, nullptr, buf.data(), k.count, c.dt,
                                               c.op, nullptr, 0);
                    });
                for (auto &t : th)
                    t.join();
                ++runs;
                std::string ctx = describe(k, l.name, 256) + " rank " + std::to_string(frank) +
                                  " failed before the call";
                for (const std::string &s : w.problems())
                    BOOST_ERROR(ctx << ": " << s);
                for (int r = 0; r < p; ++r) {
                    BOOST_CHECK_MESSAGE(rcs[r] != LLRDMA_AR_OK,
                                        ctx << ": rank " << r << " succeeded");
                    BOOST_CHECK_MESSAGE(w.live(r) == 0, ctx << ": rank " << r << " left requests");
                }
                BOOST_CHECK_MESSAGE(rcs[frank] == LLRDMA_AR_ERR_MEMORY, ctx);
            }
        }
    BOOST_TEST_MESSAGE(runs << " runs");
}

namespace
{

// One rank of a GPU-direct run: its vectors and scratch in fake device
// memory (a CPU access faults), hooks that queue like a stream, and the NIC
// model of test_allreduce_devheap.h (device memory only, one registration
// per allocation).  The vectors and the scratch are allocated once and used
// by every call, as an application reuses its buffers.
struct DevRank {
    devsim::Hooked h;
    void *recv = nullptr, *send = nullptr, *scratch = nullptr;
    size_t scratch_bytes = 0;

    // Rank r of w: queued hooks, the NIC model, its node's arena addressable,
    // vectors of vec bytes and scratch of scr (odd offsets: no alignment).
    void setup(sim::World &w, const Nodes &nodes, devsim::DeviceHeap &heap, int r, size_t vec,
               size_t scr)
    {
        h.inner = w.comm(r);
        h.heap = &heap;
        h.deferred = true;
        h.nic = true;
        auto ar = nodes.arena_of(r);
        h.host_lo = ar.first;
        h.host_hi = ar.second;
        recv = heap.alloc(vec, static_cast<size_t>(r % 3));
        send = heap.alloc(vec, 1);
        scratch_bytes = scr;
        scratch = scr ? heap.alloc(scr, 5) : nullptr;
    }
};

std::string run_rank_device(sim::World &w, Nodes &nodes, DevRank &d, int r, int p, const Case &k,
                            int device_fold)
{
    llrdma_ar_comm_t comm = d.h.comm(false);
    nodes.attach(comm, r);
    if (comm.shm) {
        comm.shm->device_fold = device_fold;
        comm.shm->device_fold_min = device_fold ? 16 : 0;
    }
    size_t es = llrdma_ar_dtype_size(k.c.dt), bytes = k.count * es;
    Bytes in = input(k.c, k.seed, r, p, k.count);
    std::memcpy(d.h.heap->real(k.inplace ? d.recv : d.send, bytes), in.data(), bytes);
    if (!k.inplace)
        std::memset(d.h.heap->real(d.recv, bytes), 0xA5, bytes);
    const void *sb = k.inplace == 1 ? nullptr : k.inplace == 2 ? d.recv : d.send;
    size_t need = llrdma_ar_scratch_bytes(&k.plan, k.count, k.c.dt, p);
    std::ostringstream e;
    if (need > d.scratch_bytes)
        e << "scratch of " << need << " bytes, " << d.scratch_bytes << " allocated";
    int rc = e.str().empty() ? llrdma_ar_run(&k.plan, &comm, sb, d.recv, k.count, k.c.dt, k.c.op,
                                             need ? d.scratch : nullptr, need ? need : 0)
                             : 0;
    if (!d.h.flush()) // the end of the call waits for the stream
        e << "a queued operation failed";
    if (rc != LLRDMA_AR_OK)
        e << "rc " << rc;
    else if (w.live(r) != 0)
        e << w.live(r) << " requests left";
    else if (!k.inplace && std::memcmp(d.h.heap->real(d.send, bytes), in.data(), bytes) != 0)
        e << "sendbuf modified";
    const unsigned char *got = d.h.heap->real(d.recv, bytes);
    for (size_t i = 0; e.str().empty() && i < k.count; ++i)
        if (!same(k.c.dt, got + i * es, &k.exact[i * es]))
            e << "element " << i << " differs from the documented order";
    for (const std::string &s : d.h.problems)
        e << "; " << s;
    d.h.problems.clear();
    return e.str().empty() ? "" : "rank " + std::to_string(r) + ": " + e.str();
}

struct DevOutcome {
    std::vector<std::string> errs;
    std::vector<long> nreg, reused, nsend, nrecv;
};

DevOutcome run_world_device(const Layout &l, size_t chunk, const std::vector<Case> &cases,
                            int device_fold)
{
    int p = static_cast<int>(l.key.size());
    sim::Options opt;
    opt.single_tag = true;
    opt.sizes = true; // the put transport reports received sizes
    sim::World w(p, opt);
    Nodes nodes(l.key, chunk);
    DevOutcome out;
    if (!nodes.ok()) {
        out.errs.push_back(l.name + ": llrdma_ar_layout failed");
        return out;
    }
    devsim::DeviceHeap heap;
    std::vector<DevRank> d(p);
    size_t vec = 0, scr = 0;
    for (const Case &k : cases) {
        vec = std::max(vec, k.count * llrdma_ar_dtype_size(k.c.dt));
        scr = std::max(scr, llrdma_ar_scratch_bytes(&k.plan, k.count, k.c.dt, p));
    }
    for (int r = 0; r < p; ++r)
        d[r].setup(w, nodes, heap, r, vec, scr);
    std::mutex em;
    std::vector<std::thread> th;
    for (int r = 0; r < p; ++r)
        th.emplace_back([&, r] {
            for (const Case &k : cases) {
                std::string s = run_rank_device(w, nodes, d[r], r, p, k, device_fold);
                if (!s.empty()) {
                    std::lock_guard<std::mutex> g(em);
                    out.errs.push_back(describe(k, l.name, chunk) + " device_fold " +
                                       std::to_string(device_fold) + ": " + s);
                }
            }
        });
    for (auto &t : th)
        t.join();
    if (!w.quiescent())
        out.errs.push_back(l.name + ": unmatched messages left");
    for (const std::string &s : w.problems())
        out.errs.push_back(l.name + ": " + s);
    for (int r = 0; r < p; ++r) {
        out.nreg.push_back(d[r].h.nreg);
        out.reused.push_back(d[r].h.nreg_reused);
        out.nsend.push_back(d[r].h.nsend);
        out.nrecv.push_back(d[r].h.nrecv);
    }
    return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(gpu_direct_every_op_and_dtype)
{
    // The GPU-direct inter-node step (docs/allreduce.md): device vectors on
    // 2 and 4 simulated nodes (and an irregular 3+1), every op x datatype x
    // inter-node algorithm, folds on the device and on the CPU, chunks that
    // make many rounds.  The core may touch device memory only through the
    // hooks (anything else faults), the hooks run late as on a stream, every
    // message is device memory handed to the NIC model, and each rank
    // registers at most its receive vector and its scratch: once, for every
    // call after the first.  Results bitwise in the documented order.
    for (const char *name : {"2+2", "2+2+2+2", "3+1"}) {
        Layout l = layout_named(name);
        Nodes probe(l.key, 64);
        BOOST_REQUIRE(probe.ok());
        const llrdma_ar_topo_t t = probe.topo();
        for (int device_fold : {0, 1}) {
            std::vector<Case> cases;
            size_t i = 0;
            for (int inter : kInter)
                for (const Combo &c : all_combos()) {
                    size_t es = llrdma_ar_dtype_size(c.dt);
                    Case k{c,
                           i % 4 == 0 ? size_t(1001) : size_t(37),
                           static_cast<int>(i % 3),
                           hier_plan(inter, 1 + static_cast<int>(i % t.min_local), t.nnodes,
                                     (i % 2 ? 3 : 64) * es, 1 + static_cast<int>(i % 3)),
                           mix(900 + i),
                           {},
                           {}};
                    ++i;
                    prepare(k, l.key);
                    cases.push_back(k);
                }
            DevOutcome o = run_world_device(l, 256, cases, device_fold);
            report(o.errs);
            const int p = static_cast<int>(l.key.size());
            long messages = 0;
            for (int r = 0; r < p; ++r) {
                messages += o.nsend[r] + o.nrecv[r];
                BOOST_CHECK_MESSAGE(o.nreg[r] <= 2, name << " rank " << r << ": " << o.nreg[r]
                                                         << " registrations (at most the receive "
                                                            "vector and the scratch)");
                if (o.nreg[r] > 0)
                    BOOST_CHECK_MESSAGE(o.reused[r] > static_cast<long>(cases.size()),
                                        name << " rank " << r << ": registrations reused only "
                                             << o.reused[r] << " times in " << cases.size()
                                             << " calls");
            }
            BOOST_CHECK_MESSAGE(messages > static_cast<long>(cases.size()),
                                name << ": the inter-node step sent no messages");
        }
    }
}

BOOST_AUTO_TEST_CASE(gpu_direct_hook_failure_ends_every_rank)
{
    // A hook that fails on one rank (a CUDA error) in the node phases or the
    // inter-node step: every rank of every node fails the call, none waits
    // for good, nothing is left over.
    Combo c{LLRDMA_DT_FLOAT, LLRDMA_OP_SUM};
    int fired = 0, runs = 0;
    for (const char *name : {"2+2", "3+1"})
        for (int inter : kInter)
            for (int kind : {devsim::kCopy, devsim::kReduce, devsim::kSync})
                for (long at : {1L, 2L, 4L, 9L}) {
                    Layout l = layout_named(name);
                    int p = static_cast<int>(l.key.size());
                    Nodes nodes(l.key, 256);
                    BOOST_REQUIRE(nodes.ok());
                    Case k{c, 1000,
                           0, hier_plan(inter, nodes.topo().min_local, nodes.topo().nnodes, 64, 2),
                           7, {},
                           {}};
                    prepare(k, l.key);
                    sim::Options opt;
                    opt.single_tag = true;
                    opt.sizes = true;
                    opt.timeout = std::chrono::milliseconds(5000);
                    sim::World w(p, opt);
                    devsim::DeviceHeap heap;
                    std::vector<DevRank> d(p);
                    std::vector<int> rcs(p);
                    size_t bytes = k.count * 4,
                           scr = llrdma_ar_scratch_bytes(&k.plan, k.count, c.dt, p);
                    for (int r = 0; r < p; ++r) {
                        d[r].setup(w, nodes, heap, r, bytes, scr);
                        if (r == p - 1) {
                            d[r].h.fail_kind = kind;
                            d[r].h.fail_at = at;
                        }
                    }
                    std::vector<std::thread> th;
                    for (int r = 0; r < p; ++r)
                        th.emplace_back([&, r] {
                            llrdma_ar_comm_t comm = d[r].h.comm(false);
                            nodes.attach(comm, r);
                            Bytes in = input(c, k.seed, r, p, k.count);
                            std::memcpy(heap.real(d[r].send, bytes), in.data(), bytes);
                            rcs[r] = llrdma_ar_run(&k.plan, &comm, d[r].send, d[r].recv, k.count,
                                                   c.dt, c.op, d[r].scratch, scr);
                            d[r].h.flush();
                        });
                    for (auto &x : th)
                        x.join();
                    ++runs;
                    std::string ctx = describe(k, l.name, 256) + " hook " + std::to_string(kind) +
                                      " fails at " + std::to_string(at);
                    for (const std::string &s : w.problems())
                        BOOST_ERROR(ctx << ": " << s);
                    BOOST_CHECK_MESSAGE(w.quiescent(), ctx << ": unmatched messages left");
                    bool failed = rcs[p - 1] != LLRDMA_AR_OK;
                    fired += failed;
                    const int fnode = nodes.me(p - 1).node;
                    for (int r = 0; r < p; ++r) {
                        BOOST_CHECK_MESSAGE(w.live(r) == 0,
                                            ctx << ": rank " << r << " left requests");
                        // The failing rank's node fails through the arena; another
                        // node fails through the inter-node step's empty messages,
                        // or -- when the failure came after the failing rank's last
                        // send -- succeeds, with the right result.
                        if (failed && nodes.me(r).node == fnode)
                            BOOST_CHECK_MESSAGE(rcs[r] != LLRDMA_AR_OK,
                                                ctx << ": rank " << r << " succeeded");
                        if (rcs[r] == LLRDMA_AR_OK)
                            BOOST_CHECK_MESSAGE(std::memcmp(heap.real(d[r].recv, bytes),
                                                            k.exact.data(), bytes) == 0,
                                                ctx << ": rank " << r
                                                    << ": wrong result reported as success");
                    }
                }
    BOOST_TEST_MESSAGE(fired << " of " << runs << " runs injected a failure");
    BOOST_CHECK(fired > runs / 2);
}
