#define BOOST_TEST_MODULE test_hint
#include <boost/test/unit_test.hpp>

#include "llrdma_core.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace
{

// Every test starts from a clean process state (no API value, not frozen).
struct Clean {
    Clean() { llrdma_state_reset_for_tests(); }
    ~Clean() { llrdma_state_reset_for_tests(); }
};

llrdma_hint_inputs_t inputs()
{
    llrdma_hint_inputs_t in{};
    in.mca_source = LLRDMA_SRC_DEFAULT;
    return in;
}

struct Result {
    int rc;
    llrdma_hint_t h;
    std::string err;
};

Result resolve(const llrdma_hint_inputs_t &in)
{
    Result r{};
    char err[1024] = "";
    r.rc = llrdma_hint_resolve(&in, &r.h, err, sizeof err);
    r.err = err;
    return r;
}

const char *kEnvOrigin = "environment (OMPI_MCA_btl_llrdma_size_hint; mpirun --mca sets this too)";
const char *kAliasOrigin = "environment (RDMA_LOW_LATENCY_HINT)";
const char *kApiOrigin = "llrdma_set_size_hint() before MPI_Init";

} // namespace

BOOST_FIXTURE_TEST_SUITE(resolve_suite, Clean)

BOOST_AUTO_TEST_CASE(nothing_set_is_default_zero)
{
    Result r = resolve(inputs());
    BOOST_TEST(r.rc == LLRDMA_OK);
    BOOST_TEST(r.h.bytes == 0u);
    BOOST_TEST(r.h.source == LLRDMA_SRC_DEFAULT);
    BOOST_TEST(std::string(r.h.origin) == "default");
    BOOST_TEST(std::string(r.h.text).empty());
}

BOOST_AUTO_TEST_CASE(default_source_text_is_parsed)
{
    llrdma_hint_inputs_t in = inputs();
    in.mca_text = "0";
    Result r = resolve(in);
    BOOST_TEST(r.rc == LLRDMA_OK);
    BOOST_TEST(r.h.bytes == 0u);
    BOOST_TEST(r.h.source == LLRDMA_SRC_DEFAULT);
    // A broken registered default is an error when nothing shadows it...
    in.mca_text = "zero";
    r = resolve(in);
    BOOST_TEST(r.rc == LLRDMA_ERR_INVALID);
    BOOST_TEST(r.err.find("btl_llrdma_size_hint = 'zero' (from default): ") == 0);
    // ...and shadowed (not an error) when the alias is set.
    in.alias_text = "4K";
    r = resolve(in);
    BOOST_TEST(r.rc == LLRDMA_OK);
    BOOST_TEST(r.h.bytes == 4096u);
    BOOST_TEST(r.h.source == LLRDMA_SRC_ALIAS);
}

BOOST_AUTO_TEST_CASE(each_mca_source_origin)
{
    const struct {
        llrdma_source_t src;
        const char *file;
        int line;
        const char *origin;
    } table[] = {
        {LLRDMA_SRC_ENV, nullptr, 0, kEnvOrigin},
        {LLRDMA_SRC_FILE, "/home/u/.openmpi/mca-params.conf", 3,
         "file /home/u/.openmpi/mca-params.conf:3"},
        {LLRDMA_SRC_FILE, "/etc/openmpi-mca-params.conf", 0, "file /etc/openmpi-mca-params.conf"},
        {LLRDMA_SRC_OVERRIDE, nullptr, 0, "override (btl_llrdma_size_hint)"},
        {LLRDMA_SRC_OTHER, nullptr, 0, "other (btl_llrdma_size_hint"},
    };
    for (const auto &t : table) {
        llrdma_hint_inputs_t in = inputs();
        in.mca_text = " 16K ";
        in.mca_source = t.src;
        in.mca_file = t.file;
        in.mca_line = t.line;
        in.alias_text = "64K"; // lower precedence: must lose
        Result r = resolve(in);
        BOOST_TEST_CONTEXT("source " << llrdma_source_name(t.src))
        {
            BOOST_TEST(r.rc == LLRDMA_OK);
            BOOST_TEST(r.h.bytes == 16384u);
            BOOST_TEST(r.h.source == t.src);
            BOOST_TEST(std::string(r.h.origin).rfind(t.origin, 0) == 0);
            BOOST_TEST(std::string(r.h.text) == "16K");
        }
    }
}

