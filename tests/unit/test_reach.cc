#define BOOST_TEST_MODULE test_reach
#include <boost/test/unit_test.hpp>

#include "llrdma_reach.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace
{

using Addr = llrdma_reach_addr_t;
using Gid = llrdma_gid_entry_t;

uint32_t ip(unsigned a, unsigned b, unsigned c, unsigned d)
{
    return a << 24 | b << 16 | c << 8 | d;
}

Addr eth(uint32_t ipv4, uint8_t prefix = 24)
{
    return Addr{ipv4, prefix, LLRDMA_LINK_ETH};
}

Addr ib(uint32_t ipv4, uint8_t prefix = 16)
{
    return Addr{ipv4, prefix, LLRDMA_LINK_IB};
}

int pick(const std::vector<Addr> &local, const std::vector<Addr> &peer, int me, int local_first)
{
    return llrdma_reach_pick(local.data(), static_cast<int>(local.size()), peer.data(),
                             static_cast<int>(peer.size()), me, local_first);
}

// Both processes' view of the pairing: a's port i -> b's port, and back.
void check_agree(const std::vector<Addr> &a, const std::vector<Addr> &b)
{
    std::vector<int> back(b.size(), -1);
    for (size_t j = 0; j < b.size(); ++j)
        back[j] = pick(b, a, static_cast<int>(j), 0);
    for (size_t i = 0; i < a.size(); ++i) {
        int j = pick(a, b, static_cast<int>(i), 1);
        BOOST_TEST_CONTEXT("port " << i)
        {
            if (j >= 0) {
                BOOST_TEST_REQUIRE(j < static_cast<int>(b.size()));
                BOOST_TEST(back[j] == static_cast<int>(i));
                BOOST_TEST(llrdma_reach_quality(&a[i], &b[j]) > 0);
            }
        }
    }
    for (size_t j = 0; j < b.size(); ++j) {
        if (back[j] >= 0)
            BOOST_TEST(pick(a, b, back[j], 1) == static_cast<int>(j));
    }
}

} // namespace

BOOST_AUTO_TEST_CASE(gid_type_names)
{
    BOOST_TEST(std::string(llrdma_gid_type_name(LLRDMA_GID_TYPE_IB)) == "ib");
    BOOST_TEST(std::string(llrdma_gid_type_name(LLRDMA_GID_TYPE_ROCE_V1)) == "roce_v1");
    BOOST_TEST(std::string(llrdma_gid_type_name(LLRDMA_GID_TYPE_ROCE_V2)) == "roce_v2");
    BOOST_TEST(std::string(llrdma_gid_type_name(7)).empty());
}

BOOST_AUTO_TEST_CASE(gid_auto_prefers_v2)
{
    // A typical RoCE table: link-local v1/v2, then the IPv4-mapped v1/v2 pair.
    const Gid t[] = {{1, 0, LLRDMA_GID_TYPE_ROCE_V1},
                     {1, 0, LLRDMA_GID_TYPE_ROCE_V2},
                     {1, 1, LLRDMA_GID_TYPE_ROCE_V1},
                     {1, 1, LLRDMA_GID_TYPE_ROCE_V2}};
    BOOST_TEST(llrdma_gid_choose(t, 4, -1, LLRDMA_ROCE_AUTO) == 3);
    BOOST_TEST(llrdma_gid_choose(t, 4, -1, LLRDMA_ROCE_V2) == 3);
    BOOST_TEST(llrdma_gid_choose(t, 4, -1, LLRDMA_ROCE_V1) == 2);
    // Without the v2 entry auto falls back to v1; v2 only finds nothing.
    BOOST_TEST(llrdma_gid_choose(t, 3, -1, LLRDMA_ROCE_AUTO) == 2);
    BOOST_TEST(llrdma_gid_choose(t, 3, -1, LLRDMA_ROCE_V2) == LLRDMA_GID_NONE);
    // Only link-local GIDs (IPv6 only): nothing for rdma_cm's IPv4 address.
    BOOST_TEST(llrdma_gid_choose(t, 2, -1, LLRDMA_ROCE_AUTO) == LLRDMA_GID_NONE);
    BOOST_TEST(llrdma_gid_choose(t, 0, -1, LLRDMA_ROCE_AUTO) == LLRDMA_GID_NONE);
    BOOST_TEST(llrdma_gid_choose(nullptr, 4, -1, LLRDMA_ROCE_AUTO) == LLRDMA_GID_NONE);
}

