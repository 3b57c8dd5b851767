// Unit tests of the hint advisor (llrdma_core/advisor.cc): every rule of the report's
// guidance on its own, the bimodal and single-size workloads, an empty dump, dumps taken at
// different hints, and the JSON form.
#define BOOST_TEST_MODULE test_advisor
#include <boost/test/unit_test.hpp>

#include "llrdma_hist.h"

#include <string>
#include <vector>

namespace
{
struct Rank {
    llrdma_rank_stats_t s{};
    Rank(int rank, uint64_t hint)
    {
        s.rank = rank;
        s.hint = hint;
        s.ll_sq_depth = hint ? 64 : 0;
    }
    // `n` messages of `payload` bytes, on the path a hint would give them.
    Rank &msgs(uint64_t n, uint64_t payload)
    {
        int path = s.hint && payload <= s.hint ? LLRDMA_HIST_LL : LLRDMA_HIST_BW;
        for (uint64_t i = 0; i < n; ++i)
            llrdma_hist_add(&s.hist, path, payload + LLRDMA_HIST_HDR_ALLOWANCE);
        return *this;
    }
    Rank &waits(uint64_t n)
    {
        s.hist.waits[LLRDMA_HIST_LL] += n;
        return *this;
    }
};

llrdma_advice_t advise(const std::vector<Rank> &ranks)
{
    std::vector<llrdma_rank_stats_t> v;
    for (const Rank &r : ranks)
        v.push_back(r.s);
    llrdma_advice_t a;
    BOOST_REQUIRE(llrdma_advise(v.data(), static_cast<int>(v.size()), &a) == LLRDMA_OK);
    return a;
}

bool has(const llrdma_advice_t &a, unsigned rule)
{
    return (a.rules & rule) != 0;
}

bool says(const char (*lines)[256], int n, const std::string &what)
{
    for (int i = 0; i < n; ++i)
        if (std::string(lines[i]).find(what) != std::string::npos)
            return true;
    return false;
}
} // namespace