BOOST_AUTO_TEST_CASE(custom_mca_name_in_origin_and_error)
{
    llrdma_hint_inputs_t in = inputs();
    in.mca_name = "coll_llrdma_size_hint";
    in.mca_source = LLRDMA_SRC_ENV;
    in.mca_text = "abc";
    Result r = resolve(in);
    BOOST_TEST(r.rc == LLRDMA_ERR_INVALID);
    BOOST_TEST(r.err == "coll_llrdma_size_hint = 'abc' (from environment "
                        "(OMPI_MCA_coll_llrdma_size_hint; mpirun --mca sets this too)): not a size "
                        "(expected digits, e.g. '16384', '16K' or '0x4000')");
}

BOOST_AUTO_TEST_CASE(alias_wins_over_default_and_takes_hex)
{
    llrdma_hint_inputs_t in = inputs();
    in.mca_text = "0"; // registered default
    in.alias_text = "0x4000";
    Result r = resolve(in);
    BOOST_TEST(r.rc == LLRDMA_OK);
    BOOST_TEST(r.h.bytes == 16384u);
    BOOST_TEST(r.h.source == LLRDMA_SRC_ALIAS);
    BOOST_TEST(std::string(r.h.origin) == kAliasOrigin);
    BOOST_TEST(std::string(r.h.text) == "0x4000");
}

BOOST_AUTO_TEST_CASE(api_beats_everything)
{
    BOOST_TEST(llrdma_state_set_api_hint(8192) == LLRDMA_OK);
    llrdma_hint_inputs_t in = inputs();
    in.mca_source = LLRDMA_SRC_ENV;
    in.mca_text = "abc"; // shadowed invalid: not an error
    in.alias_text = "also bad";
    Result r = resolve(in);
    BOOST_TEST(r.rc == LLRDMA_OK);
    BOOST_TEST(r.h.bytes == 8192u);
    BOOST_TEST(r.h.source == LLRDMA_SRC_API);
    BOOST_TEST(std::string(r.h.origin) == kApiOrigin);
    BOOST_TEST(std::string(r.h.text) == "8K");
}

BOOST_AUTO_TEST_CASE(api_zero_means_explicitly_no_hint)
{
    BOOST_TEST(llrdma_state_set_api_hint(0) == LLRDMA_OK);
    llrdma_hint_inputs_t in = inputs();
    in.mca_source = LLRDMA_SRC_FILE;
    in.mca_text = "16K";
    Result r = resolve(in);
    BOOST_TEST(r.rc == LLRDMA_OK);
    BOOST_TEST(r.h.bytes == 0u);
    BOOST_TEST(r.h.source == LLRDMA_SRC_API);
}

// All 2^3 combinations of {API, MCA (env), alias} set, with valid values: the highest wins.
BOOST_AUTO_TEST_CASE(precedence_matrix_valid)
{
    for (int mask = 0; mask < 8; ++mask) {
        llrdma_state_reset_for_tests();
        bool api = mask & 1, mca = mask & 2, alias = mask & 4;
        if (api)
            BOOST_TEST(llrdma_state_set_api_hint(1024) == LLRDMA_OK);
        llrdma_hint_inputs_t in = inputs();
        in.mca_text = mca ? "2K" : "0";
        in.mca_source = mca ? LLRDMA_SRC_ENV : LLRDMA_SRC_DEFAULT;
        in.alias_text = alias ? "3K" : nullptr;
        Result r = resolve(in);
        uint64_t want = api ? 1024 : mca ? 2048 : alias ? 3072 : 0;
        llrdma_source_t src = api     ? LLRDMA_SRC_API
                              : mca   ? LLRDMA_SRC_ENV
                              : alias ? LLRDMA_SRC_ALIAS
                                      : LLRDMA_SRC_DEFAULT;
        BOOST_TEST_CONTEXT("mask " << mask)
        {
            BOOST_TEST(r.rc == LLRDMA_OK);
            BOOST_TEST(r.h.bytes == want);
            BOOST_TEST(r.h.source == src);
        }
    }
}