BOOST_AUTO_TEST_CASE(gid_auto_skips_unreadable_and_ib_entries_and_keeps_the_first)
{
    const Gid t[] = {{0, 1, LLRDMA_GID_TYPE_ROCE_V2}, // query failed
                     {1, 1, LLRDMA_GID_TYPE_IB},
                     {1, 1, LLRDMA_GID_TYPE_ROCE_V1},
                     {1, 1, LLRDMA_GID_TYPE_ROCE_V2},
                     {1, 1, LLRDMA_GID_TYPE_ROCE_V2}}; // a second address on the netdev
    BOOST_TEST(llrdma_gid_choose(t, 5, -1, LLRDMA_ROCE_AUTO) == 3);
    BOOST_TEST(llrdma_gid_choose(t, 2, -1, LLRDMA_ROCE_AUTO) == LLRDMA_GID_NONE);
}

BOOST_AUTO_TEST_CASE(gid_pinned)
{
    const Gid t[] = {{1, 0, LLRDMA_GID_TYPE_ROCE_V1},
                     {0, 0, LLRDMA_GID_TYPE_ROCE_V1},
                     {1, 1, LLRDMA_GID_TYPE_ROCE_V1},
                     {1, 1, LLRDMA_GID_TYPE_ROCE_V2}};
    // A pinned index wins over the preference, v1 included.
    BOOST_TEST(llrdma_gid_choose(t, 4, 2, LLRDMA_ROCE_AUTO) == 2);
    BOOST_TEST(llrdma_gid_choose(t, 4, 3, LLRDMA_ROCE_AUTO) == 3);
    BOOST_TEST(llrdma_gid_choose(t, 4, 3, LLRDMA_ROCE_V2) == 3);
    BOOST_TEST(llrdma_gid_choose(t, 4, 2, LLRDMA_ROCE_V1) == 2);
    // Every reason it cannot be used is told apart.
    BOOST_TEST(llrdma_gid_choose(t, 4, 0, LLRDMA_ROCE_AUTO) == LLRDMA_GID_NOT_IPV4);
    BOOST_TEST(llrdma_gid_choose(t, 4, 1, LLRDMA_ROCE_AUTO) == LLRDMA_GID_UNREADABLE);
    BOOST_TEST(llrdma_gid_choose(t, 4, 4, LLRDMA_ROCE_AUTO) == LLRDMA_GID_OUT_OF_RANGE);
    BOOST_TEST(llrdma_gid_choose(t, 4, 1000, LLRDMA_ROCE_AUTO) == LLRDMA_GID_OUT_OF_RANGE);
    BOOST_TEST(llrdma_gid_choose(t, 4, 2, LLRDMA_ROCE_V2) == LLRDMA_GID_WRONG_TYPE);
    BOOST_TEST(llrdma_gid_choose(t, 4, 3, LLRDMA_ROCE_V1) == LLRDMA_GID_WRONG_TYPE);
    const Gid ibt[] = {{1, 1, LLRDMA_GID_TYPE_IB}};
    BOOST_TEST(llrdma_gid_choose(ibt, 1, 0, LLRDMA_ROCE_AUTO) == LLRDMA_GID_WRONG_TYPE);
}

