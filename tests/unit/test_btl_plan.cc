#define BOOST_TEST_MODULE test_btl_plan
#include <boost/test/unit_test.hpp>

#include "llrdma_btl_plan.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>

namespace
{

constexpr uint32_t kHdr = 8; // sizeof(mca_btl_llrdma_hdr_t)

llrdma_profile_t profile(uint64_t hint)
{
    llrdma_profile_t p;
    BOOST_TEST_REQUIRE(llrdma_profile_derive(hint, nullptr, &p) == LLRDMA_OK);
    return p;
}

llrdma_btl_limits_t limits(const llrdma_profile_t &p, const llrdma_btl_granted_t *g = nullptr)
{
    llrdma_btl_limits_t l;
    BOOST_TEST_REQUIRE(llrdma_btl_plan_limits(&p, kHdr, g, &l) == LLRDMA_OK);
    return l;
}

} // namespace

BOOST_AUTO_TEST_CASE(every_message_up_to_the_hint_is_one_ll_fragment)
{
    // The profile caps LL receive buffers at 64 KiB of payload; larger hints send the
    // rest as BW fragments.
    for (uint64_t hint : {1ull, 100ull, 4096ull, 8192ull, 65536ull, 1ull << 20}) {
        llrdma_profile_t p = profile(hint);
        llrdma_btl_limits_t l = limits(p);
        // ob1's largest header (rendezvous, 40 bytes) plus the payload fits.
        BOOST_TEST(llrdma_btl_path_for(l.frag_max, std::min<uint64_t>(hint, 65536) + 40) ==
                   LLRDMA_PATH_LL);
        BOOST_TEST(l.frag_max[LLRDMA_PATH_LL] + kHdr <= p.ll.recv_buf_bytes);
        BOOST_TEST(l.frag_max[LLRDMA_PATH_BW] + kHdr <= p.bw.recv_buf_bytes);
    }
}

BOOST_AUTO_TEST_CASE(no_cliff_right_above_the_hint)
{
    // 16 KB at hint 8 KB: one eager fragment on the (already connected) BW QP,
    // no rendezvous round trip.
    llrdma_btl_limits_t l = limits(profile(8192));
    BOOST_TEST(llrdma_btl_path_for(l.frag_max, 8192 + 64) == LLRDMA_PATH_BW);
    BOOST_TEST(l.eager_limit >= 2 * 8192u + 64);
    BOOST_TEST(l.rndv_eager_limit == l.eager_limit);
    BOOST_TEST(l.max_send_size == l.frag_max[LLRDMA_PATH_BW]);
    for (uint64_t hint : {4096ull, 65536ull, 300000ull})
        BOOST_TEST(limits(profile(hint)).eager_limit >= 2 * hint);
}

BOOST_AUTO_TEST_CASE(generic_profile_has_only_the_bw_path)
{
    llrdma_profile_t p = profile(0);
    llrdma_btl_limits_t l = limits(p);
    BOOST_TEST(l.frag_max[LLRDMA_PATH_LL] == 0u);
    BOOST_TEST(l.sq_depth[LLRDMA_PATH_LL] == 0u);
    BOOST_TEST(llrdma_btl_path_for(l.frag_max, 1) == LLRDMA_PATH_BW);
    // The classic 12K eager limit stays; fragments are bounded by the receive buffers.
    BOOST_TEST(l.eager_limit == 12 * 1024u);
    BOOST_TEST(l.max_send_size ==
               std::min<uint64_t>(p.bw.recv_buf_bytes - kHdr, p.bw.max_send_size));
    BOOST_TEST(llrdma_btl_path_for(l.frag_max, l.max_send_size + 1) == -1);
}

