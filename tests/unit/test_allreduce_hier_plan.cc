// Communicators across nodes (hier_plan.cc): the layout from node keys, the
// per-communicator mode, the per-call hierarchical plan (slices, the
// inter-node step from the hint), and the test-only node grouping knob.
#define BOOST_TEST_MODULE test_allreduce_hier_plan
#include <boost/test/unit_test.hpp>

#include "llrdma_allreduce.h"

#include <cstring>
#include <string>
#include <vector>

namespace
{

struct Placed {
    llrdma_ar_topo_t topo{};
    llrdma_ar_hier_t me{};
    std::vector<int> peers;
};

Placed place(const std::vector<int> &key, int rank)
{
    Placed p;
    int n = static_cast<int>(key.size());
    p.peers.assign(n, -7);
    BOOST_REQUIRE_EQUAL(llrdma_ar_layout(n, key.data(), rank, &p.topo, &p.me, p.peers.data(), n),
                        LLRDMA_AR_OK);
    return p;
}

llrdma_ar_topo_t topo(int nnodes, int min_local, int max_local, int arenas, int below_hier)
{
    llrdma_ar_topo_t t{};
    t.nnodes = nnodes;
    t.min_local = min_local;
    t.max_local = max_local;
    t.arenas = arenas;
    t.below_hier = below_hier;
    return t;
}

} // namespace

