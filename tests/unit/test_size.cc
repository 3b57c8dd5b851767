#define BOOST_TEST_MODULE test_size
#include <boost/test/unit_test.hpp>

#include "llrdma_core.h"

#include <string>

namespace
{

struct Good {
    const char *text;
    uint64_t want;
};

struct Bad {
    const char *text;
    int rc;
    const char *reason; // substring of err besides the quoted text
};

constexpr uint64_t K = 1024, M = K * K, G = M * K;

} // namespace

BOOST_AUTO_TEST_CASE(accepts_documented_forms)
{
    const Good table[] = {
        {"16384", 16384},   {"16K", 16 * K},    {"16k", 16 * K},    {"16KiB", 16 * K},
        {"16KB", 16 * K},   {"16kb", 16 * K},   {"16kib", 16 * K},  {"2M", 2 * M},
        {"2MiB", 2 * M},    {"2mb", 2 * M},     {"1G", G},          {"1GiB", G},
        {"1gb", G},         {"0x4000", 0x4000}, {"0X4000", 0x4000}, {"0xabcDEF", 0xabcdef},
        {"0", 0},           {"0K", 0},          {"0x0", 0},         {" 16K ", 16 * K},
        {"\t8192\n", 8192}, {"16 KiB", 16 * K}, {"010", 10},        {"1", 1},
        {"1073741824", G},
    };
    for (const Good &g : table) {
        uint64_t v = 12345;
        char err[256] = "untouched";
        int rc = llrdma_parse_size(g.text, LLRDMA_HINT_MAX, &v, err, sizeof err);
        BOOST_TEST_CONTEXT("input '" << g.text << "'")
        {
            BOOST_TEST(rc == LLRDMA_OK);
            BOOST_TEST(v == g.want);
            BOOST_TEST(std::string(err).empty());
        }
    }
}

BOOST_AUTO_TEST_CASE(rejects_bad_input_with_reason)
{
    const Bad table[] = {
        {"", LLRDMA_ERR_INVALID, "empty"},
        {"   ", LLRDMA_ERR_INVALID, "empty"},
        {"abc", LLRDMA_ERR_INVALID, "not a size"},
        {"-1", LLRDMA_ERR_INVALID, "sign"},
        {"+5", LLRDMA_ERR_INVALID, "sign"},
        {"16X", LLRDMA_ERR_INVALID, "unknown suffix 'X'"},
        {"1.5K", LLRDMA_ERR_INVALID, "fraction"},
        {"16 K K", LLRDMA_ERR_INVALID, "unknown suffix 'K K'"},
        {"0x", LLRDMA_ERR_INVALID, "no hex digits"},
        {"0xg", LLRDMA_ERR_INVALID, "no hex digits"},
        {"0x1K", LLRDMA_ERR_INVALID, "hex values take no suffix"},
        {"1e3", LLRDMA_ERR_INVALID, "exponent"},
        {"16B", LLRDMA_ERR_INVALID, "unknown suffix 'B'"},
        {"16Kx", LLRDMA_ERR_INVALID, "unknown suffix 'Kx'"},
        {"1T", LLRDMA_ERR_INVALID, "unknown suffix 'T'"},
        {"99999999999999999999", LLRDMA_ERR_INVALID, "too large"},
        {"20000000000G", LLRDMA_ERR_INVALID, "too large"},
        {"0x10000000000000000", LLRDMA_ERR_INVALID, "too large"},
        {"2G", LLRDMA_ERR_RANGE, "above the maximum 1G"},
        {"1073741825", LLRDMA_ERR_RANGE, "above the maximum 1G"},
        {"18446744073709551615", LLRDMA_ERR_RANGE, "above the maximum 1G"},
    };
    for (const Bad &b : table) {
        uint64_t v = 777;
        char err[256] = "";
        int rc = llrdma_parse_size(b.text, LLRDMA_HINT_MAX, &v, err, sizeof err);
        std::string e(err);
        BOOST_TEST_CONTEXT("input '" << b.text << "' err \"" << e << "\"")
        {
            BOOST_TEST(rc == b.rc);
            BOOST_TEST(v == 777u); // output untouched on error
            BOOST_TEST(e.find(std::string("'") + b.text + "'") != std::string::npos);
            BOOST_TEST(e.find(b.reason) != std::string::npos);
        }
    }
}