BOOST_AUTO_TEST_CASE(granted_values_bound_what_is_used)
{
    llrdma_profile_t p = profile(8192);
    llrdma_btl_granted_t g{};
    g.inline_bytes[LLRDMA_PATH_LL] = 64;  // device grants less than the 256 requested
    g.inline_bytes[LLRDMA_PATH_BW] = 512; // more than requested (0): still 0
    g.sq_depth[LLRDMA_PATH_LL] = 127;     // rxe rounds up: the BTL keeps its shallow 64
    g.sq_depth[LLRDMA_PATH_BW] = 100;     // less than 512
    llrdma_btl_limits_t l = limits(p, &g);
    BOOST_TEST(l.inline_max[LLRDMA_PATH_LL] == 64u);
    BOOST_TEST(l.inline_max[LLRDMA_PATH_BW] == 0u);
    BOOST_TEST(l.sq_depth[LLRDMA_PATH_LL] == p.ll.sq_depth);
    BOOST_TEST(l.sq_depth[LLRDMA_PATH_BW] == 100u);
    llrdma_btl_limits_t r = limits(p); // no read-back: the request
    BOOST_TEST(r.inline_max[LLRDMA_PATH_LL] == p.ll.inline_bytes);
}

BOOST_AUTO_TEST_CASE(bad_input)
{
    llrdma_profile_t p = profile(8192);
    llrdma_btl_limits_t l;
    BOOST_TEST(llrdma_btl_plan_limits(nullptr, kHdr, nullptr, &l) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_btl_plan_limits(&p, p.ll.recv_buf_bytes, nullptr, &l) == LLRDMA_ERR_INVALID);
}

// Replays posts against a model of the NIC: every WR needing a completion must be covered by
// a later (or its own) signalled WR, and the queue never exceeds its depth.
BOOST_AUTO_TEST_CASE(signalling_cadence)
{
    llrdma_sq_t sq;
    llrdma_sq_init(&sq, 64, 16);
    int sig = 0;
    for (int i = 0; i < 64; ++i) // a burst of inline WRs: one in 16 signalled
        sig += llrdma_sq_post(&sq, 0, 1);
    BOOST_TEST(sig == 4);
    BOOST_TEST(llrdma_sq_free_slots(&sq) == 0u);
    llrdma_sq_retire(&sq, 64);
    BOOST_TEST(llrdma_sq_free_slots(&sq) == 64u);

    // A lone non-inline WR is signalled; a lone inline one is not.
    llrdma_sq_init(&sq, 64, 16);
    BOOST_TEST(llrdma_sq_post(&sq, 1, 0) == 1);
    BOOST_TEST(llrdma_sq_post(&sq, 0, 0) == 0);
    // Non-inline in the middle of a burst, inline last: the last one pays the signal.
    BOOST_TEST(llrdma_sq_post(&sq, 1, 1) == 0);
    BOOST_TEST(llrdma_sq_post(&sq, 0, 0) == 1);
}

BOOST_AUTO_TEST_CASE(signalling_never_strands_a_completion)
{
    // Exhaustive over short patterns of (needs_completion, more_queued).
    for (uint32_t interval : {1u, 3u, 16u}) {
        for (unsigned pattern = 0; pattern < (1u << 12); ++pattern) {
            llrdma_sq_t sq;
            llrdma_sq_init(&sq, 64, interval);
            int owed = 0, since = 0;
            for (int i = 0; i < 6; ++i) {
                int needs = (pattern >> (2 * i)) & 1, more = (pattern >> (2 * i + 1)) & 1;
                if (i == 5)
                    more = 0; // the burst ends
                int s = llrdma_sq_post(&sq, needs, more);
                owed = s ? 0 : (owed || needs);
                since = s ? 0 : since + 1;
                BOOST_TEST(since < static_cast<int>(interval));
            }
            BOOST_TEST(owed == 0); // the end of a burst settles every pending completion
        }
    }
}

BOOST_AUTO_TEST_CASE(interval_clamped_to_depth)
{
    llrdma_sq_t sq;
    llrdma_sq_init(&sq, 4, 100);
    BOOST_TEST(sq.interval == 4u);
    llrdma_sq_init(&sq, 4, 0);
    BOOST_TEST(sq.interval == 1u);
    llrdma_sq_retire(&sq, 10); // more than posted: clamps at 0
    BOOST_TEST(sq.posted == 0u);
}