BOOST_AUTO_TEST_CASE(quality)
{
    Addr a = eth(ip(10, 0, 1, 1)), b = eth(ip(10, 0, 1, 2)), c = eth(ip(10, 0, 2, 2));
    BOOST_TEST(llrdma_reach_quality(&a, &b) == 2);
    BOOST_TEST(llrdma_reach_quality(&a, &c) == 1); // routed RoCE v2 may still get there
    BOOST_TEST(llrdma_reach_quality(&c, &a) == 1);
    // A link layer never reaches the other.
    Addr i = ib(ip(10, 0, 1, 3), 24);
    BOOST_TEST(llrdma_reach_quality(&a, &i) == 0);
    BOOST_TEST(llrdma_reach_quality(&i, &a) == 0);
    // Unspecified (old InfiniBand drivers) is InfiniBand.
    Addr u{ip(10, 0, 1, 4), 24, LLRDMA_LINK_UNSPECIFIED};
    BOOST_TEST(llrdma_reach_quality(&u, &i) == 2);
    BOOST_TEST(llrdma_reach_quality(&u, &a) == 0);
    // No address: unreachable.
    Addr z = eth(0);
    BOOST_TEST(llrdma_reach_quality(&a, &z) == 0);
    BOOST_TEST(llrdma_reach_quality(&z, &a) == 0);
    BOOST_TEST(llrdma_reach_quality(nullptr, &a) == 0);
    // Unknown prefix: reachable, subnet unknown.
    Addr np = eth(ip(10, 0, 1, 5), 0);
    BOOST_TEST(llrdma_reach_quality(&a, &np) == 1);
    Addr bad = eth(ip(10, 0, 1, 6), 33);
    BOOST_TEST(llrdma_reach_quality(&a, &bad) == 1);
    // Different prefixes: the shorter decides, both ways.
    Addr w16 = eth(ip(10, 0, 9, 9), 16);
    BOOST_TEST(llrdma_reach_quality(&a, &w16) == 2);
    BOOST_TEST(llrdma_reach_quality(&w16, &a) == 2);
    // /32 and /1 edges.
    Addr h32 = eth(ip(10, 0, 1, 1), 32), o32 = eth(ip(10, 0, 1, 2), 32);
    BOOST_TEST(llrdma_reach_quality(&h32, &h32) == 2);
    BOOST_TEST(llrdma_reach_quality(&h32, &o32) == 1);
    Addr lo = eth(ip(1, 0, 0, 1), 1), hi = eth(ip(200, 0, 0, 1), 1);
    BOOST_TEST(llrdma_reach_quality(&lo, &a) == 2);
    BOOST_TEST(llrdma_reach_quality(&lo, &hi) == 1);
}

BOOST_AUTO_TEST_CASE(single_ports)
{
    std::vector<Addr> a{eth(ip(10, 0, 0, 1))}, b{eth(ip(10, 0, 0, 2))}, c{ib(ip(10, 1, 0, 2))};
    BOOST_TEST(pick(a, b, 0, 1) == 0);
    BOOST_TEST(pick(a, b, 0, 0) == 0);
    BOOST_TEST(pick(a, c, 0, 1) == -1);
    BOOST_TEST(pick(a, c, 0, 0) == -1);
    // Another subnet of the same link layer is still reachable (routed).
    std::vector<Addr> d{eth(ip(192, 168, 0, 2))};
    BOOST_TEST(pick(a, d, 0, 1) == 0);
}

BOOST_AUTO_TEST_CASE(rails_pair_by_subnet)
{
    // Two rails, published in a different order on each host.
    std::vector<Addr> a{eth(ip(10, 0, 1, 1)), eth(ip(10, 0, 2, 1))};
    std::vector<Addr> b{eth(ip(10, 0, 2, 2)), eth(ip(10, 0, 1, 2))};
    for (int first : {0, 1}) {
        BOOST_TEST(pick(a, b, 0, first) == 1);
        BOOST_TEST(pick(a, b, 1, first) == 0);
    }
    check_agree(a, b);
    check_agree(b, a);
    // `index = i % n` would have crossed the rails here.
}

BOOST_AUTO_TEST_CASE(link_layers_pair_with_their_own)
{
    std::vector<Addr> a{ib(ip(10, 1, 0, 1)), eth(ip(10, 2, 0, 1))};
    std::vector<Addr> b{eth(ip(10, 2, 0, 2)), ib(ip(10, 1, 0, 2))};
    BOOST_TEST(pick(a, b, 0, 1) == 1);
    BOOST_TEST(pick(a, b, 1, 1) == 0);
    check_agree(a, b);
    // Only the other link layer on the peer: nothing.
    std::vector<Addr> e{eth(ip(10, 2, 0, 3))};
    std::vector<Addr> i{ib(ip(10, 1, 0, 3))};
    BOOST_TEST(pick(i, e, 0, 1) == -1);
    BOOST_TEST(pick(i, e, 0, 0) == -1);
    BOOST_TEST(pick(a, e, 0, 1) == -1);
    BOOST_TEST(pick(a, e, 1, 1) == 0);
}

