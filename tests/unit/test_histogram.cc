// Unit tests of the message-size histogram (llrdma_core/histogram.cc, llrdma_hist.h): bucket
// boundaries, merging, percentiles, and the finalize record of the dump, written and read back,
// including every way a record can be malformed.
#define BOOST_TEST_MODULE test_histogram
#include <boost/test/unit_test.hpp>

#include "llrdma_hist.h"

#include <cstring>
#include <string>

namespace
{
// A fragment carrying `payload` bytes under the full header allowance.
uint64_t frag(uint64_t payload)
{
    return payload + LLRDMA_HIST_HDR_ALLOWANCE;
}

llrdma_rank_config_t config(int rank, uint64_t hint)
{
    llrdma_rank_config_t c{};
    c.rank = rank;
    c.size = 4;
    std::strcpy(c.host, "node\"1");
    c.pid = 4242;
    c.hint.bytes = hint;
    c.hint.source = LLRDMA_SRC_ENV;
    std::strcpy(c.hint.origin, "environment (OMPI_MCA_btl_llrdma_size_hint)");
    BOOST_REQUIRE(llrdma_profile_derive(hint, nullptr, &c.profile) == LLRDMA_OK);
    std::strcpy(c.btl_status, "active");
    c.device.gid_index = -1;
    c.device.cq_moderation_supported = -1;
    return c;
}
} // namespace

BOOST_AUTO_TEST_CASE(bucket_bounds_are_hints)
{
    // Bucket b holds payloads (2^(b-1), 2^b]: what the LL path of hint 2^b carries.
    BOOST_TEST(llrdma_hist_bucket(0) == 0u);
    BOOST_TEST(llrdma_hist_bucket(frag(0)) == 0u);
    BOOST_TEST(llrdma_hist_bucket(frag(1)) == 0u);
    BOOST_TEST(llrdma_hist_bucket(frag(2)) == 1u);
    BOOST_TEST(llrdma_hist_bucket(frag(3)) == 2u);
    BOOST_TEST(llrdma_hist_bucket(frag(4)) == 2u);
    BOOST_TEST(llrdma_hist_bucket(frag(5)) == 3u);
    BOOST_TEST(llrdma_hist_bucket(frag(8192)) == 13u);
    BOOST_TEST(llrdma_hist_bucket(frag(8193)) == 14u);
    BOOST_TEST(llrdma_hist_bucket(frag(16384)) == 14u);
    BOOST_TEST(llrdma_hist_bucket(frag(uint64_t(1) << 30)) == 30u);
    BOOST_TEST(llrdma_hist_bucket(frag((uint64_t(1) << 30) + 1)) == 31u);
    BOOST_TEST(llrdma_hist_bucket(UINT64_MAX) == 31u);
    for (unsigned b = 1; b < LLRDMA_HIST_BUCKETS - 1; ++b) {
        uint64_t top = llrdma_hist_bucket_max(b);
        BOOST_TEST(top == uint64_t(1) << b);
        BOOST_TEST(llrdma_hist_bucket(frag(top)) == b);
        BOOST_TEST(llrdma_hist_bucket(frag(top + 1)) == b + 1);
    }
    BOOST_TEST(llrdma_hist_bucket_max(0) == 1u);
    BOOST_TEST(llrdma_hist_bucket_max(LLRDMA_HIST_BUCKETS - 1) == UINT64_MAX);
}

BOOST_AUTO_TEST_CASE(add_counts_fragments_and_bytes_per_path)
{
    llrdma_hist_t h{};
    llrdma_hist_add(&h, LLRDMA_HIST_LL, frag(100));
    llrdma_hist_add(&h, LLRDMA_HIST_LL, frag(120));
    llrdma_hist_add(&h, LLRDMA_HIST_BW, frag(100000));
    llrdma_hist_wait(&h, LLRDMA_HIST_LL);
    BOOST_TEST(h.count[LLRDMA_HIST_LL][7] == 2u);
    BOOST_TEST(h.bytes[LLRDMA_HIST_LL][7] == frag(100) + frag(120));
    BOOST_TEST(h.count[LLRDMA_HIST_BW][17] == 1u);
    BOOST_TEST(h.bytes[LLRDMA_HIST_BW][17] == frag(100000));
    BOOST_TEST(h.waits[LLRDMA_HIST_LL] == 1u);
    BOOST_TEST(h.waits[LLRDMA_HIST_BW] == 0u);
    uint64_t counts[LLRDMA_HIST_BUCKETS];
    BOOST_TEST(llrdma_hist_totals(&h, counts) == 3u);
    BOOST_TEST(counts[7] == 2u);
    BOOST_TEST(counts[17] == 1u);

    llrdma_hist_t sum{};
    llrdma_hist_merge(&sum, &h);
    llrdma_hist_merge(&sum, &h);
    BOOST_TEST(sum.count[LLRDMA_HIST_LL][7] == 4u);
    BOOST_TEST(sum.bytes[LLRDMA_HIST_BW][17] == 2 * frag(100000));
    BOOST_TEST(sum.waits[LLRDMA_HIST_LL] == 2u);
}