// Send queues sharing one CQ's room: a post takes an entry, a retirement gives back what it
// retires (never more than was posted), free slots never exceed the room, and below the
// reserve every post is signalled, so room that runs out always has a signalled WR out.
BOOST_AUTO_TEST_CASE(shared_cq_room)
{
    uint32_t room = 100;
    llrdma_sq_t a, b;
    llrdma_sq_init(&a, 64, 16);
    llrdma_sq_init(&b, 64, 16);
    a.room = b.room = &room;
    BOOST_TEST(llrdma_sq_free_slots(&a) == 64u);
    int sig = 0;
    for (int i = 0; i < 30; ++i) // room 100 -> 70: the cadence alone
        sig += llrdma_sq_post(&a, 0, 1);
    BOOST_TEST(sig == 1);
    BOOST_TEST(room == 70u);
    BOOST_TEST(llrdma_sq_free_slots(&b) == 64u);
    for (int i = 0; i < 40; ++i) // 70 -> 30: below 64 left, each one signalled
        sig += llrdma_sq_post(&b, 0, 1) ? 0 : 100;
    BOOST_TEST(sig == 1 + 100 * 6); // the 6 posts that still left 64 or more were not
    BOOST_TEST(room == 30u);
    BOOST_TEST(llrdma_sq_free_slots(&a) == 30u); // 34 slots of its own, 30 of room
    BOOST_TEST(llrdma_sq_free_slots(&b) == 24u);
    for (int i = 0; i < 24; ++i)
        BOOST_TEST(llrdma_sq_post(&b, 0, 1) == 1);
    BOOST_TEST(llrdma_sq_free_slots(&b) == 0u);
    BOOST_TEST(llrdma_sq_free_slots(&a) == 6u);
    for (int i = 0; i < 6; ++i)
        BOOST_TEST(llrdma_sq_post(&a, 0, 1) == 1); // the last entry's WR is signalled
    BOOST_TEST(room == 0u);
    BOOST_TEST(llrdma_sq_free_slots(&a) == 0u);
    llrdma_sq_retire(&b, 100); // clamps at what b posted
    BOOST_TEST(room == 64u);
    llrdma_sq_retire(&a, 36);
    BOOST_TEST(room == 100u);
    BOOST_TEST((a.posted == 0u && b.posted == 0u));
}

// The fast lane of small sends: each of its posts leaves two queues sharing a CQ exactly as
// llrdma_sq_post(sq, 0, 0) would, and that post would have been unsignalled; its budget never
// spends more credits than it was given nor more slots than the queue has.  Random mixes of
// full posts (which end the budget), refills, fast posts and retirements, against a shadow
// pair of queues that takes llrdma_sq_post for every post.
BOOST_AUTO_TEST_CASE(fast_lane_posts_as_the_full_decision_would)
{
    std::mt19937 rng(7);
    int fast_posts = 0, refused_for_room = 0;
    for (uint32_t interval : {1u, 2u, 16u, 64u}) {
        for (int run = 0; run < 200; ++run) {
            const int batch = run % 2; // btl_llrdma_sq_batch on and off
            uint32_t room = 40 + rng() % 200, shadow_room = room;
            llrdma_sq_t q[2], s[2];
            for (int i = 0; i < 2; ++i) {
                llrdma_sq_init(&q[i], 64, interval);
                llrdma_sq_init(&s[i], 64, interval);
                q[i].room = &room;
                s[i].room = &shadow_room;
            }
            uint32_t credits[2] = {32, 32};
            for (int step = 0; step < 400; ++step) {
                const int i = rng() % 2;
                const unsigned op = rng() % 10;
                if (op < 2 && llrdma_sq_free_slots(&q[i]) > 0) { // any other post
                    const int needs = rng() % 2, more = rng() % 2;
                    BOOST_TEST(llrdma_sq_post(&q[i], needs, more) ==
                               llrdma_sq_post(&s[i], needs, more));
                    BOOST_TEST(q[i].fast == 0u);
                } else if (op < 4) { // the full lane refills after its post
                    const uint32_t at = batch ? llrdma_sq_batch_at(&q[i]) : q[i].depth;
                    q[i].fast = llrdma_sq_fast_budget(&q[i], credits[i], at);
                    BOOST_TEST(q[i].fast <= credits[i]);
                    BOOST_TEST(q[i].fast <= q[i].depth - q[i].posted);
                    BOOST_TEST(q[i].posted + q[i].fast <= std::max(at, q[i].posted));
                    BOOST_TEST(q[i].fast < q[i].interval);
                } else if (op < 8) {
                    if (!llrdma_sq_fast_ok(&q[i])) {
                        refused_for_room += 0 != q[i].fast;
                        continue;
                    }
                    BOOST_TEST(llrdma_sq_free_slots(&q[i]) > 0u);
                    BOOST_TEST(credits[i] > 0u);
                    llrdma_sq_post_fast(&q[i]);
                    --credits[i];
                    ++fast_posts;
                    BOOST_TEST(llrdma_sq_post(&s[i], 0, 0) == 0); // unsignalled, as decided
                } else if (q[i].posted > 0) { // a completion retires some; credits return
                    const uint32_t n = 1 + rng() % q[i].posted;
                    llrdma_sq_retire(&q[i], n);
                    llrdma_sq_retire(&s[i], n);
                    credits[i] += rng() % 3;
                }
                for (int k = 0; k < 2; ++k) {
                    BOOST_TEST(q[k].posted == s[k].posted);
                    BOOST_TEST(q[k].unsignalled == s[k].unsignalled);
                    BOOST_TEST(q[k].owed == s[k].owed);
                    BOOST_TEST(q[k].posted <= q[k].depth);
                }
                BOOST_TEST(room == shadow_room);
            }
        }
    }
    // The lane ran, and the room check turned it away at times (the verdict above is not
    // vacuous).
    BOOST_TEST(fast_posts > 10000);
    BOOST_TEST(refused_for_room > 0);
}

