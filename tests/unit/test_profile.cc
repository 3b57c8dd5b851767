#define BOOST_TEST_MODULE test_profile
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "llrdma_core.h"

#include <cstring>
#include <vector>

namespace
{

constexpr uint64_t K = 1024, M = K * K, G = M * K;

llrdma_profile_t derive(uint64_t hint, const llrdma_profile_overrides_t *o = nullptr)
{
    llrdma_profile_t p;
    int rc = llrdma_profile_derive(hint, o, &p);
    BOOST_TEST_REQUIRE(rc == LLRDMA_OK);
    return p;
}

// Expected values for one hint, in the order of the table in the lead's docs/profile.md.
struct Expect {
    uint64_t hint;
    uint32_t ll_recv, ll_inline, ll_rq;
    uint32_t bw_recv;
    uint64_t bw_frag, bw_pipeline, coll;
};

const Expect kTable[] = {
    // hint   ll_recv       ll_inl ll_rq bw_recv  frag     pipeline coll
    {1, 128, 65, 256, 65600, 64 * K, 1 * M, 64 * K},
    {64, 128, 128, 256, 65600, 64 * K, 1 * M, 64 * K},
    {8 * K, 8256, 256, 64, 65600, 64 * K, 1 * M, 8 * K},
    {16 * K, 16448, 256, 32, 65600, 64 * K, 1 * M, 16 * K},
    {64 * K, 65600, 256, 16, 131136, 128 * K, 1 * M, 64 * K},
    {1 * M, 65600, 256, 16, 1048640, 1 * M, 4 * M, 1 * M},
    {1 * G, 65600, 256, 16, 1048640, 1 * M, 4 * M, 1 * M},
};

} // namespace

BOOST_AUTO_TEST_CASE(generic_profile_for_hint_zero)
{
    llrdma_profile_t p = derive(0);
    BOOST_TEST(p.hint == 0u);
    BOOST_TEST(p.generic == 1);
    const llrdma_path_profile_t &bw = p.bw;
    BOOST_TEST(bw.min_bytes == 1u);
    BOOST_TEST(bw.max_bytes == UINT64_MAX);
    BOOST_TEST(bw.sq_depth == 256u);
    BOOST_TEST(bw.rq_depth == 32u); // 4 MiB of 64K buffers per connection, power of two
    BOOST_TEST(bw.recv_buf_bytes == 64 * K + 64);
    BOOST_TEST(bw.inline_bytes == 64u);
    BOOST_TEST(bw.signal_interval == 16u);
    BOOST_TEST(bw.cq_mod_count == 8u);
    BOOST_TEST(bw.cq_mod_usec == 16u);
    BOOST_TEST(bw.poll == LLRDMA_POLL_EVENT);
    BOOST_TEST(bw.eager_limit == 12 * K);
    BOOST_TEST(bw.max_send_size == 64 * K);
    BOOST_TEST(bw.rdma_pipeline_bytes == 1 * M);
    BOOST_TEST(bw.rdma_rd_atomic == 16u);
    BOOST_TEST(bw.rdma_frag_bytes == 1 * M);
    BOOST_TEST(p.coll_segment_bytes == 64 * K);
    // No low-latency path at all.
    const llrdma_path_profile_t zero{};
    BOOST_TEST(std::memcmp(&p.ll, &zero, sizeof zero) == 0);
}