// Small sends counted by exact size fold into the same buckets and byte sums as counting each
// with llrdma_hist_add_sw, on both paths, at every size up to the table's end.
BOOST_AUTO_TEST_CASE(small_table_folds_as_add_sw_would)
{
    static llrdma_hist_small_t s; // 16 KiB: not on the stack
    std::memset(&s, 0, sizeof s);
    llrdma_hist_t direct{}, folded{};
    for (uint32_t w = 0; w <= LLRDMA_HIST_SMALL_MAX; ++w) {
        const int p = (w % 3 == 0) ? LLRDMA_HIST_BW : LLRDMA_HIST_LL;
        for (uint32_t k = 0; k < 1 + w % 4; ++k) {
            llrdma_hist_small_add_sw(&s, p, w);
            llrdma_hist_add_sw(&direct, p, w, w);
        }
    }
    llrdma_hist_add_sw(&folded, LLRDMA_HIST_LL, 5000, 5000); // what is there already stays
    llrdma_hist_add_sw(&direct, LLRDMA_HIST_LL, 5000, 5000);
    llrdma_hist_small_fold(&folded, &s);
    BOOST_TEST(std::memcmp(&folded, &direct, sizeof folded) == 0);
    BOOST_TEST(folded.count[LLRDMA_HIST_LL][0] > 0u);  // sizes 0..65 land in bucket 0
    BOOST_TEST(folded.count[LLRDMA_HIST_BW][10] > 0u); // and 1024 + 64 in bucket 10
}

BOOST_AUTO_TEST_CASE(percentiles_are_nearest_rank)
{
    llrdma_hist_t h{};
    BOOST_TEST(llrdma_hist_percentile_bucket(&h, 50) == -1); // empty
    for (int i = 0; i < 4; ++i)
        llrdma_hist_add(&h, LLRDMA_HIST_LL, frag(8)); // bucket 3
    for (int i = 0; i < 6; ++i)
        llrdma_hist_add(&h, LLRDMA_HIST_BW, frag(1000)); // bucket 10
    BOOST_TEST(llrdma_hist_percentile_bucket(&h, 10) == 3);
    BOOST_TEST(llrdma_hist_percentile_bucket(&h, 40) == 3);  // the 4th of 10
    BOOST_TEST(llrdma_hist_percentile_bucket(&h, 41) == 10); // the 5th
    BOOST_TEST(llrdma_hist_percentile_bucket(&h, 50) == 10);
    BOOST_TEST(llrdma_hist_percentile_bucket(&h, 100) == 10);
    BOOST_TEST(llrdma_hist_percentile_bucket(&h, 0) == -1);
    BOOST_TEST(llrdma_hist_percentile_bucket(&h, 101) == -1);
}