// Where sends start to wait for a completion (btl_llrdma_sq_batch): half the queue, but only
// where at least one signalled WR is then sure to be outstanding (its completion posts what
// waits: with fewer posted than the interval none may be, and the wait would last until the
// next send).  Checked against the cadence itself: from `at` posted WRs on, whatever mix of
// posts made them, one of them is signalled.
BOOST_AUTO_TEST_CASE(batching_point_leaves_a_signal_outstanding)
{
    llrdma_sq_t sq;
    llrdma_sq_init(&sq, 64, 16);
    BOOST_TEST(llrdma_sq_batch_at(&sq) == 32u);
    llrdma_sq_init(&sq, 512, 64);
    BOOST_TEST(llrdma_sq_batch_at(&sq) == 256u);
    llrdma_sq_init(&sq, 16, 16); // half the queue is below the interval: never batch
    BOOST_TEST(llrdma_sq_batch_at(&sq) == 16u);
    llrdma_sq_init(&sq, 8, 4);
    BOOST_TEST(llrdma_sq_batch_at(&sq) == 4u);
    std::mt19937 rng(11);
    for (uint32_t depth : {4u, 8u, 16u, 64u, 256u, 512u}) {
        for (uint32_t interval : {1u, 2u, 4u, 16u, 64u}) {
            for (int run = 0; run < 50; ++run) {
                llrdma_sq_init(&sq, depth, interval);
                const uint32_t at = llrdma_sq_batch_at(&sq);
                uint32_t since_signal = 0; // posted and unretired WRs after the last signalled
                int signalled_outstanding = 0;
                while (sq.posted < sq.depth) {
                    const int sig = llrdma_sq_post(&sq, rng() % 4 == 0, rng() % 2);
                    since_signal = sig ? 0 : since_signal + 1;
                    signalled_outstanding |= sig;
                    if (sq.posted >= at && at < sq.depth) {
                        BOOST_TEST(signalled_outstanding == 1);
                    }
                }
                BOOST_TEST(since_signal < sq.interval);
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(fast_lane_budget_edges)
{
    uint32_t room = 1000;
    llrdma_sq_t sq;
    llrdma_sq_init(&sq, 8, 16);                           // interval clamped to 8
    BOOST_TEST(llrdma_sq_fast_budget(&sq, 100, 8) == 0u); // no shared room: no lane
    sq.room = &room;
    BOOST_TEST(llrdma_sq_fast_budget(&sq, 100, 8) == 7u); // the 8th post is signalled
    BOOST_TEST(llrdma_sq_fast_budget(&sq, 3, 8) == 3u);   // credits bound it
    BOOST_TEST(llrdma_sq_fast_budget(&sq, 0, 8) == 0u);
    BOOST_TEST(llrdma_sq_fast_budget(&sq, 100, 5) == 5u);  // so does the batching point
    BOOST_TEST(llrdma_sq_fast_budget(&sq, 100, 99) == 7u); // which is at most the depth
    BOOST_TEST(llrdma_sq_post(&sq, 1, 1) == 0); // owed a signal: no lane until it is paid
    BOOST_TEST(llrdma_sq_fast_budget(&sq, 100, 8) == 0u);
    BOOST_TEST(llrdma_sq_post(&sq, 0, 0) == 1);
    BOOST_TEST(llrdma_sq_fast_budget(&sq, 100, 8) == 6u); // 6 slots of its own left
    BOOST_TEST(llrdma_sq_fast_budget(&sq, 100, 2) == 0u); // at the batching point: none
    sq.fast = llrdma_sq_fast_budget(&sq, 100, 8);
    room = LLRDMA_SQ_ROOM_RESERVE + 1;
    BOOST_TEST(llrdma_sq_fast_ok(&sq) == 1);
    llrdma_sq_post_fast(&sq);
    BOOST_TEST(llrdma_sq_fast_ok(&sq) == 0); // the next post would be signalled for room
    room = 1000;
    BOOST_TEST(llrdma_sq_fast_ok(&sq) == 1);
    BOOST_TEST(llrdma_sq_post(&sq, 0, 1) == 0);
    BOOST_TEST(sq.fast == 0u); // any other post ends the budget
    BOOST_TEST(llrdma_sq_fast_ok(&sq) == 0);
}

// ------------------------------------------------------------ GPU registration mode

namespace
{

std::string choose(llrdma_gpu_knob_t k, int dev, int dmabuf_errno, int peermem, int *rc,
                   llrdma_gpu_mode_t *mode)
{
    llrdma_gpu_probe_t p{dev, dmabuf_errno, peermem};
    char report[256];
    *rc = llrdma_gpu_rdma_choose(k, &p, mode, report, sizeof report);
    return report;
}

} // namespace

BOOST_AUTO_TEST_CASE(gpu_knob_parse)
{
    llrdma_gpu_knob_t k;
    BOOST_TEST(llrdma_gpu_knob_parse("auto", &k) == LLRDMA_OK);
    BOOST_TEST(k == LLRDMA_GPU_KNOB_AUTO);
    BOOST_TEST(llrdma_gpu_knob_parse("dmabuf", &k) == LLRDMA_OK);
    BOOST_TEST(k == LLRDMA_GPU_KNOB_DMABUF);
    BOOST_TEST(llrdma_gpu_knob_parse("peermem", &k) == LLRDMA_OK);
    BOOST_TEST(k == LLRDMA_GPU_KNOB_PEERMEM);
    BOOST_TEST(llrdma_gpu_knob_parse("off", &k) == LLRDMA_OK);
    BOOST_TEST(k == LLRDMA_GPU_KNOB_OFF);
    for (const char *bad : {"", "DMABUF", "dma-buf", "on", "auto "})
        BOOST_TEST(llrdma_gpu_knob_parse(bad, &k) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_gpu_knob_parse(nullptr, &k) == LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(gpu_auto_prefers_dmabuf_then_peermem)
{
    int rc;
    llrdma_gpu_mode_t m;
    // The probe's EBADF means the provider has dma-buf MRs.
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_AUTO, 1, EBADF, 1, &rc, &m) == "dmabuf");
    BOOST_TEST((rc == LLRDMA_OK && m == LLRDMA_GPU_DMABUF));
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_AUTO, 1, 0, 0, &rc, &m) == "dmabuf");
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_AUTO, 1, EOPNOTSUPP, 1, &rc, &m) == "peermem");
    BOOST_TEST((rc == LLRDMA_OK && m == LLRDMA_GPU_PEERMEM));
    // rxe / siw: no dma-buf, no peermem: none, and the job goes on.
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_AUTO, 1, EOPNOTSUPP, 0, &rc, &m) ==
               "none (the device has no dma-buf MRs; neither nvidia_peermem nor nv_peer_mem is "
               "loaded)");
    BOOST_TEST((rc == LLRDMA_OK && m == LLRDMA_GPU_NONE));
    BOOST_TEST(
        choose(LLRDMA_GPU_KNOB_AUTO, 1, EPROTONOSUPPORT, 0, &rc, &m).find("no dma-buf MRs") !=
        std::string::npos);
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_AUTO, 1, -1, 0, &rc, &m)
                   .find("rdma-core has no ibv_reg_dmabuf_mr") != std::string::npos);
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_AUTO, 1, EINVAL, 0, &rc, &m)
                   .find("the dma-buf probe failed: Invalid argument") != std::string::npos);
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_AUTO, 0, -1, 0, &rc, &m) == "none (no RDMA device)");
    BOOST_TEST((rc == LLRDMA_OK && m == LLRDMA_GPU_NONE));
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_OFF, 1, EBADF, 1, &rc, &m) ==
               "none (btl_llrdma_gpu_rdma=off)");
    BOOST_TEST((rc == LLRDMA_OK && m == LLRDMA_GPU_NONE));
}

