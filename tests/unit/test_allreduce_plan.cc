// Table-driven tests of the Allreduce planner (llrdma_ar_plan) and scratch sizing.
#define BOOST_TEST_MODULE test_allreduce_plan
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "llrdma_allreduce.h"

#include <cstdint>
#include <string>
#include <vector>

namespace
{

constexpr size_t K = 1024;
constexpr size_t M = 1024 * K;
constexpr int RD = LLRDMA_AR_RECURSIVE_DOUBLING;
constexpr int RAB = LLRDMA_AR_RABENSEIFNER;
constexpr int RING = LLRDMA_AR_RING;
constexpr int AUTO = LLRDMA_AR_AUTO;

struct Row {
    size_t bytes, dsize;
    int p;
    uint64_t hint;
    int forced_alg;
    size_t forced_seg;
    int alg;      // expected
    size_t seg;   // expected
    int inflight; // expected
};

// clang-format off
const Row kRows[] = {
    // bytes      dsz  p     hint      forced      alg   seg       inflight
    // trivial cases
    {0,           8,   8,    0,        AUTO, 0,    RD,   64 * K,   8},
    {64 * M,      8,   1,    0,        AUTO, 0,    RD,   8 * M,    2},
    {8,           8,   1,    8 * K,    AUTO, 0,    RD,   8 * K,    8},
    // hint 0: small_max 8K; powers of two: Rabenseifner above it, at any size
    {8,           8,   2,    0,        AUTO, 0,    RD,   64 * K,   8},
    {8 * K,       8,   8,    0,        AUTO, 0,    RD,   64 * K,   8},
    {8 * K + 8,   8,   8,    0,        AUTO, 0,    RAB,  64 * K,   8},
    {M,           8,   8,    0,        AUTO, 0,    RAB,  64 * K,   8},
    {M + 8,       8,   8,    0,        AUTO, 0,    RAB,  64 * K,   8},
    {64 * M,      4,   16,   0,        AUTO, 0,    RAB,  512 * K,  2}, // block/8
    // non power of two: medium only up to 256K
    {8 * K,       8,   6,    0,        AUTO, 0,    RD,   64 * K,   8},
    {16 * K,      8,   6,    0,        AUTO, 0,    RAB,  64 * K,   8},
    {256 * K,     8,   6,    0,        AUTO, 0,    RAB,  64 * K,   8},
    {256 * K + 8, 8,   6,    0,        AUTO, 0,    RING, 64 * K,   8},
    {M,           4,   3,    0,        AUTO, 0,    RING, 64 * K,   8},
    // hint 8K: same thresholds, 8K segments, window capped at 8
    {8 * K,       8,   8,    8 * K,    AUTO, 0,    RD,   8 * K,    8},
    {16 * K,      8,   8,    8 * K,    AUTO, 0,    RAB,  8 * K,    8},
    {2 * M,       8,   8,    8 * K,    AUTO, 0,    RAB,  32 * K,   8}, // block/8 > hint
    // hint 32K / 64K raise small_max to the hint
    {32 * K,      8,   8,    32 * K,   AUTO, 0,    RD,   32 * K,   8},
    {32 * K + 8,  8,   8,    32 * K,   AUTO, 0,    RAB,  32 * K,   8},
    {64 * K,      8,   5,    64 * K,   AUTO, 0,    RD,   64 * K,   8},
    {64 * K + 8,  8,   5,    64 * K,   AUTO, 0,    RAB,  64 * K,   8},
    // hint 1M: small_max capped at 64K; 1M segments, 2 in flight
    {64 * K,      8,   16,   M,        AUTO, 0,    RD,   M,        2},
    {128 * K,     8,   16,   M,        AUTO, 0,    RAB,  M,        2},
    {16 * M,      8,   16,   M,        AUTO, 0,    RAB,  M,        2},
    // segment from hint (block / 8 = 4K here): below 4K -> generic 64K; above
    // 1M -> 1M; whole elements
    {96 * K,      8,   3,    2 * K,    RING, 0,    RING, 64 * K,   8},
    {96 * K,      8,   3,    4 * K,    RING, 0,    RING, 4 * K,    8},
    {96 * K,      8,   3,    128 * K,  RING, 0,    RING, 128 * K,  4},
    {96 * K,      8,   3,    256 * K,  RING, 0,    RING, 256 * K,  2},
    {96 * K,      8,   3,    1u << 30, RING, 0,    RING, M,        2},
    {96 * K,      12,  3,    10000,    RING, 0,    RING, 9996,     8},
    {96 * K,      12,  3,    0,        RING, 0,    RING, 65532,    8},
    // large non-power-of-two: ring, at most 8 segments per block
    {3 * M,       8,   3,    8 * K,    AUTO, 0,    RING, 128 * K,  4},
    {30 * M,      8,   6,    0,        AUTO, 0,    RING, 640 * K,  2},
    // fewer elements than ranks -> recursive doubling
    {16 * K,      8,   4096, 0,        AUTO, 0,    RD,   64 * K,   8},
    {16 * K,      8,   2048, 0,        AUTO, 0,    RAB,  64 * K,   8},
    // forced algorithm and segment
    {8,           8,   8,    0,        RING, 0,    RING, 64 * K,   8},
    {64 * M,      8,   8,    0,        RD,   0,    RD,   M,        2},
    {64 * M,      8,   7,    0,        RAB,  0,    RAB,  1198368,  2},
    {8,           8,   1,    0,        RING, 0,    RING, 64 * K,   8},
    {64 * M,      8,   8,    8 * K,    AUTO, 1001, RAB,  1000,     8},
    {64 * M,      8,   8,    8 * K,    AUTO, 3,    RAB,  8,        8},
    {64 * M,      16,  8,    0,        AUTO, 12,   RAB,  16,       8},
    {64 * M,      8,   8,    0,        RING, 2 * M, RING, 2 * M,   2},
    {64 * M,      8,   8,    0,        AUTO, 256 * K, RAB, 256 * K,  2},
};
// clang-format on

} // namespace