BOOST_AUTO_TEST_CASE(finalize_record_round_trip)
{
    llrdma_rank_config_t c = config(3, 16384);
    llrdma_hist_t h{};
    llrdma_hist_add(&h, LLRDMA_HIST_LL, frag(4096));
    llrdma_hist_add(&h, LLRDMA_HIST_BW, frag(1 << 20));
    llrdma_hist_add(&h, LLRDMA_HIST_BW, UINT64_MAX / 2);
    h.waits[LLRDMA_HIST_LL] = 7;
    h.waits[LLRDMA_HIST_BW] = 9;
    h.cq_completions[LLRDMA_HIST_LL] = 1000;
    h.cq_completions[LLRDMA_HIST_BW] = 640;
    h.cq_events[LLRDMA_HIST_BW] = 40;
    h.thread_completions[LLRDMA_HIST_LL] = 12;
    h.thread_completions[LLRDMA_HIST_BW] = 600;
    h.thread_cpu_us = 123456;
    static char buf[LLRDMA_STATS_JSON_MAX];
    BOOST_REQUIRE(llrdma_stats_to_json(&c, &h, buf, sizeof buf) == LLRDMA_OK);
    std::string s(buf);
    BOOST_TEST(
        s.find("{\"rank\":3,\"size\":4,\"host\":\"node\\\"1\",\"pid\":4242,\"size_hint\":16384,") ==
        0u);
    BOOST_TEST(s.find("\"record\":\"finalize\"") != std::string::npos);
    BOOST_TEST(s.find("btl_status") == std::string::npos); // the MPI_Init record has it
    BOOST_TEST(s.find("\"bucket_max\":[1,2,4,") != std::string::npos);
    BOOST_TEST(s.find("1073741824,null]") != std::string::npos);
    BOOST_TEST(s.find("\"cq_completions\":640,\"cq_events\":40,\"thread_completions\":600}") !=
               std::string::npos);
    BOOST_TEST(s.find("\"thread_cpu_us\":123456}") != std::string::npos);
    BOOST_TEST(s.back() == '}');
    BOOST_TEST(s.find('\n') == std::string::npos);

    // Older readers of the configuration still get the identity and the hint.
    llrdma_rank_config_t back{};
    BOOST_TEST(llrdma_config_from_json(buf, &back) == LLRDMA_OK);
    BOOST_TEST(back.rank == 3);
    BOOST_TEST(back.hint.bytes == 16384u);

    llrdma_rank_stats_t r;
    char err[256] = "";
    BOOST_REQUIRE(llrdma_stats_from_json(buf, &r, err, sizeof err) == LLRDMA_OK);
    BOOST_TEST(r.rank == 3);
    BOOST_TEST(std::string(r.host) == "node\"1");
    BOOST_TEST(r.pid == 4242);
    BOOST_TEST(r.hint == 16384u);
    BOOST_TEST(r.ll_sq_depth == c.profile.ll.sq_depth);
    BOOST_TEST(std::memcmp(&r.hist, &h, sizeof h) == 0);

    // The exact-fit buffer works, one byte less truncates to nothing.
    size_t need = s.size() + 1;
    std::string small(need, 'x');
    BOOST_TEST(llrdma_stats_to_json(&c, &h, &small[0], need) == LLRDMA_OK);
    BOOST_TEST(llrdma_stats_to_json(&c, &h, &small[0], need - 1) == LLRDMA_ERR_TRUNCATED);
    BOOST_TEST(small[0] == '\0');
}