BOOST_AUTO_TEST_CASE(gpu_forced_mode_unavailable_is_an_error)
{
    int rc;
    llrdma_gpu_mode_t m;
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_DMABUF, 1, EBADF, 0, &rc, &m) == "dmabuf");
    BOOST_TEST((rc == LLRDMA_OK && m == LLRDMA_GPU_DMABUF));
    // Forced dma-buf on a device with only peermem: an error, not peermem.
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_DMABUF, 1, EOPNOTSUPP, 1, &rc, &m) ==
               "the device has no dma-buf MRs");
    BOOST_TEST((rc == LLRDMA_ERR_NOT_FOUND && m == LLRDMA_GPU_NONE));
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_PEERMEM, 1, EBADF, 1, &rc, &m) == "peermem");
    BOOST_TEST((rc == LLRDMA_OK && m == LLRDMA_GPU_PEERMEM));
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_PEERMEM, 1, EBADF, 0, &rc, &m) ==
               "neither nvidia_peermem nor nv_peer_mem is loaded");
    BOOST_TEST((rc == LLRDMA_ERR_NOT_FOUND && m == LLRDMA_GPU_NONE));
    BOOST_TEST(choose(LLRDMA_GPU_KNOB_DMABUF, 0, -1, 0, &rc, &m) ==
               "no RDMA device to register GPU memory with");
    BOOST_TEST(rc == LLRDMA_ERR_NOT_FOUND);
}