// Same matrix where every source that is set except the winner holds garbage: only the
// winner is parsed.  When the winner itself is garbage the error names it.
BOOST_AUTO_TEST_CASE(precedence_matrix_invalid)
{
    for (int mask = 1; mask < 8; ++mask) {
        for (int bad_winner = 0; bad_winner < 2; ++bad_winner) {
            llrdma_state_reset_for_tests();
            bool api = mask & 1, mca = mask & 2, alias = mask & 4;
            if (api && bad_winner)
                continue; // the API path validates on set: it cannot hold garbage
            if (api)
                BOOST_TEST(llrdma_state_set_api_hint(1024) == LLRDMA_OK);
            llrdma_hint_inputs_t in = inputs();
            bool mca_wins = !api && mca;
            bool alias_wins = !api && !mca && alias;
            in.mca_source = mca ? LLRDMA_SRC_FILE : LLRDMA_SRC_DEFAULT;
            in.mca_file = "/etc/mca.conf";
            in.mca_line = 7;
            in.mca_text = mca ? (mca_wins && !bad_winner ? "2K" : "2 kilobytes") : "0";
            in.alias_text = alias ? (alias_wins && !bad_winner ? "3K" : "-3K") : nullptr;
            Result r = resolve(in);
            BOOST_TEST_CONTEXT("mask " << mask << " bad_winner " << bad_winner)
            {
                if (!bad_winner) {
                    BOOST_TEST(r.rc == LLRDMA_OK);
                    BOOST_TEST(r.h.bytes == (api ? 1024u : mca ? 2048u : 3072u));
                } else if (mca_wins) {
                    BOOST_TEST(r.rc == LLRDMA_ERR_INVALID);
                    BOOST_TEST(r.err.rfind("btl_llrdma_size_hint = '2 kilobytes' (from file "
                                           "/etc/mca.conf:7): unknown suffix 'kilobytes'",
                                           0) == 0);
                } else {
                    BOOST_TEST(r.rc == LLRDMA_ERR_INVALID);
                    BOOST_TEST(r.err == "RDMA_LOW_LATENCY_HINT = '-3K' (from environment "
                                        "(RDMA_LOW_LATENCY_HINT)): signs are not allowed");
                }
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(range_error_at_winner)
{
    llrdma_hint_inputs_t in = inputs();
    in.mca_source = LLRDMA_SRC_ENV;
    in.mca_text = "2G";
    Result r = resolve(in);
    BOOST_TEST(r.rc == LLRDMA_ERR_RANGE);
    BOOST_TEST(r.err == std::string("btl_llrdma_size_hint = '2G' (from ") + kEnvOrigin +
                            "): above the maximum 1G");
    // Out of range but shadowed: fine.
    BOOST_TEST(llrdma_state_set_api_hint(64) == LLRDMA_OK);
    r = resolve(in);
    BOOST_TEST(r.rc == LLRDMA_OK);
    BOOST_TEST(r.h.bytes == 64u);
}

BOOST_AUTO_TEST_CASE(source_set_but_text_null_falls_through)
{
    llrdma_hint_inputs_t in = inputs();
    in.mca_source = LLRDMA_SRC_ENV;
    in.alias_text = "512";
    Result r = resolve(in);
    BOOST_TEST(r.rc == LLRDMA_OK);
    BOOST_TEST(r.h.source == LLRDMA_SRC_ALIAS);
    BOOST_TEST(r.h.bytes == 512u);
}

BOOST_AUTO_TEST_CASE(bad_arguments)
{
    llrdma_hint_inputs_t in = inputs();
    llrdma_hint_t h;
    char err[128];
    BOOST_TEST(llrdma_hint_resolve(nullptr, &h, err, sizeof err) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_hint_resolve(&in, nullptr, err, sizeof err) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_hint_resolve(&in, &h, nullptr, 0) == LLRDMA_OK);
    const int garbage = 42; // what a C caller can store in the enum field
    std::memcpy(&in.mca_source, &garbage, sizeof garbage);
    BOOST_TEST(llrdma_hint_resolve(&in, &h, err, sizeof err) == LLRDMA_ERR_INVALID);
    BOOST_TEST(std::string(err).find("unknown source 42") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(long_text_is_truncated_safely)
{
    std::string big(300, '9');
    llrdma_hint_inputs_t in = inputs();
    in.mca_source = LLRDMA_SRC_ENV;
    in.mca_text = big.c_str();
    char err[32];
    llrdma_hint_t h;
    BOOST_TEST(llrdma_hint_resolve(&in, &h, err, sizeof err) == LLRDMA_ERR_INVALID);
    BOOST_TEST(std::string(err).size() == sizeof err - 1);
    std::string ok = std::string(100, '0') + "16K";
    in.mca_text = ok.c_str();
    BOOST_TEST(llrdma_hint_resolve(&in, &h, err, sizeof err) == LLRDMA_OK);
    BOOST_TEST(h.bytes == 16384u);
    BOOST_TEST(std::string(h.text).size() == sizeof h.text - 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(source_names)
{
    BOOST_TEST(std::string(llrdma_source_name(LLRDMA_SRC_DEFAULT)) == "default");
    BOOST_TEST(std::string(llrdma_source_name(LLRDMA_SRC_API)) == "api");
    BOOST_TEST(std::string(llrdma_source_name(LLRDMA_SRC_ENV)) == "env");
    BOOST_TEST(std::string(llrdma_source_name(LLRDMA_SRC_FILE)) == "file");
    BOOST_TEST(std::string(llrdma_source_name(LLRDMA_SRC_ALIAS)) == "alias");
    BOOST_TEST(std::string(llrdma_source_name(LLRDMA_SRC_OVERRIDE)) == "override");
    BOOST_TEST(std::string(llrdma_source_name(LLRDMA_SRC_OTHER)) == "other");
    BOOST_TEST(std::string(llrdma_source_name(static_cast<llrdma_source_t>(7))) == "unknown");
}

BOOST_AUTO_TEST_CASE(gradient_hint)
{
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    BOOST_TEST(llrdma_hint_for_gradient_u64(1000, 0, 0.2) == 0u);
    BOOST_TEST(llrdma_hint_for_gradient_u64(1000, -4, 0.2) == 0u);
    BOOST_TEST(llrdma_hint_for_gradient_u64(0, 8, 0.2) == 0u);
    BOOST_TEST(llrdma_hint_for_gradient_u64(1000, 1, 0.2) == 1200u);
    BOOST_TEST(llrdma_hint_for_gradient_u64(1000, 1, 0.1) == 1100u); // no spurious +1
    BOOST_TEST(llrdma_hint_for_gradient_u64(1000, 1, 0.3) == 1300u);
    BOOST_TEST(llrdma_hint_for_gradient_u64(1000, 3, 0.0) == 334u); // ceil(333.3)
    BOOST_TEST(llrdma_hint_for_gradient_u64(1, 8, 0.0) == 1u);
    // The report's example shape: 4 MiB gradient over 16 ranks, 20% headroom.
    BOOST_TEST(llrdma_hint_for_gradient_u64(4u << 20, 16, 0.2) == 314573u); // 262144*1.2=314572.8
    BOOST_TEST(llrdma_hint_for_gradient_u64(1000, 1, -0.5) == 1000u);
    BOOST_TEST(llrdma_hint_for_gradient_u64(1000, 1, nan) == 1000u);
    BOOST_TEST(llrdma_hint_for_gradient_u64(1000, 1, -inf) == 1000u);
    BOOST_TEST(llrdma_hint_for_gradient_u64(1000, 1, inf) == LLRDMA_HINT_MAX);
    BOOST_TEST(llrdma_hint_for_gradient_u64(UINT64_MAX, 1, 0.0) == LLRDMA_HINT_MAX);
    BOOST_TEST(llrdma_hint_for_gradient_u64(UINT64_MAX, 1, 1e6) == LLRDMA_HINT_MAX);
    BOOST_TEST(llrdma_hint_for_gradient_u64(UINT64_MAX, 2147483647, 1e300) == LLRDMA_HINT_MAX);
    BOOST_TEST(llrdma_hint_for_gradient_u64(10, 1000000000, 1e7) == 1u); // ceil(1e-8 * (1 + 1e7))
    BOOST_TEST(llrdma_hint_for_gradient_u64(1000000000, 1000000000, 1e7) == 10000001u);
    BOOST_TEST(llrdma_hint_for_gradient_u64(LLRDMA_HINT_MAX, 1, 0.0) == LLRDMA_HINT_MAX);
    BOOST_TEST(llrdma_hint_for_gradient_u64(LLRDMA_HINT_MAX - 1, 1, 0.0) == LLRDMA_HINT_MAX - 1);
}