BOOST_AUTO_TEST_CASE(exact_reason_text)
{
    uint64_t v = 0;
    char err[256];
    BOOST_TEST(llrdma_parse_size("abc", LLRDMA_HINT_MAX, &v, err, sizeof err) ==
               LLRDMA_ERR_INVALID);
    BOOST_TEST(std::string(err).rfind("'abc': not a size", 0) == 0);
    BOOST_TEST(llrdma_parse_size("16X", LLRDMA_HINT_MAX, &v, err, sizeof err) ==
               LLRDMA_ERR_INVALID);
    BOOST_TEST(std::string(err).rfind("'16X': unknown suffix 'X'", 0) == 0);
    BOOST_TEST(llrdma_parse_size("2G", LLRDMA_HINT_MAX, &v, err, sizeof err) == LLRDMA_ERR_RANGE);
    BOOST_TEST(std::string(err) == "'2G': above the maximum 1G");
}

BOOST_AUTO_TEST_CASE(null_and_small_buffers)
{
    uint64_t v = 5;
    char err[64];
    BOOST_TEST(llrdma_parse_size(nullptr, LLRDMA_HINT_MAX, &v, err, sizeof err) ==
               LLRDMA_ERR_INVALID);
    BOOST_TEST(std::string(err).find("null") != std::string::npos);
    BOOST_TEST(llrdma_parse_size("16K", LLRDMA_HINT_MAX, nullptr, err, sizeof err) ==
               LLRDMA_ERR_INVALID);
    // err may be NULL, and a tiny err buffer is truncated but terminated.
    BOOST_TEST(llrdma_parse_size("abc", LLRDMA_HINT_MAX, &v, nullptr, 0) == LLRDMA_ERR_INVALID);
    char tiny[4] = {'x', 'x', 'x', 'x'};
    BOOST_TEST(llrdma_parse_size("abc", LLRDMA_HINT_MAX, &v, tiny, sizeof tiny) ==
               LLRDMA_ERR_INVALID);
    BOOST_TEST(std::string(tiny) == "'ab");
    BOOST_TEST(v == 5u);
}

BOOST_AUTO_TEST_CASE(custom_max)
{
    uint64_t v = 0;
    char err[128];
    BOOST_TEST(llrdma_parse_size("64K", 64 * K, &v, err, sizeof err) == LLRDMA_OK);
    BOOST_TEST(v == 64 * K);
    BOOST_TEST(llrdma_parse_size("65537", 64 * K, &v, err, sizeof err) == LLRDMA_ERR_RANGE);
    BOOST_TEST(std::string(err).find("above the maximum 64K") != std::string::npos);
    BOOST_TEST(llrdma_parse_size("18446744073709551615", UINT64_MAX, &v, err, sizeof err) ==
               LLRDMA_OK);
    BOOST_TEST(v == UINT64_MAX);
    BOOST_TEST(llrdma_parse_size("0xffffffffffffffff", UINT64_MAX, &v, err, sizeof err) ==
               LLRDMA_OK);
    BOOST_TEST(v == UINT64_MAX);
    BOOST_TEST(llrdma_parse_size("17179869184G", UINT64_MAX, &v, err, sizeof err) ==
               LLRDMA_ERR_INVALID); // 2^34 G = 2^64: one past uint64
}

BOOST_AUTO_TEST_CASE(format)
{
    const struct {
        uint64_t v;
        const char *want;
    } table[] = {
        {0, "0"},
        {1, "1"},
        {1000, "1000"},
        {1024, "1K"},
        {16384, "16K"},
        {16448, "16448"},
        {2 * M, "2M"},
        {1536 * K, "1536K"},
        {G, "1G"},
        {3 * G, "3G"},
        {G + 1, "1073741825"},
        {UINT64_MAX, "18446744073709551615"},
    };
    for (const auto &t : table) {
        char buf[32];
        llrdma_format_size(t.v, buf, sizeof buf);
        BOOST_TEST(std::string(buf) == t.want);
    }
    char small[3];
    llrdma_format_size(16384, small, sizeof small);
    BOOST_TEST(std::string(small) == "16");
    llrdma_format_size(16384, nullptr, 0); // must not crash
}

BOOST_AUTO_TEST_CASE(format_parse_round_trip)
{
    const uint64_t values[] = {0, 1, 63, 64, 1000, 1024, 4097, 16 * K, 2 * M, G, G - 1};
    for (uint64_t v : values) {
        char buf[32], err[128];
        uint64_t back = 0;
        llrdma_format_size(v, buf, sizeof buf);
        BOOST_TEST(llrdma_parse_size(buf, LLRDMA_HINT_MAX, &back, err, sizeof err) == LLRDMA_OK);
        BOOST_TEST(back == v);
    }
}