// A peer with a smaller hint receives smaller BW fragments: this side's own limits stay, and
// a fragment too large for the peer is cut into equal pieces that each fit (issue 25).
BOOST_AUTO_TEST_CASE(route_splits_only_what_the_peer_cannot_take)
{
    const llrdma_btl_limits_t big = limits(profile(64 * 1024)), small = limits(profile(0));
    uint32_t peer[LLRDMA_NPATHS];
    for (int p = 0; p < LLRDMA_NPATHS; ++p)
        peer[p] = std::min(big.frag_max[p], small.frag_max[p]);
    BOOST_TEST(peer[LLRDMA_PATH_LL] == 0u); // hint 0: no LL path
    BOOST_TEST(big.frag_max[LLRDMA_PATH_BW] > peer[LLRDMA_PATH_BW]);

    llrdma_btl_route_t r;
    BOOST_TEST(llrdma_btl_route(big.frag_max, peer, 100, &r) == LLRDMA_OK);
    BOOST_TEST(r.path == LLRDMA_PATH_BW);
    BOOST_TEST(r.pieces == 1u);
    BOOST_TEST(llrdma_btl_route(big.frag_max, peer, peer[LLRDMA_PATH_BW], &r) == LLRDMA_OK);
    BOOST_TEST(r.pieces == 1u);

    // Every size from just above the peer's limit to this side's own: pieces fit the peer,
    // add up to the fragment, no piece is empty, and they are as few as possible.
    const uint64_t fit = peer[LLRDMA_PATH_BW], own = big.frag_max[LLRDMA_PATH_BW];
    for (uint64_t bytes = fit + 1; bytes <= own; bytes += 4093) {
        BOOST_TEST_REQUIRE(llrdma_btl_route(big.frag_max, peer, bytes, &r) == LLRDMA_OK);
        BOOST_TEST(r.path == LLRDMA_PATH_BW);
        BOOST_TEST(r.pieces == (bytes + fit - 1) / fit);
        BOOST_TEST(r.piece <= fit);
        const uint64_t last = bytes - uint64_t{r.piece} * (r.pieces - 1);
        BOOST_TEST(last > 0u);
        BOOST_TEST(last <= r.piece);
        BOOST_TEST(r.piece % 8 == 0u);
    }
    // Above this side's own limit: ob1 never asks; no route.
    BOOST_TEST(llrdma_btl_route(big.frag_max, peer, own + 1, &r) == LLRDMA_OK);
    BOOST_TEST(r.path == -1);
    // The peer with the larger buffers: never split.
    BOOST_TEST(llrdma_btl_route(small.frag_max, peer, small.frag_max[LLRDMA_PATH_BW], &r) ==
               LLRDMA_OK);
    BOOST_TEST((r.path == LLRDMA_PATH_BW && r.pieces == 1u));
    // Odd limits: a piece is not rounded past what fits.
    const uint32_t odd_peer[LLRDMA_NPATHS] = {0, 1001}, odd_own[LLRDMA_NPATHS] = {0, 4000};
    BOOST_TEST(llrdma_btl_route(odd_own, odd_peer, 3001, &r) == LLRDMA_OK);
    BOOST_TEST((r.pieces == 3u && r.piece <= 1001u && 2u * r.piece < 3001u));
    BOOST_TEST(llrdma_btl_route(nullptr, peer, 1, &r) == LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(reassembly_joins_pieces_and_refuses_too_much)
{
    std::string whole(200000, '\0');
    for (size_t i = 0; i < whole.size(); ++i)
        whole[i] = static_cast<char>(i * 131 + 7);
    const uint32_t own[LLRDMA_NPATHS] = {0, 262144}, peer[LLRDMA_NPATHS] = {0, 65536};
    llrdma_btl_route_t r;
    BOOST_TEST_REQUIRE(llrdma_btl_route(own, peer, whole.size(), &r) == LLRDMA_OK);
    BOOST_TEST_REQUIRE(r.pieces == 4u);

    llrdma_reasm_t a{};
    a.max = own[LLRDMA_PATH_BW];
    for (int round = 0; round < 2; ++round) { // the buffer is reused
        uint64_t off = 0;
        for (uint32_t k = 0; k < r.pieces; ++k) {
            const uint64_t n = k + 1 < r.pieces ? r.piece : whole.size() - off;
            const int rc = llrdma_reasm_piece(&a, whole.data() + off, n, k + 1 == r.pieces);
            BOOST_TEST(rc == (k + 1 == r.pieces ? 1 : 0));
            BOOST_TEST(llrdma_reasm_open(&a) == 1);
            off += n;
        }
        BOOST_TEST_REQUIRE(a.len == whole.size());
        BOOST_TEST(std::memcmp(whole.data(), a.buf, whole.size()) == 0);
        llrdma_reasm_done(&a);
        BOOST_TEST(llrdma_reasm_open(&a) == 0);
    }
    // More than the peer may send: refused, nothing kept, and the stream stays
    // refused: the tail of the broken fragment must not pass as a whole one.
    BOOST_TEST(llrdma_reasm_piece(&a, whole.data(), 150000, 0) == 0);
    BOOST_TEST(llrdma_reasm_piece(&a, whole.data(), 150000, 1) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_reasm_open(&a) == 0);
    BOOST_TEST(llrdma_reasm_piece(&a, whole.data(), 8, 1) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_reasm_open(&a) == 0);
    llrdma_reasm_t b{};
    b.max = 64;
    BOOST_TEST(llrdma_reasm_piece(&b, nullptr, 8, 1) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_reasm_piece(&b, whole.data(), 8, 1) == 1); // bad arguments break nothing
    llrdma_reasm_free(&a);
    llrdma_reasm_free(&b);
    BOOST_TEST(a.buf == nullptr);
}