BOOST_AUTO_TEST_CASE(table_of_hints)
{
    for (const Expect &e : kTable) {
        llrdma_profile_t p = derive(e.hint);
        BOOST_TEST_CONTEXT("hint " << e.hint)
        {
            BOOST_TEST(p.hint == e.hint);
            BOOST_TEST(p.generic == 0);
            BOOST_TEST(p.ll.min_bytes == 1u);
            BOOST_TEST(p.ll.max_bytes == e.hint);
            BOOST_TEST(p.ll.recv_buf_bytes == e.ll_recv);
            BOOST_TEST(p.ll.inline_bytes == e.ll_inline);
            BOOST_TEST(p.ll.rq_depth == e.ll_rq);
            BOOST_TEST(p.ll.sq_depth == 64u);
            BOOST_TEST(p.ll.signal_interval == 16u);
            BOOST_TEST(p.ll.cq_mod_count == 0u);
            BOOST_TEST(p.ll.cq_mod_usec == 0u);
            BOOST_TEST(p.ll.poll == LLRDMA_POLL_BUSY);
            BOOST_TEST(p.ll.eager_limit == std::min<uint64_t>(e.hint, 64 * K));
            BOOST_TEST(p.ll.max_send_size == std::min<uint64_t>(e.hint, 64 * K));
            BOOST_TEST(p.ll.rdma_pipeline_bytes == 0u);
            BOOST_TEST(p.ll.rdma_rd_atomic == 0u); // no RDMA on the low-latency QP
            BOOST_TEST(p.ll.rdma_frag_bytes == 0u);
            // The hint does not size RDMA: a small hint cannot cap bandwidth.
            BOOST_TEST(p.bw.rdma_rd_atomic == 16u);
            BOOST_TEST(p.bw.rdma_frag_bytes == 1 * M);

            BOOST_TEST(p.bw.min_bytes == e.hint + 1);
            BOOST_TEST(p.bw.max_bytes == UINT64_MAX);
            BOOST_TEST(p.bw.sq_depth == 512u);
            // ~4 MiB of buffers per connection, 4..64, a power of two (written out, not derived).
            const uint32_t bw_rq = e.bw_recv <= 64 * K + 64    ? 32u
                                   : e.bw_recv <= 128 * K + 64 ? 16u
                                   : e.bw_recv <= 256 * K + 64 ? 8u
                                                               : 4u;
            BOOST_TEST(p.bw.rq_depth == bw_rq);
            BOOST_TEST(p.bw.recv_buf_bytes == e.bw_recv);
            BOOST_TEST(p.bw.inline_bytes == 0u);
            BOOST_TEST(p.bw.signal_interval == 64u);
            BOOST_TEST(p.bw.cq_mod_count == 16u);
            BOOST_TEST(p.bw.cq_mod_usec == 8u);
            BOOST_TEST(p.bw.poll == LLRDMA_POLL_EVENT);
            BOOST_TEST(p.bw.eager_limit == e.bw_frag);
            BOOST_TEST(p.bw.max_send_size == e.bw_frag);
            BOOST_TEST(p.bw.rdma_pipeline_bytes == e.bw_pipeline);
            BOOST_TEST(p.coll_segment_bytes == e.coll);
        }
    }
}

BOOST_AUTO_TEST_CASE(coll_segment_rule)
{
    BOOST_TEST(derive(1000).coll_segment_bytes == 64 * K); // below 4K: generic segment
    BOOST_TEST(derive(4095).coll_segment_bytes == 64 * K);
    BOOST_TEST(derive(4096).coll_segment_bytes == 4096u); // from 4K: the hint itself
    BOOST_TEST(derive(5000).coll_segment_bytes == 5000u);
    BOOST_TEST(derive(1 * M + 100).coll_segment_bytes == 1 * M); // capped
}

