#define BOOST_TEST_MODULE test_consensus
#include <boost/test/unit_test.hpp>

#include "llrdma_core.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace
{

llrdma_peer_hint_t peer(int rank, uint64_t bytes, const char *origin = "default", int present = 1)
{
    llrdma_peer_hint_t p;
    std::memset(&p, 0, sizeof p);
    p.rank = rank;
    p.present = present;
    p.bytes = bytes;
    std::snprintf(p.host, sizeof p.host, "h%d", rank / 2);
    std::snprintf(p.origin, sizeof p.origin, "%s", origin);
    return p;
}

struct Run {
    llrdma_consensus_t c;
    std::vector<int> dev;
};

Run run(const std::vector<llrdma_peer_hint_t> &peers, int max_dev = 64)
{
    Run r;
    r.dev.assign(static_cast<size_t>(max_dev), -7);
    BOOST_TEST_REQUIRE(llrdma_consensus(peers.data(), static_cast<int>(peers.size()), &r.c,
                                        r.dev.data(), max_dev) == LLRDMA_OK);
    r.dev.resize(static_cast<size_t>(std::min(r.c.ndeviants, max_dev)));
    return r;
}

std::string report(const std::vector<llrdma_peer_hint_t> &peers, const Run &r)
{
    char buf[8192];
    BOOST_TEST_REQUIRE(llrdma_consensus_report(peers.data(), static_cast<int>(peers.size()), &r.c,
                                               r.dev.data(), buf, sizeof buf) == LLRDMA_OK);
    return buf;
}

} // namespace

BOOST_AUTO_TEST_CASE(empty_and_none_present)
{
    llrdma_consensus_t c;
    BOOST_TEST(llrdma_consensus(nullptr, 0, &c, nullptr, 0) == LLRDMA_OK);
    BOOST_TEST(c.majority_count == 0);
    BOOST_TEST(c.present == 0);
    BOOST_TEST(c.ndeviants == 0);
    std::vector<llrdma_peer_hint_t> peers = {peer(0, 4096, "x", 0), peer(1, 8192, "x", 0)};
    Run r = run(peers);
    BOOST_TEST(r.c.majority_count == 0);
    BOOST_TEST(r.c.present == 0);
    BOOST_TEST(r.c.ndeviants == 0);
    BOOST_TEST(report(peers, r).empty());
}

BOOST_AUTO_TEST_CASE(all_agree)
{
    std::vector<llrdma_peer_hint_t> peers;
    for (int i = 0; i < 8; ++i)
        peers.push_back(peer(i, 16384));
    Run r = run(peers);
    BOOST_TEST(r.c.majority_bytes == 16384u);
    BOOST_TEST(r.c.majority_count == 8);
    BOOST_TEST(r.c.present == 8);
    BOOST_TEST(r.c.ndeviants == 0);
    BOOST_TEST(report(peers, r).empty());
}

BOOST_AUTO_TEST_CASE(one_deviant_and_report_text)
{
    std::vector<llrdma_peer_hint_t> peers;
    for (int i = 0; i < 8; ++i)
        peers.push_back(peer(i, 16384, "environment (RDMA_LOW_LATENCY_HINT)"));
    peers[3] = peer(3, 65536, "file /etc/openmpi-mca-params.conf:2");
    Run r = run(peers);
    BOOST_TEST(r.c.majority_bytes == 16384u);
    BOOST_TEST(r.c.majority_count == 7);
    BOOST_TEST(r.c.ndeviants == 1);
    BOOST_TEST(r.dev == std::vector<int>{3});
    BOOST_TEST(report(peers, r) ==
               "llrdma: the low-latency RDMA size hint differs across ranks (majority 16K on 7 of "
               "8 ranks)\n"
               "  rank 3 on h1: 64K (file /etc/openmpi-mca-params.conf:2)\n"
               "  majority value from e.g. rank 0 on h0 (environment (RDMA_LOW_LATENCY_HINT))");
}