BOOST_AUTO_TEST_CASE(plan_table)
{
    int i = 0;
    for (const Row &r : kRows) {
        llrdma_ar_plan_t p{};
        BOOST_TEST_CONTEXT("row " << i++ << ": bytes " << r.bytes << " p " << r.p << " hint "
                                  << r.hint)
        {
            BOOST_REQUIRE_EQUAL(
                llrdma_ar_plan(r.bytes, r.dsize, r.p, r.hint, r.forced_alg, r.forced_seg, &p),
                LLRDMA_AR_OK);
            BOOST_CHECK_EQUAL(llrdma_ar_alg_name(p.alg), llrdma_ar_alg_name(r.alg));
            BOOST_CHECK_EQUAL(p.segment_bytes, r.seg);
            BOOST_CHECK_EQUAL(p.nsegments_in_flight, r.inflight);
            BOOST_CHECK(p.why != nullptr && *p.why);
            BOOST_CHECK_EQUAL(p.segment_bytes % r.dsize, 0u);
        }
    }
}

BOOST_AUTO_TEST_CASE(plan_invariants)
{
    // Every plan: never AUTO, segment a positive multiple of the element size,
    // segment <= hint whenever the hint is at least 4K and no override is given,
    // unless that would cut a ring block into more than 8 segments.
    const size_t sizes[] = {0, 8, 4 * K, 8 * K, 16 * K, 64 * K, 256 * K, M, 2 * M, 64 * M};
    const uint64_t hints[] = {0, 1, 4 * K - 1, 8 * K, 64 * K, M, 4 * M};
    const size_t dsizes[] = {1, 2, 4, 8, 12, 16};
    for (size_t ds : dsizes)
        for (size_t b : sizes)
            for (int p : {1, 2, 3, 4, 5, 7, 8, 9, 16, 100, 1024})
                for (uint64_t h : hints) {
                    size_t bytes = b / ds * ds;
                    llrdma_ar_plan_t pl{};
                    BOOST_REQUIRE_EQUAL(llrdma_ar_plan(bytes, ds, p, h, AUTO, 0, &pl), 0);
                    BOOST_CHECK(pl.alg >= RD && pl.alg <= RING);
                    BOOST_CHECK(pl.segment_bytes >= ds && pl.segment_bytes % ds == 0);
                    BOOST_CHECK(pl.nsegments_in_flight >= 2 && pl.nsegments_in_flight <= 8);
                    if (h >= 4 * K && h >= ds)
                        BOOST_CHECK(pl.segment_bytes <= std::max<size_t>(std::min<uint64_t>(h, M),
                                                                         (bytes / p + 7) / 8));
                    if (p == 1 || bytes <= 8 * K)
                        BOOST_CHECK_EQUAL(pl.alg, RD);
                }
}