BOOST_AUTO_TEST_CASE(init_record_has_no_stats)
{
    llrdma_rank_config_t c = config(0, 0);
    char buf[LLRDMA_CONFIG_JSON_MAX];
    BOOST_REQUIRE(llrdma_config_to_json(&c, buf, sizeof buf) == LLRDMA_OK);
    llrdma_rank_stats_t r;
    char err[256] = "";
    BOOST_TEST(llrdma_stats_from_json(buf, &r, err, sizeof err) == LLRDMA_ERR_NOT_FOUND);
    BOOST_TEST(r.rank == 0);
    BOOST_TEST(r.ll_sq_depth == 0u); // generic profile
    BOOST_TEST(std::string(err).find("MPI_Init") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_records_say_why)
{
    llrdma_rank_config_t c = config(1, 8192);
    llrdma_hist_t h{};
    llrdma_hist_add(&h, LLRDMA_HIST_LL, frag(10));
    static char buf[LLRDMA_STATS_JSON_MAX];
    BOOST_REQUIRE(llrdma_stats_to_json(&c, &h, buf, sizeof buf) == LLRDMA_OK);
    const std::string good(buf);

    auto why = [](const std::string &text) {
        llrdma_rank_stats_t r;
        char err[256] = "";
        int rc = llrdma_stats_from_json(text.c_str(), &r, err, sizeof err);
        BOOST_TEST(rc == LLRDMA_ERR_INVALID);
        return std::string(err);
    };
    // Truncated (a rank killed while writing, a copied prefix).
    BOOST_TEST(why(good.substr(0, good.size() / 2)).find("not valid JSON") != std::string::npos);
    BOOST_TEST(why("").find("not valid JSON") != std::string::npos);
    // Foreign JSON.
    BOOST_TEST(why("{\"name\":\"osu_latency\",\"size\":8}").find("not an llrdma dump") !=
               std::string::npos);
    BOOST_TEST(why("[1,2,3]").find("not an llrdma dump") != std::string::npos);
    // Malformed statistics.
    auto edit = [&](const std::string &from, const std::string &to) {
        std::string s = good;
        size_t at = s.find(from);
        BOOST_REQUIRE(at != std::string::npos);
        return s.replace(at, from.size(), to);
    };
    BOOST_TEST(
        why(edit("\"buckets\":\"log2\"", "\"buckets\":\"linear\"")).find("unknown bucket layout") !=
        std::string::npos);
    BOOST_TEST(why(edit("\"header_allowance\":64", "\"header_allowance\":32"))
                   .find("unknown bucket layout") != std::string::npos);
    BOOST_TEST(why(edit("\"count\":[0,", "\"count\":[")).find("stats.ll.count: 31 buckets") !=
               std::string::npos);
    BOOST_TEST(why(edit("\"count\":[0,", "\"count\":[-1,")).find("stats.ll.count[0]") !=
               std::string::npos);
    BOOST_TEST(why(edit("\"rdma\":{", "\"rdmax\":{")).find("stats.rdma: missing") !=
               std::string::npos);
    BOOST_TEST(why(edit("\"waits\":0", "\"waits\":\"0\"")).find("stats.ll.waits") !=
               std::string::npos);
    BOOST_TEST(why(edit("\"stats\":{", "\"stats\":[{").replace(good.size(), 1, "]}"))
                   .find("not an object") != std::string::npos);
    BOOST_TEST(why(edit("\"size_hint\":8192", "\"size_hint\":\"8K\""))
                   .find("malformed rank, pid, host or size_hint") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(counts_above_2_pow_53_are_exact)
{
    // Byte counters of a long job pass 2^53; a double on the way would round them.
    llrdma_rank_config_t c = config(2, 4096);
    llrdma_hist_t h{};
    h.count[LLRDMA_HIST_LL][3] = (1ull << 53) + 1;
    h.bytes[LLRDMA_HIST_BW][31] = UINT64_MAX;
    h.bytes[LLRDMA_HIST_RDMA][0] = UINT64_MAX - 1;
    h.waits[LLRDMA_HIST_BW] = (1ull << 60) + 7;
    h.thread_cpu_us = (1ull << 53) + 3;
    static char buf[LLRDMA_STATS_JSON_MAX];
    BOOST_REQUIRE(llrdma_stats_to_json(&c, &h, buf, sizeof buf) == LLRDMA_OK);
    BOOST_TEST(std::string(buf).find("18446744073709551615]") != std::string::npos);
    llrdma_rank_stats_t r;
    char err[256] = "";
    BOOST_REQUIRE(llrdma_stats_from_json(buf, &r, err, sizeof err) == LLRDMA_OK);
    BOOST_TEST(std::memcmp(&r.hist, &h, sizeof h) == 0);
    BOOST_TEST(r.hist.count[LLRDMA_HIST_LL][3] == (1ull << 53) + 1);
}

BOOST_AUTO_TEST_CASE(bad_json_says_where)
{
    auto why = [](const char *text) {
        llrdma_rank_stats_t r;
        char err[256] = "";
        BOOST_TEST(llrdma_stats_from_json(text, &r, err, sizeof err) == LLRDMA_ERR_INVALID);
        return std::string(err);
    };
    BOOST_TEST(
        why("{\"rank\":1,").find("not valid JSON (truncated or corrupt): line 1, column 11") == 0u);
    BOOST_TEST(why("{\"rank\":0} x").find("expected end of input") != std::string::npos);
    std::string deep = std::string(40, '[') + std::string(40, ']');
    BOOST_TEST(why(deep.c_str()).find("nested deeper than 32 levels") != std::string::npos);
    BOOST_TEST(why("{\"rank\":0,\"size_hint\":1,\"btl_status\":\"x\",\"host\":\"a\\u0000b\"}")
                   .find("malformed rank, pid, host or size_hint") != std::string::npos);
}