BOOST_AUTO_TEST_CASE(more_ports_on_one_side)
{
    // Two local ports, one peer port: exactly one local port pairs with it, and the peer
    // agrees which one; the other reaches the peer through it (ob1 uses every module that
    // reaches a peer, so nothing is lost but a second connection the peer would refuse).
    std::vector<Addr> a{eth(ip(10, 0, 1, 1)), eth(ip(10, 0, 2, 1))};
    std::vector<Addr> b{eth(ip(10, 0, 2, 2))};
    for (int first : {0, 1}) {
        BOOST_TEST(pick(a, b, 0, first) == -1);
        BOOST_TEST(pick(a, b, 1, first) == 0);
    }
    check_agree(a, b);
    check_agree(b, a);
    // Same subnet everywhere: the first ports pair, in order.
    std::vector<Addr> c{eth(ip(10, 0, 0, 1)), eth(ip(10, 0, 0, 2)), eth(ip(10, 0, 0, 3))};
    std::vector<Addr> d{eth(ip(10, 0, 0, 4)), eth(ip(10, 0, 0, 5))};
    BOOST_TEST(pick(c, d, 0, 1) == 0);
    BOOST_TEST(pick(c, d, 1, 1) == 1);
    BOOST_TEST(pick(c, d, 2, 1) == -1);
    check_agree(c, d);
    check_agree(d, c);
}

BOOST_AUTO_TEST_CASE(invalid_arguments)
{
    std::vector<Addr> a{eth(ip(10, 0, 0, 1))};
    BOOST_TEST(llrdma_reach_pick(nullptr, 1, a.data(), 1, 0, 1) == -1);
    BOOST_TEST(llrdma_reach_pick(a.data(), 1, nullptr, 1, 0, 1) == -1);
    BOOST_TEST(llrdma_reach_pick(a.data(), 0, a.data(), 1, 0, 1) == -1);
    BOOST_TEST(llrdma_reach_pick(a.data(), 1, a.data(), 0, 0, 1) == -1);
    BOOST_TEST(llrdma_reach_pick(a.data(), 1, a.data(), 1, 1, 1) == -1);
    BOOST_TEST(llrdma_reach_pick(a.data(), 1, a.data(), 1, -1, 1) == -1);
    std::vector<Addr> many(LLRDMA_REACH_MAX_PORTS + 1, eth(ip(10, 0, 0, 1)));
    BOOST_TEST(pick(many, a, 0, 1) == -1);
    BOOST_TEST(pick(a, many, 0, 1) == -1);
    many.pop_back();
    BOOST_TEST(pick(many, a, 0, 1) == 0);
    BOOST_TEST(pick(a, many, 0, 0) == 0);
}

BOOST_AUTO_TEST_CASE(random_configurations_are_maximal_and_agree)
{
    // Up to 8 ports per side on 3 subnets of 2 link layers (one prefix length per subnet):
    // both sides agree, every link layer pairs min(local, peer) ports, and as many pairs
    // as possible share a subnet.
    std::mt19937 rng(12345);
    const Addr kinds[] = {eth(ip(10, 0, 1, 0)), eth(ip(10, 0, 2, 0)), ib(ip(10, 9, 0, 0))};
    for (int iter = 0; iter < 3000; ++iter) {
        std::vector<Addr> sides[2];
        std::map<int, int> per_subnet[2], per_link[2];
        for (int s = 0; s < 2; ++s) {
            int n = 1 + static_cast<int>(rng() % 8);
            for (int k = 0; k < n; ++k) {
                int kind = static_cast<int>(rng() % 3);
                Addr x = kinds[kind];
                x.ipv4 += 1 + static_cast<uint32_t>(s * 100 + k);
                sides[s].push_back(x);
                ++per_subnet[s][kind];
                ++per_link[s][x.link_layer];
            }
        }
        BOOST_TEST_CONTEXT("iteration " << iter)
        {
            check_agree(sides[0], sides[1]);
            int pairs = 0, same_subnet = 0;
            for (size_t i = 0; i < sides[0].size(); ++i) {
                int j = pick(sides[0], sides[1], static_cast<int>(i), 1);
                if (j >= 0) {
                    ++pairs;
                    same_subnet += llrdma_reach_quality(&sides[0][i], &sides[1][j]) == 2;
                }
            }
            int want_pairs = 0, want_subnet = 0;
            for (auto &kv : per_link[0])
                want_pairs += std::min(kv.second, per_link[1][kv.first]);
            for (auto &kv : per_subnet[0])
                want_subnet += std::min(kv.second, per_subnet[1][kv.first]);
            BOOST_TEST(pairs == want_pairs);
            BOOST_TEST(same_subnet == want_subnet);
        }
    }
}