BOOST_AUTO_TEST_CASE(layout_regular_and_irregular)
{
    // 3+1: nodes by lowest rank, local ranks in rank order.
    std::vector<int> k31 = {7, 7, 7, 3};
    Placed a = place(k31, 2);
    BOOST_CHECK_EQUAL(a.topo.nnodes, 2);
    BOOST_CHECK_EQUAL(a.topo.min_local, 1);
    BOOST_CHECK_EQUAL(a.topo.max_local, 3);
    BOOST_CHECK_EQUAL(a.topo.arenas, 0);
    BOOST_CHECK_EQUAL(a.me.node, 0);
    BOOST_CHECK_EQUAL(a.me.local_rank, 2);
    BOOST_CHECK_EQUAL(a.me.local_size, 3);
    BOOST_CHECK_EQUAL(a.peers[0], 2);
    BOOST_CHECK_EQUAL(a.peers[1], -1); // node 1 has no local rank 2
    Placed b = place(k31, 3);
    BOOST_CHECK_EQUAL(b.me.node, 1);
    BOOST_CHECK_EQUAL(b.me.local_rank, 0);
    BOOST_CHECK_EQUAL(b.me.local_size, 1);
    BOOST_CHECK_EQUAL(b.peers[0], 0);
    BOOST_CHECK_EQUAL(b.peers[1], 3);
    BOOST_CHECK(b.me.peers == b.peers.data());

    // Interleaved and permuted: node 0 = {1, 3, 4}, node 1 = {0, 2} would be
    // wrong -- node 0 is the one holding rank 0.
    std::vector<int> kp = {5, 9, 5, 9, 9};
    Placed c = place(kp, 4);
    BOOST_CHECK_EQUAL(c.topo.nnodes, 2);
    BOOST_CHECK_EQUAL(c.me.node, 1);
    BOOST_CHECK_EQUAL(c.me.local_rank, 2);
    BOOST_CHECK_EQUAL(c.topo.min_local, 2);
    BOOST_CHECK_EQUAL(c.topo.max_local, 3);
    Placed d = place(kp, 3);
    BOOST_CHECK_EQUAL(d.me.local_rank, 1);
    BOOST_CHECK_EQUAL(d.peers[0], 2);
    BOOST_CHECK_EQUAL(d.peers[1], 3);

    // 2+2+1 and one rank per node.
    Placed e = place({0, 0, 1, 1, 2}, 1);
    BOOST_CHECK_EQUAL(e.topo.nnodes, 3);
    BOOST_CHECK_EQUAL(e.topo.min_local, 1);
    BOOST_CHECK_EQUAL(e.peers[0], 1);
    BOOST_CHECK_EQUAL(e.peers[1], 3);
    BOOST_CHECK_EQUAL(e.peers[2], -1);
    Placed f = place({4, 3, 2}, 1);
    BOOST_CHECK_EQUAL(f.topo.nnodes, 3);
    BOOST_CHECK_EQUAL(f.topo.max_local, 1);
    BOOST_CHECK_EQUAL(f.me.node, 1);

    // Bad input.
    llrdma_ar_topo_t t;
    llrdma_ar_hier_t h;
    int peers[4];
    int key[4] = {0, 1, 2, 3};
    BOOST_CHECK_EQUAL(llrdma_ar_layout(4, key, 4, &t, &h, peers, 4), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(llrdma_ar_layout(4, key, 0, &t, &h, peers, 3), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(llrdma_ar_layout(0, key, 0, &t, &h, peers, 4), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(llrdma_ar_layout(4, nullptr, 0, &t, &h, peers, 4), LLRDMA_AR_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(mode_per_communicator)
{
    const char *why = nullptr;
    llrdma_ar_topo_t one = topo(1, 4, 4, 1, 1);
    BOOST_CHECK_EQUAL(llrdma_ar_mode(&one, &why), LLRDMA_AR_MODE_FLAT);
    BOOST_CHECK(std::string(why) == "one node");
    // One rank per node: the flat algorithms are the inter-node step, han or not.
    llrdma_ar_topo_t t = topo(3, 1, 1, 0, 1);
    BOOST_CHECK_EQUAL(llrdma_ar_mode(&t, nullptr), LLRDMA_AR_MODE_FLAT);
    // Several ranks per node with arenas: hierarchical, whatever is below.
    for (int below : {0, 1}) {
        t = topo(2, 1, 3, 1, below);
        BOOST_CHECK_EQUAL(llrdma_ar_mode(&t, &why), LLRDMA_AR_MODE_HIER);
    }
    // Without arenas: step aside for han, stay (flat) above a flat module.
    t = topo(2, 2, 2, 0, 1);
    BOOST_CHECK_EQUAL(llrdma_ar_mode(&t, &why), LLRDMA_AR_MODE_DECLINE);
    BOOST_CHECK(std::strstr(why, "hierarchical") != nullptr);
    t = topo(2, 2, 2, 0, 0);
    BOOST_CHECK_EQUAL(llrdma_ar_mode(&t, &why), LLRDMA_AR_MODE_FLAT);
    // Bad input.
    BOOST_CHECK(llrdma_ar_mode(nullptr, &why) < 0);
    t = topo(0, 1, 1, 0, 0);
    BOOST_CHECK(llrdma_ar_mode(&t, &why) < 0);
    t = topo(2, 3, 2, 0, 0);
    BOOST_CHECK(llrdma_ar_mode(&t, &why) < 0);
}

BOOST_AUTO_TEST_CASE(plan_slices_and_inter_node_step)
{
    llrdma_ar_topo_t t = topo(2, 2, 3, 1, 0);
    llrdma_ar_plan_t p;
    // Slices: min(min_local, max(1, bytes / 8K), count).
    struct {
        size_t bytes;
        int slices;
    } rows[] = {{8, 1}, {4096, 1}, {8192, 1}, {16383, 1}, {16384, 2}, {1 << 20, 2}};
    for (auto r : rows) {
        size_t b = r.bytes / 8 * 8;
        BOOST_REQUIRE_EQUAL(llrdma_ar_plan_hier(b, 8, &t, 0, 0, LLRDMA_AR_AUTO, 0, &p),
                            LLRDMA_AR_OK);
        BOOST_CHECK_EQUAL(p.alg, LLRDMA_AR_HIER);
        BOOST_CHECK_MESSAGE(p.slices == r.slices, b << " bytes: " << p.slices << " slices");
        BOOST_CHECK_EQUAL(p.nodes, 2);
    }
    // Fewer elements than slices would leave a slice empty.
    llrdma_ar_topo_t wide = topo(2, 8, 8, 1, 0);
    BOOST_REQUIRE_EQUAL(llrdma_ar_plan_hier(3 * 8192, 8192, &wide, 0, 0, 0, 0, &p), LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(p.slices, 3);

    // The inter-node step is the flat plan of the largest slice on `nodes` ranks.
    llrdma_ar_topo_t t4 = topo(4, 2, 2, 1, 0);
    for (uint64_t hint : {uint64_t(0), uint64_t(8192), uint64_t(65536), uint64_t(1) << 20})
        for (size_t bytes : {size_t(8), size_t(16384), size_t(200000), size_t(8) << 20}) {
            BOOST_REQUIRE_EQUAL(llrdma_ar_plan_hier(bytes, 8, &t4, hint, 4000, 0, 0, &p),
                                LLRDMA_AR_OK);
            llrdma_ar_plan_t flat;
            size_t count = bytes / 8, u = static_cast<size_t>(p.slices);
            size_t slice = (count / u + (count % u ? 1 : 0)) * 8;
            BOOST_REQUIRE_EQUAL(llrdma_ar_plan_ex(slice, 8, 4, hint, 4000, 0, 0, &flat),
                                LLRDMA_AR_OK);
            BOOST_CHECK_EQUAL(p.inter_alg, flat.alg);
            BOOST_CHECK_EQUAL(p.segment_bytes, flat.segment_bytes);
            BOOST_CHECK_EQUAL(p.nsegments_in_flight, flat.nsegments_in_flight);
            BOOST_CHECK(std::string(p.inter_why) == flat.why);
        }
    // The hint moves the inter-node step: a 48K slice is one recursive-doubling
    // message with a 64K hint, Rabenseifner without one.
    BOOST_REQUIRE_EQUAL(llrdma_ar_plan_hier(96 << 10, 8, &t4, 65536, 0, 0, 0, &p), LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(p.inter_alg, LLRDMA_AR_RECURSIVE_DOUBLING);
    BOOST_REQUIRE_EQUAL(llrdma_ar_plan_hier(96 << 10, 8, &t4, 0, 0, 0, 0, &p), LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(p.inter_alg, LLRDMA_AR_RABENSEIFNER);
    // Two nodes: slices up to 16K cross in one exchange (recursive doubling)
    // whatever the hint and eager limit; larger ones are planned as above.
    llrdma_ar_topo_t t2 = topo(2, 2, 2, 1, 0);
    for (uint64_t hint : {uint64_t(0), uint64_t(8192), uint64_t(65536)}) {
        for (size_t bytes : {size_t(4096), size_t(16384), size_t(32768)}) {
            BOOST_REQUIRE_EQUAL(llrdma_ar_plan_hier(bytes, 8, &t2, hint, 2000, 0, 0, &p),
                                LLRDMA_AR_OK);
            BOOST_CHECK_MESSAGE(p.inter_alg == LLRDMA_AR_RECURSIVE_DOUBLING,
                                bytes << " bytes, hint " << hint << ": " << p.inter_why);
        }
        BOOST_REQUIRE_EQUAL(llrdma_ar_plan_hier(64 << 10, 8, &t2, hint, 2000, 0, 0, &p),
                            LLRDMA_AR_OK); // 32K slices
        llrdma_ar_plan_t flat;
        BOOST_REQUIRE_EQUAL(llrdma_ar_plan_ex(32 << 10, 8, 2, hint, 2000, 0, 0, &flat),
                            LLRDMA_AR_OK);
        BOOST_CHECK_EQUAL(p.inter_alg, flat.alg);
    }
    // The knob still forces the inter-node step on two nodes.
    BOOST_REQUIRE_EQUAL(llrdma_ar_plan_hier(4096, 8, &t2, 8192, 0, LLRDMA_AR_RING, 0, &p),
                        LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(p.inter_alg, LLRDMA_AR_RING);
    // Large slices: a 1M slice on 3 nodes takes the ring, segmented by the hint.
    llrdma_ar_topo_t t3 = topo(3, 2, 2, 1, 0);
    BOOST_REQUIRE_EQUAL(llrdma_ar_plan_hier(2 << 20, 8, &t3, 128 << 10, 0, 0, 0, &p), LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(p.inter_alg, LLRDMA_AR_RING);
    BOOST_CHECK_EQUAL(p.segment_bytes, size_t(128) << 10);
    BOOST_REQUIRE_EQUAL(llrdma_ar_plan_hier(2 << 20, 8, &t3, 0, 0, 0, 0, &p), LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(p.segment_bytes, size_t(64) << 10);

    // Knobs: a message algorithm forces the inter-node step, a shm one is
    // ignored, the segment knob sets the segment, hierarchical is not a knob value.
    BOOST_REQUIRE_EQUAL(llrdma_ar_plan_hier(1 << 20, 8, &t4, 0, 0, LLRDMA_AR_RING, 4096, &p),
                        LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(p.inter_alg, LLRDMA_AR_RING);
    BOOST_CHECK_EQUAL(p.segment_bytes, 4096u);
    BOOST_REQUIRE_EQUAL(llrdma_ar_plan_hier(1 << 20, 8, &t4, 0, 0, LLRDMA_AR_SHM_SPLIT, 0, &p),
                        LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(p.alg, LLRDMA_AR_HIER);
    BOOST_CHECK(p.inter_alg != LLRDMA_AR_SHM_SPLIT && p.inter_alg != LLRDMA_AR_SHM_DIRECT);
    BOOST_CHECK_EQUAL(llrdma_ar_plan_hier(64, 8, &t4, 0, 0, LLRDMA_AR_HIER, 0, &p),
                      LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(llrdma_ar_plan(64, 8, 4, 0, LLRDMA_AR_HIER, 0, &p), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(llrdma_ar_plan_hier(63, 8, &t4, 0, 0, 0, 0, &p), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(llrdma_ar_plan_hier(64, 8, nullptr, 0, 0, 0, 0, &p), LLRDMA_AR_ERR_INVALID);
    // Zero bytes plans (nothing runs).
    BOOST_CHECK_EQUAL(llrdma_ar_plan_hier(0, 8, &t4, 0, 0, 0, 0, &p), LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(p.slices, 1);
    BOOST_CHECK(std::string(llrdma_ar_alg_name(LLRDMA_AR_HIER)) == "hierarchical");
}

BOOST_AUTO_TEST_CASE(node_split_knob)
{
    int sizes[8], n = -1, rep = -1;
    char err[256];
    BOOST_CHECK_EQUAL(llrdma_ar_node_split_parse("", sizes, 8, &n, &rep, err, sizeof err),
                      LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(n, 0);
    BOOST_CHECK_EQUAL(llrdma_ar_node_split_parse(nullptr, sizes, 8, &n, &rep, err, sizeof err),
                      LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(n, 0);

    // "N": blocks of N world ranks.
    BOOST_REQUIRE_EQUAL(llrdma_ar_node_split_parse("2", sizes, 8, &n, &rep, err, sizeof err),
                        LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(n, 1);
    BOOST_CHECK_EQUAL(rep, 1);
    int want2[] = {0, 0, 1, 1, 2};
    for (int r = 0; r < 5; ++r)
        BOOST_CHECK_EQUAL(llrdma_ar_node_split_group(sizes, n, rep, r, 5, err, sizeof err),
                          want2[r]);

    // Explicit lists must cover the world.
    BOOST_REQUIRE_EQUAL(llrdma_ar_node_split_parse("3,1", sizes, 8, &n, &rep, err, sizeof err),
                        LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(n, 2);
    BOOST_CHECK_EQUAL(rep, 0);
    int want31[] = {0, 0, 0, 1};
    for (int r = 0; r < 4; ++r)
        BOOST_CHECK_EQUAL(llrdma_ar_node_split_group(sizes, n, rep, r, 4, err, sizeof err),
                          want31[r]);
    BOOST_CHECK_EQUAL(llrdma_ar_node_split_group(sizes, n, rep, 0, 5, err, sizeof err), -1);
    BOOST_CHECK(std::string(err).find("cover 4 ranks, the job has 5") != std::string::npos);
    BOOST_REQUIRE_EQUAL(llrdma_ar_node_split_parse("2,2,1", sizes, 8, &n, &rep, err, sizeof err),
                        LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(llrdma_ar_node_split_group(sizes, n, rep, 4, 5, err, sizeof err), 2);

    // Bad text: named, with the item.
    for (const char *bad :
         {"0", "-1", "2,", ",2", "2,,1", "a", "2x", "3,0", "1.5", " 2", "99999999"}) {
        err[0] = '\0';
        BOOST_CHECK_MESSAGE(llrdma_ar_node_split_parse(bad, sizes, 8, &n, &rep, err, sizeof err) ==
                                LLRDMA_AR_ERR_INVALID,
                            "'" << bad << "' accepted");
        BOOST_CHECK_MESSAGE(std::string(err).find(std::string("'") + bad + "'") !=
                                std::string::npos,
                            "error for '" << bad << "' does not name it: " << err);
    }
    BOOST_CHECK_EQUAL(llrdma_ar_node_split_parse("1,1,1", sizes, 2, &n, &rep, err, sizeof err),
                      LLRDMA_AR_ERR_INVALID);
}