BOOST_AUTO_TEST_CASE(two_deviants_in_input_order_absent_ignored)
{
    std::vector<llrdma_peer_hint_t> peers = {
        peer(5, 4096, "a"), peer(4, 0, "default"), peer(0, 4096, "a"),
        peer(2, 999, "b"),  peer(3, 4096, "a"),    peer(1, 123, "c", 0), // absent
        peer(6, 4096, "a"),
    };
    Run r = run(peers);
    BOOST_TEST(r.c.majority_bytes == 4096u);
    BOOST_TEST(r.c.majority_count == 4);
    BOOST_TEST(r.c.present == 6);
    BOOST_TEST(r.c.ndeviants == 2);
    BOOST_TEST(r.dev == (std::vector<int>{1, 3}));
    std::string rep = report(peers, r);
    BOOST_TEST(rep.find("(majority 4K on 4 of 6 ranks)") != std::string::npos);
    size_t a = rep.find("  rank 4 on h2: 0 (default)\n");
    size_t b = rep.find("  rank 2 on h1: 999 (b)\n");
    BOOST_TEST(a != std::string::npos);
    BOOST_TEST(b != std::string::npos);
    BOOST_TEST(a < b);
    BOOST_TEST(rep.find("rank 1") == std::string::npos); // absent: not mentioned
    // The example is the lowest rank holding the majority value, not the first in input.
    BOOST_TEST(rep.find("majority value from e.g. rank 0 on h0 (a)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(tie_goes_to_value_of_lowest_rank)
{
    // 2 vs 2: 64K is held by rank 1, 8K by ranks 2 and 3 -> 64K wins, whatever the order.
    std::vector<llrdma_peer_hint_t> peers = {peer(2, 8192), peer(1, 65536), peer(3, 8192),
                                             peer(4, 65536)};
    Run r = run(peers);
    BOOST_TEST(r.c.majority_bytes == 65536u);
    BOOST_TEST(r.c.majority_count == 2);
    BOOST_TEST(r.dev == (std::vector<int>{0, 2}));
    std::vector<llrdma_peer_hint_t> rev(peers.rbegin(), peers.rend());
    BOOST_TEST(run(rev).c.majority_bytes == 65536u);
    // Three-way tie of singletons: rank 0's value.
    std::vector<llrdma_peer_hint_t> three = {peer(7, 1), peer(0, 3), peer(9, 2)};
    Run t = run(three);
    BOOST_TEST(t.c.majority_bytes == 3u);
    BOOST_TEST(t.c.ndeviants == 2);
    // A clear majority beats a lower rank.
    std::vector<llrdma_peer_hint_t> maj = {peer(0, 1), peer(1, 2), peer(2, 2)};
    BOOST_TEST(run(maj).c.majority_bytes == 2u);
}

BOOST_AUTO_TEST_CASE(deviant_array_limit_and_report_cap)
{
    std::vector<llrdma_peer_hint_t> peers;
    for (int i = 0; i < 100; ++i)
        peers.push_back(peer(i, i < 60 ? 4096 : static_cast<uint64_t>(i)));
    Run r = run(peers, 5);
    BOOST_TEST(r.c.ndeviants == 40);                             // full count...
    BOOST_TEST(r.dev == (std::vector<int>{60, 61, 62, 63, 64})); // ...array up to the limit
    std::string rep = report(peers, r);
    BOOST_TEST(rep.find("  rank 91 on h45: 91 (default)\n") != std::string::npos);
    BOOST_TEST(rep.find("rank 92 on") == std::string::npos);
    BOOST_TEST(rep.find("  ... and 8 more ranks\n") != std::string::npos);
    // NULL deviant_idx is fine for both calls.
    llrdma_consensus_t c;
    BOOST_TEST(llrdma_consensus(peers.data(), 100, &c, nullptr, 0) == LLRDMA_OK);
    BOOST_TEST(c.ndeviants == 40);
    char buf[64];
    BOOST_TEST(llrdma_consensus_report(peers.data(), 100, &c, nullptr, buf, sizeof buf) ==
               LLRDMA_ERR_TRUNCATED);
    BOOST_TEST(std::strlen(buf) == sizeof buf - 1);
}

BOOST_AUTO_TEST_CASE(bad_arguments)
{
    llrdma_consensus_t c{};
    llrdma_peer_hint_t p = peer(0, 1);
    char buf[64];
    BOOST_TEST(llrdma_consensus(nullptr, 1, &c, nullptr, 0) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_consensus(&p, -1, &c, nullptr, 0) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_consensus(&p, 1, nullptr, nullptr, 0) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_consensus_report(&p, 1, nullptr, nullptr, buf, sizeof buf) ==
               LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_consensus_report(&p, 1, &c, nullptr, nullptr, 10) == LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(encode_decode_round_trip)
{
    const char *hosts[] = {"node1", "", "we;ird%host", "tab\there\nnl"};
    const char *origins[] = {"file /etc/a.conf:3", "override (btl_llrdma_size_hint)",
                             "a;b;c %41 \\;", "\x01\x7f\xc3\xa9"};
    const uint64_t values[] = {0, 16384, LLRDMA_HINT_MAX, UINT64_MAX};
    for (const char *h : hosts)
        for (const char *o : origins)
            for (uint64_t v : values) {
                llrdma_peer_hint_t p = peer(0, v, o);
                std::snprintf(p.host, sizeof p.host, "%s", h);
                char wire[LLRDMA_PEER_WIRE_MAX];
                BOOST_TEST_REQUIRE(llrdma_peer_encode(&p, wire, sizeof wire) == LLRDMA_OK);
                std::string w(wire);
                BOOST_TEST(std::count(w.begin(), w.end(), ';') == 2);
                for (char ch : w)
                    BOOST_TEST(static_cast<unsigned char>(ch) >= 0x20);
                llrdma_peer_hint_t q;
                std::memset(&q, 0, sizeof q);
                q.rank = 11;
                BOOST_TEST_REQUIRE(llrdma_peer_decode(wire, &q) == LLRDMA_OK);
                BOOST_TEST(q.bytes == v);
                BOOST_TEST(std::string(q.host) == h);
                BOOST_TEST(std::string(q.origin) == o);
                BOOST_TEST(q.present == 1);
                BOOST_TEST(q.rank == 11); // not on the wire
            }
}

BOOST_AUTO_TEST_CASE(encode_limits)
{
    llrdma_peer_hint_t p = peer(0, 16384);
    std::memset(p.host, ';', sizeof p.host - 1);
    std::memset(p.origin, '%', sizeof p.origin - 1);
    char wire[LLRDMA_PEER_WIRE_MAX];
    BOOST_TEST(llrdma_peer_encode(&p, wire, sizeof wire) == LLRDMA_OK);
    llrdma_peer_hint_t q;
    BOOST_TEST(llrdma_peer_decode(wire, &q) == LLRDMA_OK);
    BOOST_TEST(std::string(q.host) == std::string(sizeof p.host - 1, ';'));
    char small[10];
    BOOST_TEST(llrdma_peer_encode(&p, small, sizeof small) == LLRDMA_ERR_TRUNCATED);
    BOOST_TEST(small[0] == '\0');
    BOOST_TEST(llrdma_peer_encode(nullptr, wire, sizeof wire) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_peer_encode(&p, nullptr, 0) == LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(decode_rejects_garbage)
{
    const char *garbage[] = {
        "",           "garbage",     "16384",
        "16384;host", "16384;h;o;x", ";h;o",
        "16K;h;o",    "-1;h;o",      "18446744073709551616;h;o",
        "1 ;h;o",     "1;h%;o",      "1;h%4;o",
        "1;h%zz;o",   "1;h%00;o",    "1;h\tx;o",
    };
    for (const char *g : garbage) {
        llrdma_peer_hint_t q = peer(4, 77, "keep");
        BOOST_TEST_CONTEXT("'" << g << "'")
        {
            BOOST_TEST(llrdma_peer_decode(g, &q) == LLRDMA_ERR_INVALID);
            BOOST_TEST(q.bytes == 77u); // untouched on failure
            BOOST_TEST(std::string(q.origin) == "keep");
        }
    }
    std::string longhost = "1;" + std::string(256, 'h') + ";o";
    llrdma_peer_hint_t q;
    BOOST_TEST(llrdma_peer_decode(longhost.c_str(), &q) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_peer_decode(nullptr, &q) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_peer_decode("1;h;o", nullptr) == LLRDMA_ERR_INVALID);
}