BOOST_AUTO_TEST_CASE(empty_dump_gives_no_data)
{
    llrdma_advice_t a = advise({});
    BOOST_TEST(a.kind == LLRDMA_ADVICE_NO_DATA);
    BOOST_TEST(a.hint == 0u);
    a = advise({Rank(0, 16384), Rank(1, 16384)});
    BOOST_TEST(a.kind == LLRDMA_ADVICE_NO_DATA);
    BOOST_TEST(a.nranks == 2);
    BOOST_TEST(a.nranks_data == 0);
    BOOST_TEST(says(a.reasons, a.nreasons, "no fragment"));
    BOOST_TEST(llrdma_advise(nullptr, 1, &a) == LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(single_size_workload_gets_its_bucket)
{
    llrdma_advice_t a = advise({Rank(0, 0).msgs(1000, 1000), Rank(1, 0).msgs(1000, 1000)});
    BOOST_TEST(a.kind == LLRDMA_ADVICE_HINT);
    BOOST_TEST(a.hint == 1024u);
    BOOST_TEST(a.rules == unsigned(LLRDMA_RULE_MEDIAN));
    BOOST_TEST(a.covered == 1.0);
    BOOST_TEST(a.fragments == 2000u);
    BOOST_TEST(a.nwarnings == 0);
    // A power of two is its own bucket: 16K messages give 16K, not 32K.
    a = advise({Rank(0, 0).msgs(10, 16384)});
    BOOST_TEST(a.hint == 16384u);
    // Tiny messages only: the floor.
    a = advise({Rank(0, 0).msgs(10, 8)});
    BOOST_TEST(a.hint == 64u);
}

BOOST_AUTO_TEST_CASE(median_not_maximum)
{
    // 5% of 1 MB messages: the maximum stays on the bandwidth path.
    llrdma_advice_t a = advise({Rank(0, 0).msgs(95, 2000).msgs(5, 1 << 20)});
    BOOST_TEST(a.kind == LLRDMA_ADVICE_HINT);
    BOOST_TEST(a.hint == 2048u); // the 1 MB maximum is not covered
    BOOST_TEST(a.covered == 0.95);
    BOOST_TEST(!has(a, LLRDMA_RULE_PLUS_BIT));
    BOOST_TEST(says(a.reasons, a.nreasons, "not the maximum"));
}

BOOST_AUTO_TEST_CASE(plus_a_bit_covers_sizes_just_above_the_median)
{
    llrdma_advice_t a = advise({Rank(0, 0).msgs(60, 3000).msgs(30, 6000).msgs(10, 100)});
    BOOST_TEST(a.kind == LLRDMA_ADVICE_HINT);
    BOOST_TEST(has(a, LLRDMA_RULE_PLUS_BIT));
    BOOST_TEST(a.hint == 8192u);
    BOOST_TEST(a.covered == 1.0);
    // 9% just above is not enough.
    a = advise({Rank(0, 0).msgs(91, 3000).msgs(9, 6000)});
    BOOST_TEST(!has(a, LLRDMA_RULE_PLUS_BIT));
    BOOST_TEST(a.hint == 4096u);
}

BOOST_AUTO_TEST_CASE(bimodal_sizes_spanning_orders_of_magnitude_get_no_hint)
{
    // The report's example: 16 B control messages and large data messages.
    llrdma_advice_t a = advise({Rank(0, 0).msgs(500, 16).msgs(500, 1 << 20)});
    BOOST_TEST(a.kind == LLRDMA_ADVICE_NO_HINT);
    BOOST_TEST(a.hint == 0u);
    BOOST_TEST(has(a, LLRDMA_RULE_SPAN));
    BOOST_TEST(says(a.reasons, a.nreasons, "span orders of magnitude"));
    // Two modes close together are one band: a hint covers both.
    a = advise({Rank(0, 0).msgs(500, 1024).msgs(500, 8192)});
    BOOST_TEST(a.kind == LLRDMA_ADVICE_HINT);
    BOOST_TEST(!has(a, LLRDMA_RULE_SPAN));
    BOOST_TEST(a.hint == 8192u);
    // Few large messages (under 10%) do not make a span.
    a = advise({Rank(0, 0).msgs(950, 16).msgs(50, 64 << 20)});
    BOOST_TEST(a.kind == LLRDMA_ADVICE_HINT);
}

BOOST_AUTO_TEST_CASE(bandwidth_first_traffic_gets_no_hint)
{
    llrdma_advice_t a = advise({Rank(0, 0).msgs(100, 1 << 20).msgs(20, 512 << 10)});
    BOOST_TEST(a.kind == LLRDMA_ADVICE_NO_HINT);
    BOOST_TEST(has(a, LLRDMA_RULE_BW_FIRST));
    BOOST_TEST(!has(a, LLRDMA_RULE_SPAN));
    // 64K itself is still a low-latency size.
    a = advise({Rank(0, 0).msgs(100, 64 << 10)});
    BOOST_TEST(a.kind == LLRDMA_ADVICE_HINT);
    BOOST_TEST(a.hint == 65536u);
}

BOOST_AUTO_TEST_CASE(full_low_latency_queue_warns)
{
    // Hint 64K for 256 B..4 KB traffic with frequent waits: failure case 1.
    llrdma_advice_t a = advise({Rank(0, 65536).msgs(500, 256).msgs(500, 4000).waits(20)});
    BOOST_TEST(has(a, LLRDMA_RULE_QUEUE_FULL));
    BOOST_TEST(a.ll_wait_share == 0.02);
    BOOST_TEST(says(a.warnings, a.nwarnings, "queue was full for 20 of 1000"));
    BOOST_TEST(has(a, LLRDMA_RULE_TOO_LARGE));
    BOOST_TEST(a.hint == 4096u);
    // Under 1 in 500, or fewer than 10 in all: quiet.
    a = advise({Rank(0, 65536).msgs(10000, 256).waits(19)});
    BOOST_TEST(!has(a, LLRDMA_RULE_QUEUE_FULL));
    a = advise({Rank(0, 65536).msgs(100, 256).waits(9)});
    BOOST_TEST(!has(a, LLRDMA_RULE_QUEUE_FULL));
}

BOOST_AUTO_TEST_CASE(ranks_with_different_mixes_warn)
{
    llrdma_advice_t a =
        advise({Rank(0, 0).msgs(100, 100), Rank(1, 0).msgs(100, 100), Rank(2, 0).msgs(100, 8000)});
    BOOST_TEST(has(a, LLRDMA_RULE_RANKS_DIFFER));
    BOOST_TEST(says(a.warnings, a.nwarnings, "on rank 2"));
    BOOST_TEST(a.nranks_data == 3);
    // One bucket apart is the same mix.
    a = advise({Rank(0, 0).msgs(100, 1000), Rank(1, 0).msgs(100, 2000)});
    BOOST_TEST(!has(a, LLRDMA_RULE_RANKS_DIFFER));
    // A rank without traffic is not a different mix.
    a = advise({Rank(0, 0).msgs(100, 1000), Rank(1, 0)});
    BOOST_TEST(!has(a, LLRDMA_RULE_RANKS_DIFFER));
    BOOST_TEST(a.nranks_data == 1);
}

BOOST_AUTO_TEST_CASE(dumps_from_different_hints)
{
    // The same traffic recorded under hint 0, 8K and 64K gives the same recommendation:
    // the histogram counts sizes, whichever path carried them.
    for (uint64_t hint : {uint64_t(0), uint64_t(8192), uint64_t(65536)}) {
        llrdma_advice_t a = advise({Rank(0, hint).msgs(700, 3000).msgs(300, 200),
                                    Rank(1, hint).msgs(700, 3000).msgs(300, 200)});
        BOOST_TEST(a.kind == LLRDMA_ADVICE_HINT);
        BOOST_TEST(a.hint == 4096u);
        BOOST_TEST(a.current_hint == hint);
        BOOST_TEST(!has(a, LLRDMA_RULE_HINTS_DIFFER));
        BOOST_TEST(has(a, LLRDMA_RULE_TOO_LARGE) == (hint == 65536));
    }
    // Ranks that ran with different hints: warned, combined, no current-hint verdict.
    llrdma_advice_t a = advise({Rank(1, 65536).msgs(100, 3000), Rank(0, 8192).msgs(100, 3000)});
    BOOST_TEST(has(a, LLRDMA_RULE_HINTS_DIFFER));
    BOOST_TEST(a.current_hint == 8192u); // the lowest rank's
    BOOST_TEST(says(a.warnings, a.nwarnings, "different hints (rank 0: 8K)"));
    BOOST_TEST(!has(a, LLRDMA_RULE_TOO_LARGE));
    BOOST_TEST(a.hint == 4096u);
}

BOOST_AUTO_TEST_CASE(hint_below_the_traffic_reports_the_share_above_it)
{
    llrdma_advice_t a = advise({Rank(0, 1024).msgs(80, 3000).msgs(20, 500)});
    BOOST_TEST(a.hint == 4096u);
    BOOST_TEST(has(a, LLRDMA_RULE_ABOVE_HINT));
    BOOST_TEST(says(a.reasons, a.nreasons, "at the current hint 1K, 80.0% of fragments"));
}

BOOST_AUTO_TEST_CASE(json_form)
{
    llrdma_advice_t a = advise({Rank(0, 65536).msgs(500, 256).msgs(500, 4000).waits(20)});
    char buf[8192];
    BOOST_REQUIRE(llrdma_advice_to_json(&a, buf, sizeof buf) == LLRDMA_OK);
    std::string s(buf);
    BOOST_TEST(s.find("{\"recommendation\":\"hint\",\"hint\":4096,\"hint_text\":\"4K\"") == 0u);
    BOOST_TEST(s.find("\"rules\":[\"median\",\"plus_bit\",\"queue_full\",\"too_large\"]") !=
               std::string::npos);
    BOOST_TEST(s.find("\"current_hint\":65536") != std::string::npos);
    BOOST_TEST(s.find("\"warnings\":[\"the low-latency queue") != std::string::npos);
    a = advise({});
    BOOST_REQUIRE(llrdma_advice_to_json(&a, buf, sizeof buf) == LLRDMA_OK);
    BOOST_TEST(std::string(buf).find("\"recommendation\":\"no-data\"") == 1u);
    char small[16];
    BOOST_TEST(llrdma_advice_to_json(&a, small, sizeof small) == LLRDMA_ERR_TRUNCATED);
    BOOST_TEST(small[0] == '\0');
}