BOOST_AUTO_TEST_CASE(plan_rejects_bad_arguments)
{
    llrdma_ar_plan_t p{};
    BOOST_CHECK_EQUAL(llrdma_ar_plan(8, 0, 2, 0, AUTO, 0, &p), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(llrdma_ar_plan(8, 8, 0, 0, AUTO, 0, &p), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(llrdma_ar_plan(8, 8, -3, 0, AUTO, 0, &p), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(llrdma_ar_plan(12, 8, 2, 0, AUTO, 0, &p), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(llrdma_ar_plan(8, 8, 2, 0, LLRDMA_AR_NALGS, 0, &p), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(llrdma_ar_plan(8, 8, 2, 0, -1, 0, &p), LLRDMA_AR_ERR_INVALID);
    BOOST_CHECK_EQUAL(llrdma_ar_plan(8, 8, 2, 0, AUTO, 0, nullptr), LLRDMA_AR_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(scratch_sizes)
{
    llrdma_ar_plan_t p{};
    p.alg = RD;
    p.segment_bytes = 64 * K;
    p.nsegments_in_flight = 4;
    BOOST_CHECK_EQUAL(llrdma_ar_scratch_bytes(&p, 1000, LLRDMA_DT_DOUBLE, 4), 8000u);
    BOOST_CHECK_EQUAL(llrdma_ar_scratch_bytes(&p, 1000, LLRDMA_DT_DOUBLE, 1), 0u);
    BOOST_CHECK_EQUAL(llrdma_ar_scratch_bytes(&p, 0, LLRDMA_DT_DOUBLE, 4), 0u);
    BOOST_CHECK_EQUAL(llrdma_ar_scratch_bytes(&p, 10, -1, 4), 0u);
    p.alg = RAB;
    BOOST_CHECK_EQUAL(llrdma_ar_scratch_bytes(&p, 1000, LLRDMA_DT_2INT, 5), 8000u);
    p.alg = RING;
    // 1M doubles on 4 ranks: blocks of 256K elements, 8K-element segments, 4 slots
    BOOST_CHECK_EQUAL(llrdma_ar_scratch_bytes(&p, M, LLRDMA_DT_DOUBLE, 4), 4 * 64 * K);
    // small vector: segments shrink to the largest block (3 elements of 10 on 4)
    BOOST_CHECK_EQUAL(llrdma_ar_scratch_bytes(&p, 10, LLRDMA_DT_DOUBLE, 4), 4u * 3 * 8);
    BOOST_CHECK_EQUAL(llrdma_ar_scratch_bytes(nullptr, 10, LLRDMA_DT_DOUBLE, 4), 0u);
    // shm_split (the device fold's slice): its longest slice, slices being
    // whole 64-byte lines.  64 doubles on 16 ranks: one line (8 doubles) on
    // ranks 0-7, none on 8-15; 1000 doubles: 125 lines, at most 8 a rank;
    // 100 floats on 3 ranks: 7 lines of 16, 3 on rank 0.
    p.alg = LLRDMA_AR_SHM_SPLIT;
    p.segment_bytes = 2 * M;
    BOOST_CHECK_EQUAL(llrdma_ar_scratch_bytes(&p, 64, LLRDMA_DT_DOUBLE, 16), 64u);
    BOOST_CHECK_EQUAL(llrdma_ar_scratch_bytes(&p, 1000, LLRDMA_DT_DOUBLE, 16), 512u);
    BOOST_CHECK_EQUAL(llrdma_ar_scratch_bytes(&p, 100, LLRDMA_DT_FLOAT, 3), 192u);
    // A round is the segment: 2 MB of doubles on 16 ranks, 16K doubles a slice.
    BOOST_CHECK_EQUAL(llrdma_ar_scratch_bytes(&p, 4 * M, LLRDMA_DT_DOUBLE, 16), 128u * K);
}

BOOST_AUTO_TEST_CASE(plan_knows_the_eager_limit)
{
    // eager 4032 (Open MPI shared memory: 4K limit less header margin)
    const size_t eager = 4096 - 64;
    struct {
        size_t bytes;
        int p;
        uint64_t hint;
        size_t eager;
        int alg;
    } rows[] = {
        {2 * K, 2, 0, eager, RD},         // one eager message
        {4 * K, 2, 0, eager, RAB},        // whole vector rendezvous, halves eager
        {8 * K - 128, 8, 0, eager, RAB},  // halves (4032) still eager
        {8 * K, 2, 0, eager, RD},         // halves rendezvous too: fewer steps win
        {4 * K, 2, 0, 0, RD},             // transport unknown: the plain rule
        {4 * K, 6, 0, eager, RAB},        // any rank count
        {64 * K, 4, 64 * K, 48 * K, RAB}, // hint-sized vector, halves eager
        {16 * K, 4, 64 * K, 128 * K, RD}, // btl/llrdma's eager covers the hint
    };
    for (const auto &r : rows) {
        llrdma_ar_plan_t pl{};
        BOOST_TEST_CONTEXT("bytes " << r.bytes << " p " << r.p << " eager " << r.eager)
        {
            BOOST_REQUIRE_EQUAL(llrdma_ar_plan_ex(r.bytes, 8, r.p, r.hint, r.eager, AUTO, 0, &pl),
                                LLRDMA_AR_OK);
            BOOST_CHECK_EQUAL(llrdma_ar_alg_name(pl.alg), llrdma_ar_alg_name(r.alg));
        }
    }
    // plan() is plan_ex() with the transport unknown
    llrdma_ar_plan_t a{}, b{};
    BOOST_REQUIRE_EQUAL(llrdma_ar_plan(4 * K, 8, 2, 0, AUTO, 0, &a), LLRDMA_AR_OK);
    BOOST_REQUIRE_EQUAL(llrdma_ar_plan_ex(4 * K, 8, 2, 0, 0, AUTO, 0, &b), LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(a.alg, b.alg);
    BOOST_CHECK_EQUAL(a.segment_bytes, b.segment_bytes);
}

BOOST_AUTO_TEST_CASE(plan_with_a_shared_arena)
{
    constexpr int DIRECT = LLRDMA_AR_SHM_DIRECT;
    constexpr int SPLIT = LLRDMA_AR_SHM_SPLIT;
    struct ShmRow {
        size_t bytes;
        int p;
        uint64_t hint;
        size_t chunk;
        int forced_alg;
        size_t forced_seg;
        int alg;    // expected
        size_t seg; // expected
    };
    // clang-format off
    const ShmRow rows[] = {
        // bytes       p   hint     chunk     forced        alg     seg
        {8,            2,  0,       256 * K,  AUTO,   0,    DIRECT, 256 * K},
        {2 * K,        2,  0,       256 * K,  AUTO,   0,    DIRECT, 256 * K}, // 4K total
        {2 * K + 8,    2,  0,       256 * K,  AUTO,   0,    SPLIT,  256 * K},
        {256,          16, 0,       256 * K,  AUTO,   0,    DIRECT, 256 * K},
        {256 + 8,      16, 0,       256 * K,  AUTO,   0,    SPLIT,  256 * K},
        {64 * M,       16, 8 * K,   256 * K,  AUTO,   0,    SPLIT,  256 * K}, // hint ignored
        {1 * K,        3,  64 * K,  256 * K,  AUTO,   0,    DIRECT, 256 * K}, // hint ignored
        {8 * K,        3,  64 * K,  256 * K,  AUTO,   0,    SPLIT,  256 * K},
        {M,            4,  0,       256 * K,  AUTO,   4 * K, SPLIT, 4 * K},   // smaller segment
        {M,            4,  0,       256 * K,  AUTO,   M,    SPLIT,  256 * K}, // at most the chunk
        {8,            4,  0,       256 * K,  SPLIT,  0,    SPLIT,  256 * K}, // forced
        {M,            4,  0,       256 * K,  DIRECT, 0,    DIRECT, 256 * K},
        {M,            4,  0,       256 * K,  RING,   0,    RING,   64 * K},  // forced message alg
        {M,            4,  0,       0,        DIRECT, 0,    RAB,    64 * K},  // no arena: auto
        {8,            4,  0,       0,        SPLIT,  0,    RD,     64 * K},
        {0,            4,  0,       256 * K,  AUTO,   0,    RD,     64 * K},  // nothing to do
        {8,            1,  0,       256 * K,  AUTO,   0,    RD,     64 * K},
    };
    // clang-format on
    for (const ShmRow &r : rows) {
        llrdma_ar_plan_t plan{};
        std::string ctx = "bytes " + std::to_string(r.bytes) + " p " + std::to_string(r.p) +
                          " chunk " + std::to_string(r.chunk) + " forced " +
                          std::to_string(r.forced_alg);
        BOOST_TEST_CONTEXT(ctx)
        {
            BOOST_REQUIRE_EQUAL(llrdma_ar_plan_shm(r.bytes, 8, r.p, r.hint, 0, r.chunk,
                                                   r.forced_alg, r.forced_seg, &plan),
                                LLRDMA_AR_OK);
            BOOST_CHECK_EQUAL(plan.alg, r.alg);
            BOOST_CHECK_EQUAL(plan.segment_bytes, r.seg);
            BOOST_CHECK(plan.why != nullptr);
        }
    }
    llrdma_ar_plan_t plan{};
    // a chunk smaller than one element cannot hold a round
    BOOST_CHECK_EQUAL(llrdma_ar_plan_shm(64, 16, 4, 0, 0, 8, AUTO, 0, &plan),
                      LLRDMA_AR_ERR_INVALID);
    // the arena size: flag and info lines, abort line, the lines (two
    // generations of 37 per rank: 2 KB in 56-byte payloads), 4p + 2 chunks;
    // invalid chunks give 0
    BOOST_CHECK_EQUAL(llrdma_ar_shm_bytes(4, 1024), 4 * 192 + 64 + 4 * 2 * 37 * 64 + 18 * 1024);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_bytes(4, 1000), 0u);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_bytes(0, 1024), 0u);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_bytes(4, size_t(-64)), 0u);
    // info lines: one per rank, distinct, inside the arena, clear of the flags
    std::vector<unsigned char> arena(llrdma_ar_shm_bytes(3, 1024), 0);
    llrdma_ar_shm_t shm{};
    shm.base = arena.data();
    shm.chunk_bytes = 1024;
    auto *i0 = static_cast<unsigned char *>(llrdma_ar_shm_rank_info(&shm, 3, 0));
    auto *i2 = static_cast<unsigned char *>(llrdma_ar_shm_rank_info(&shm, 3, 2));
    BOOST_REQUIRE(i0 && i2);
    BOOST_CHECK(i0 >= arena.data() + 128 && i2 + 64 <= arena.data() + 3 * 192);
    BOOST_CHECK_EQUAL(i2 - i0, 2 * 192);
    BOOST_CHECK(llrdma_ar_shm_rank_info(&shm, 3, 3) == nullptr);
    BOOST_CHECK(llrdma_ar_shm_rank_info(&shm, 3, -1) == nullptr);
    BOOST_CHECK(llrdma_ar_shm_rank_info(nullptr, 3, 0) == nullptr);
    // default chunk: L2 per core as a power of two (64K-4M), arena <= 160 MB
    BOOST_CHECK_EQUAL(llrdma_ar_shm_default_chunk(2, 1 * M), 1 * M);    // the 2-core VM
    BOOST_CHECK_EQUAL(llrdma_ar_shm_default_chunk(16, 2 * M), 2 * M);   // H200 host: 132 MB
    BOOST_CHECK_EQUAL(llrdma_ar_shm_default_chunk(2, 0), 1 * M);        // L2 unknown
    BOOST_CHECK_EQUAL(llrdma_ar_shm_default_chunk(2, 3 * M), 2 * M);    // not a power of two
    BOOST_CHECK_EQUAL(llrdma_ar_shm_default_chunk(2, 64 * M), 4 * M);   // at most 4M
    BOOST_CHECK_EQUAL(llrdma_ar_shm_default_chunk(2, 16 * K), 64 * K);  // at least 64K
    BOOST_CHECK_EQUAL(llrdma_ar_shm_default_chunk(64, 2 * M), 512 * K); // 258 chunks
    BOOST_CHECK_EQUAL(llrdma_ar_shm_default_chunk(1 << 20, 2 * M), LLRDMA_AR_SHM_MIN_CHUNK);
    for (int p : {1, 2, 3, 16, 100, 1000})
        BOOST_CHECK(llrdma_ar_shm_bytes(p, llrdma_ar_shm_default_chunk(p, 2 * M)) > 0);
    // streamed copies out: from twice the L2 on Intel, never elsewhere or unknown
    BOOST_CHECK_EQUAL(llrdma_ar_shm_default_stream_min(2 * M, 1), 4 * M); // H100/H200 host
    BOOST_CHECK_EQUAL(llrdma_ar_shm_default_stream_min(2 * M, 0), 0u);    // the AMD VM
    BOOST_CHECK_EQUAL(llrdma_ar_shm_default_stream_min(0, 1), 0u);        // L2 unknown
    BOOST_CHECK_EQUAL(std::string(llrdma_ar_alg_name(DIRECT)), "shm_direct");
    BOOST_CHECK_EQUAL(llrdma_ar_alg_from_name("shm_split"), SPLIT);
}

// Device vectors: the size rules coll/llrdma and llrdma-check share.
BOOST_AUTO_TEST_CASE(device_vector_paths)
{
    llrdma_ar_dev_rule_t r = {};
    r.shm_plan = r.arena = 1;
    r.gpu_peer = 1; // auto
    r.peer_min = 64 << 10;
    r.stage_auto = 1;
    const char *why = nullptr;
    // "auto" staging: 16K with an arena, 2M without.
    BOOST_TEST(llrdma_ar_dev_stage_max(&r) == 16u << 10);
    BOOST_TEST(llrdma_ar_dev_path(16 << 10, &r, 1, 0, &why) == LLRDMA_AR_DEV_WHOLE);
    BOOST_TEST(std::string(why).find("gpu_stage_max") != std::string::npos);
    BOOST_TEST(llrdma_ar_dev_path((16 << 10) + 1, &r, 1, 0, &why) == LLRDMA_AR_DEV_GPU);
    BOOST_TEST(std::string(why).find("arena") != std::string::npos);
    // From gpu_peer_min the peer path, when the GPUs reach each other.
    BOOST_TEST(!llrdma_ar_dev_try_peer((64 << 10) - 1, &r));
    BOOST_TEST(llrdma_ar_dev_try_peer(64 << 10, &r));
    BOOST_TEST(llrdma_ar_dev_path(64 << 10, &r, 1, 0, &why) == LLRDMA_AR_DEV_PEER);
    BOOST_TEST(llrdma_ar_dev_path(64 << 10, &r, 0, 0, &why) == LLRDMA_AR_DEV_GPU);
    // Ranks sharing a GPU copy whole under "auto" staging only.
    BOOST_TEST(llrdma_ar_dev_path(1 << 20, &r, 0, 1, &why) == LLRDMA_AR_DEV_WHOLE);
    r.stage_auto = 0;
    r.stage_max = 0;
    BOOST_TEST(llrdma_ar_dev_path(1 << 20, &r, 0, 1, &why) == LLRDMA_AR_DEV_GPU);
    BOOST_TEST(llrdma_ar_dev_path(8, &r, 0, 0, &why) == LLRDMA_AR_DEV_GPU); // staging off
    r.stage_max = 1 << 20;
    BOOST_TEST(llrdma_ar_dev_path(1 << 20, &r, 1, 0, &why) == LLRDMA_AR_DEV_PEER);
    BOOST_TEST(llrdma_ar_dev_path(1 << 20, &r, 0, 0, &why) == LLRDMA_AR_DEV_WHOLE);
    // Peer path off, or not an arena plan (a forced message algorithm): never tried.
    r.gpu_peer = 0;
    BOOST_TEST(!llrdma_ar_dev_try_peer(1 << 30, &r));
    r.gpu_peer = 2;
    r.shm_plan = 0;
    BOOST_TEST(!llrdma_ar_dev_try_peer(1 << 30, &r));
    BOOST_TEST(llrdma_ar_dev_path(1 << 30, &r, 1, 0, &why) == LLRDMA_AR_DEV_GPU);
    BOOST_TEST(std::string(why).find("PML") != std::string::npos);
    // Several nodes: copied whole, unless this rank's NIC registers GPU
    // memory and the call's inter-node step goes by RDMA (GPU-direct).
    {
        llrdma_ar_dev_rule_t h = r;
        h.hier = 1;
        BOOST_TEST(!llrdma_ar_dev_try_peer(1 << 30, &h));
        BOOST_TEST(llrdma_ar_dev_path(1 << 20, &h, 1, 0, &why) == LLRDMA_AR_DEV_WHOLE);
        h.direct = 1;
        BOOST_TEST(llrdma_ar_dev_path(8, &h, 1, 1, &why) == LLRDMA_AR_DEV_DIRECT);
        BOOST_TEST(std::string(why).find("RDMA") != std::string::npos);
        BOOST_TEST(std::string(llrdma_ar_dev_path_name(LLRDMA_AR_DEV_DIRECT)) == "gpu-direct");
    }
    // No arena: "auto" stages up to 2M.
    r.arena = 0;
    r.stage_auto = 1;
    BOOST_TEST(llrdma_ar_dev_stage_max(&r) == 2u << 20);
    // Several nodes: whole to the host at every size, even with peer access.
    r.hier = 1;
    r.shm_plan = 1;
    BOOST_TEST(!llrdma_ar_dev_try_peer(1 << 30, &r));
    BOOST_TEST(llrdma_ar_dev_path(1 << 30, &r, 1, 0, &why) == LLRDMA_AR_DEV_WHOLE);
    BOOST_TEST(std::string(llrdma_ar_dev_path_name(LLRDMA_AR_DEV_PEER)) == "gpu-peer");
    BOOST_TEST(llrdma_ar_dev_path(8, nullptr, 1, 0, &why) == 0);
}

// The waits' policy: oversubscription from the counts, the knobs' meaning.
BOOST_AUTO_TEST_CASE(wait_policy)
{
    // ranks here, online CPUs, affinity CPUs, quota CPUs (0: none)
    BOOST_CHECK_EQUAL(llrdma_ar_oversubscribed(4, 2, 2, 0), 1);     // 4 ranks on a 2-CPU node
    BOOST_CHECK_EQUAL(llrdma_ar_oversubscribed(2, 2, 2, 0), 0);     // one CPU each
    BOOST_CHECK_EQUAL(llrdma_ar_oversubscribed(4, 64, 2, 0), 1);    // a 2-CPU cpuset, unbound ranks
    BOOST_CHECK_EQUAL(llrdma_ar_oversubscribed(8, 64, 1, 0), 0);    // bound, one core each
    BOOST_CHECK_EQUAL(llrdma_ar_oversubscribed(4, 64, 64, 2.5), 1); // a CPU quota of 2.5
    BOOST_CHECK_EQUAL(llrdma_ar_oversubscribed(2, 64, 64, 2.5), 0);
    BOOST_CHECK_EQUAL(llrdma_ar_oversubscribed(1, 1, 1, 0.5), 0); // alone: nobody to wait for
    BOOST_CHECK_EQUAL(llrdma_ar_oversubscribed(4, 0, 0, 0), 0);   // nothing known: not assumed
    llrdma_ar_wait_policy_t p = llrdma_ar_wait_policy_for(1, -1, 100);
    BOOST_CHECK_EQUAL(p.spin_ns, 0u); // auto, oversubscribed: yield at once
    BOOST_CHECK_EQUAL(p.sleep_ns, 100000000u);
    p = llrdma_ar_wait_policy_for(0, -1, 0);
    BOOST_CHECK_EQUAL(p.spin_ns, 10000000u);  // auto: spin 10 ms first
    BOOST_CHECK_EQUAL(p.sleep_ns, 0u);        // never sleep
    p = llrdma_ar_wait_policy_for(1, 250, 5); // the knob wins over oversubscription
    BOOST_CHECK_EQUAL(p.spin_ns, 250000u);
    BOOST_CHECK_EQUAL(p.sleep_ns, 5000000u);
}

// One wait's idle steps: progress every 64th step, the clock only then; the
// naps begin once sleep_ns have passed and double to 1 ms; a wait whose
// sleep budget has not passed never naps.
namespace
{
int g_progress;
void count_progress(void *)
{
    ++g_progress;
}
} // namespace

BOOST_AUTO_TEST_CASE(wait_idle_steps)
{
    llrdma_ar_wait_policy_t never{0, 0}, soon{0, 1};
    llrdma_ar_wait_t w{};
    g_progress = 0;
    for (int i = 0; i < 63; ++i)
        llrdma_ar_wait_idle(&never, &w, count_progress, nullptr);
    BOOST_CHECK_EQUAL(g_progress, 0);
    BOOST_CHECK_EQUAL(w.start_ns, 0u); // no clock read yet
    llrdma_ar_wait_idle(&never, &w, count_progress, nullptr);
    BOOST_CHECK_EQUAL(g_progress, 1);
    BOOST_CHECK_NE(w.start_ns, 0u);
    BOOST_CHECK_EQUAL(w.now_ns, w.start_ns); // the reading callers reuse (liveness)
    for (int i = 0; i < 64 * 4; ++i)
        llrdma_ar_wait_idle(&never, &w, count_progress, nullptr);
    BOOST_CHECK_EQUAL(g_progress, 5);
    BOOST_CHECK_EQUAL(w.nap_us, 0u); // never sleeps
    llrdma_ar_wait_t s{};
    std::vector<uint32_t> naps;
    for (int i = 0; i < 64 * 8; ++i) {
        llrdma_ar_wait_idle(&soon, &s, nullptr, nullptr);
        if (s.polls % 64 == 0)
            naps.push_back(s.nap_us);
    }
    // The first 64th step starts the clock (no nap: 0 ns waited), then
    // 50 us doubling, capped at 1 ms.
    BOOST_CHECK((naps == std::vector<uint32_t>{0, 50, 100, 200, 400, 800, 1000, 1000}));
}