BOOST_AUTO_TEST_CASE(invariants_over_many_hints)
{
    std::vector<uint64_t> hints;
    for (uint64_t h = 1; h <= G; h = h * 2)
        for (uint64_t d : {h - 1, h, h + 1, h + h / 3})
            if (d >= 1 && d <= G)
                hints.push_back(d);
    llrdma_profile_t prev{};
    for (uint64_t h : hints) {
        llrdma_profile_t p = derive(h);
        BOOST_TEST_CONTEXT("hint " << h)
        {
            BOOST_TEST(p.ll.max_bytes == h);
            BOOST_TEST(p.bw.min_bytes == h + 1);
            BOOST_TEST(p.ll.sq_depth < p.bw.sq_depth);
            BOOST_TEST((p.ll.cq_mod_count == 0 && p.ll.cq_mod_usec == 0)); // no moderation
            BOOST_TEST((p.bw.cq_mod_count > 0 && p.bw.cq_mod_usec > 0));   // moderation
            BOOST_TEST(p.ll.poll == LLRDMA_POLL_BUSY);
            BOOST_TEST(p.bw.poll == LLRDMA_POLL_EVENT);
            // Buffers hold a whole message plus the header, cache-line aligned.
            BOOST_TEST(p.ll.recv_buf_bytes >= std::min<uint64_t>(h, 64 * K) + 64);
            BOOST_TEST(p.ll.recv_buf_bytes >= p.ll.max_send_size + 64);
            BOOST_TEST(p.ll.recv_buf_bytes <= 64 * K + 128);
            BOOST_TEST(p.ll.recv_buf_bytes % 64 == 0u);
            BOOST_TEST(p.bw.recv_buf_bytes >= p.bw.max_send_size + 64);
            BOOST_TEST(p.bw.recv_buf_bytes % 64 == 0u);
            BOOST_TEST(p.ll.inline_bytes <= 256u);
            BOOST_TEST(p.ll.signal_interval >= 1u);
            BOOST_TEST(p.ll.signal_interval <= p.ll.sq_depth);
            BOOST_TEST(p.bw.signal_interval <= p.bw.sq_depth);
            BOOST_TEST(p.ll.rq_depth >= 16u);
            BOOST_TEST(p.ll.rq_depth <= 256u);
            BOOST_TEST((p.ll.rq_depth & (p.ll.rq_depth - 1)) == 0u);
            // Until the cap, a message just above the hint fits one bw fragment.
            if (h <= 512 * K)
                BOOST_TEST(p.bw.max_send_size >= 2 * h);
            BOOST_TEST(p.bw.rdma_pipeline_bytes >= p.bw.max_send_size);
            BOOST_TEST(p.coll_segment_bytes >= 4 * K);
            BOOST_TEST(p.coll_segment_bytes <= 1 * M);
            BOOST_TEST(p.coll_segment_bytes <= 1 * M);
            if (prev.hint != 0 && prev.hint < h) {
                BOOST_TEST(p.ll.recv_buf_bytes >= prev.ll.recv_buf_bytes);
                BOOST_TEST(p.ll.rq_depth <= prev.ll.rq_depth);
                BOOST_TEST(p.bw.max_send_size >= prev.bw.max_send_size);
                if (prev.hint >= 4 * K) // below 4K the segment is the generic 64K
                    BOOST_TEST(p.coll_segment_bytes >= prev.coll_segment_bytes);
            }
        }
        prev = p;
    }
}

BOOST_AUTO_TEST_CASE(range_and_arguments)
{
    llrdma_profile_t p;
    BOOST_TEST(llrdma_profile_derive(G + 1, nullptr, &p) == LLRDMA_ERR_RANGE);
    BOOST_TEST(llrdma_profile_derive(UINT64_MAX, nullptr, &p) == LLRDMA_ERR_RANGE);
    BOOST_TEST(llrdma_profile_derive(16 * K, nullptr, nullptr) == LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(overrides_replace_derived_values)
{
    llrdma_profile_overrides_t o{};
    o.ll_sq_depth = 128;
    o.bw_sq_depth = 1024;
    o.ll_inline_bytes = 512;
    o.bw_signal_interval = 32;
    o.bw_cq_mod_count = 4;
    o.bw_cq_mod_usec = 100;
    o.coll_segment_bytes = 256 * K;
    llrdma_profile_t p = derive(8 * K, &o);
    BOOST_TEST(p.ll.sq_depth == 128u);
    BOOST_TEST(p.ll.signal_interval == 16u); // still valid for the deeper queue
    BOOST_TEST(p.bw.sq_depth == 1024u);
    BOOST_TEST(p.ll.inline_bytes == 512u);
    BOOST_TEST(p.bw.signal_interval == 32u);
    BOOST_TEST(p.bw.cq_mod_count == 4u);
    BOOST_TEST(p.bw.cq_mod_usec == 100u);
    BOOST_TEST(p.coll_segment_bytes == 256 * K);
    // Untouched fields keep their derived values.
    llrdma_profile_t d = derive(8 * K);
    BOOST_TEST(p.ll.recv_buf_bytes == d.ll.recv_buf_bytes);
    BOOST_TEST(p.bw.max_send_size == d.bw.max_send_size);

    // All-zero overrides change nothing.
    llrdma_profile_overrides_t none{};
    llrdma_profile_t z = derive(8 * K, &none);
    BOOST_TEST(std::memcmp(&z, &d, sizeof z) == 0);
}

BOOST_AUTO_TEST_CASE(shallower_queue_rederives_signal_interval)
{
    llrdma_profile_overrides_t o{};
    o.ll_sq_depth = 8;
    o.bw_sq_depth = 32;
    llrdma_profile_t p = derive(4 * K, &o);
    BOOST_TEST(p.ll.signal_interval == 2u);
    BOOST_TEST(p.bw.signal_interval == 8u);
    o.ll_sq_depth = 1;
    o.bw_sq_depth = 1;
    p = derive(4 * K, &o);
    BOOST_TEST(p.ll.signal_interval == 1u);
    BOOST_TEST(p.bw.signal_interval == 1u);
}

BOOST_AUTO_TEST_CASE(overrides_in_generic_mode)
{
    llrdma_profile_overrides_t o{};
    o.ll_sq_depth = 100; // no ll path: validated, not applied
    o.ll_inline_bytes = 128;
    o.bw_cq_mod_count = 1;
    llrdma_profile_t p = derive(0, &o);
    BOOST_TEST(p.ll.sq_depth == 0u);
    BOOST_TEST(p.ll.inline_bytes == 0u);
    BOOST_TEST(p.bw.cq_mod_count == 1u);
}

BOOST_AUTO_TEST_CASE(override_validation)
{
    const struct {
        const char *what;
        llrdma_profile_overrides_t o;
        int rc;
    } table[] = {
        {"ll sq max", {32768, 0, 0, 0, 0, 0, 0}, LLRDMA_OK},
        {"ll sq too deep", {32769, 0, 0, 0, 0, 0, 0}, LLRDMA_ERR_INVALID},
        {"bw sq too deep", {0, 40000, 0, 0, 0, 0, 0}, LLRDMA_ERR_INVALID},
        {"inline max", {0, 0, 4096, 0, 0, 0, 0}, LLRDMA_OK},
        {"inline too big", {0, 0, 4097, 0, 0, 0, 0}, LLRDMA_ERR_INVALID},
        {"signal = sq", {0, 0, 0, 512, 0, 0, 0}, LLRDMA_OK},
        {"signal > sq", {0, 0, 0, 513, 0, 0, 0}, LLRDMA_ERR_INVALID},
        {"signal > overridden sq", {0, 16, 0, 32, 0, 0, 0}, LLRDMA_ERR_INVALID},
        {"cq count max", {0, 0, 0, 0, 65535, 0, 0}, LLRDMA_OK},
        {"cq count too big", {0, 0, 0, 0, 65536, 0, 0}, LLRDMA_ERR_INVALID},
        {"cq usec too big", {0, 0, 0, 0, 0, 70000, 0}, LLRDMA_ERR_INVALID},
        {"coll too big", {0, 0, 0, 0, 0, 0, G + 1}, LLRDMA_ERR_INVALID},
    };
    for (const auto &t : table) {
        llrdma_profile_t p, before;
        std::memset(&p, 0xab, sizeof p);
        before = p;
        int rc = llrdma_profile_derive(16 * K, &t.o, &p);
        BOOST_TEST_CONTEXT(t.what)
        {
            BOOST_TEST(rc == t.rc);
            if (rc != LLRDMA_OK) // never a half-applied profile
                BOOST_TEST(std::memcmp(&p, &before, sizeof p) == 0);
        }
    }
}

BOOST_AUTO_TEST_CASE(coll_segment_shortcut_matches_profile)
{
    for (uint64_t h :
         {uint64_t{0}, uint64_t{1}, uint64_t{4095}, uint64_t{4096}, uint64_t{5000},
          uint64_t{64 * 1024}, uint64_t{1 << 20}, uint64_t{(1 << 20) + 1}, uint64_t{1} << 30}) {
        llrdma_profile_t p;
        BOOST_REQUIRE(llrdma_profile_derive(h, nullptr, &p) == LLRDMA_OK);
        BOOST_TEST(llrdma_coll_segment_for_hint(h) == p.coll_segment_bytes);
    }
}
