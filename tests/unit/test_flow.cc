// Unit tests of btl/llrdma's pure flow-control and connection state machines
// (llrdma_core/flow.cc): credits, receive allotments, the simultaneous-connect
// tie-break and the retry policy.  The BTL drives these from verbs events;
// here every transition is driven directly, including random interleavings of
// a sender, a receiver and the wire between them, and every interleaving of
// two processes connecting to each other at once.
#define BOOST_TEST_MODULE test_flow
#include <boost/test/unit_test.hpp>

#include "llrdma_btl_plan.h"
#include "llrdma_core.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <set>
#include <vector>

// ------------------------------------------------------------------ credits

BOOST_AUTO_TEST_CASE(credit_threshold_is_a_quarter_of_the_allotment)
{
    const std::pair<uint32_t, uint32_t> cases[] = {{0, 1}, {1, 1},  {3, 1},   {4, 1},   {7, 1},
                                                   {8, 2}, {16, 4}, {64, 16}, {65, 16}, {256, 64}};
    for (auto [allot, threshold] : cases) {
        llrdma_credit_t c;
        llrdma_credit_init(&c, 10, allot);
        BOOST_TEST(c.threshold == threshold);
        BOOST_TEST(c.granted == 10u);
        BOOST_TEST(c.sent == 0u);
        BOOST_TEST(c.seen == 0u);
        BOOST_TEST(c.consumed == 0u);
        BOOST_TEST(c.returned == 0u);
    }
}

BOOST_AUTO_TEST_CASE(credit_avail_and_take)
{
    llrdma_credit_t c;
    llrdma_credit_init(&c, 4, 16);
    BOOST_TEST(llrdma_credit_avail(&c, 0) == 4u);
    for (uint32_t i = 1; i <= 4; ++i) {
        llrdma_credit_take(&c);
        BOOST_TEST(llrdma_credit_avail(&c, 0) == 4u - i);
    }
    BOOST_TEST(llrdma_credit_avail(&c, 0) == 0u);
    // The peer returns 3: three more may go.
    BOOST_TEST(llrdma_credit_avail(&c, 3) == 3u);
    BOOST_TEST(c.seen == 3u);
    // Never more than granted, whatever was returned.
    llrdma_credit_init(&c, 2, 16);
    BOOST_TEST(llrdma_credit_avail(&c, 0) == 2u);
    BOOST_TEST(c.granted == 2u);
}

BOOST_AUTO_TEST_CASE(credit_values_that_cannot_be_true_are_ignored)
{
    llrdma_credit_t c;
    llrdma_credit_init(&c, 8, 8);
    for (int i = 0; i < 8; ++i)
        llrdma_credit_take(&c);
    BOOST_TEST(llrdma_credit_avail(&c, 5) == 5u);
    // More than was sent: a torn read (or garbage).
    BOOST_TEST(llrdma_credit_avail(&c, 9) == 5u);
    BOOST_TEST(llrdma_credit_avail(&c, UINT64_MAX) == 5u);
    BOOST_TEST(llrdma_credit_avail(&c, uint64_t{1} << 32 | 5) == 5u);
    // Going back: a stale value.
    BOOST_TEST(llrdma_credit_avail(&c, 4) == 5u);
    BOOST_TEST(llrdma_credit_avail(&c, 0) == 5u);
    BOOST_TEST(c.seen == 5u);
    // The same value again changes nothing; a larger true one counts.
    BOOST_TEST(llrdma_credit_avail(&c, 5) == 5u);
    BOOST_TEST(llrdma_credit_avail(&c, 8) == 8u);
    // At the maximum: exactly what was sent.
    BOOST_TEST(c.seen == c.sent);
}

BOOST_AUTO_TEST_CASE(credit_receives_before_the_peer_parameters_stay_owed)
{
    // The active side: the connection's counter exists (zeroed) before the
    // ESTABLISHED event brings the peer's grant; the peer sends first.
    llrdma_credit_t c;
    llrdma_credit_init(&c, 0, 0);
    for (int i = 0; i < 3; ++i)
        llrdma_credit_consume(&c);
    llrdma_credit_connect(&c, 16, 16);
    BOOST_TEST(c.consumed == 3u);
    BOOST_TEST(llrdma_credit_owed(&c));
    BOOST_TEST(llrdma_credit_avail(&c, 0) == 16u); // our own window is whole
    BOOST_TEST(llrdma_credit_consume(&c) == 1);    // the fourth reaches the threshold
    BOOST_TEST(llrdma_credit_return(&c) == 4u);
}

BOOST_AUTO_TEST_CASE(credit_consume_return_owed)
{
    llrdma_credit_t c;
    llrdma_credit_init(&c, 16, 16); // threshold 4
    BOOST_TEST(!llrdma_credit_owed(&c));
    BOOST_TEST(llrdma_credit_consume(&c) == 0);
    BOOST_TEST(llrdma_credit_owed(&c));
    BOOST_TEST(llrdma_credit_consume(&c) == 0);
    BOOST_TEST(llrdma_credit_consume(&c) == 0);
    BOOST_TEST(llrdma_credit_consume(&c) == 1); // the fourth
    // Not written yet (the send queue was full): every further one says so.
    BOOST_TEST(llrdma_credit_consume(&c) == 1);
    BOOST_TEST(llrdma_credit_return(&c) == 5u);
    BOOST_TEST(!llrdma_credit_owed(&c));
    BOOST_TEST(c.returned == 5u);
    for (int i = 0; i < 3; ++i)
        BOOST_TEST(llrdma_credit_consume(&c) == 0);
    BOOST_TEST(llrdma_credit_owed(&c)); // 3 below the threshold, still owed
    BOOST_TEST(llrdma_credit_consume(&c) == 1);
    BOOST_TEST(llrdma_credit_return(&c) == 9u); // cumulative
    // A return with nothing new writes the same count again.
    BOOST_TEST(llrdma_credit_return(&c) == 9u);
}

BOOST_AUTO_TEST_CASE(credit_consume_n_says_what_the_last_of_n_single_calls_says)
{
    // A batch of receives from one connection is counted at once; whether
    // to write the count back must not depend on how the batch was counted.
    for (uint32_t before = 0; before < 9; ++before) {
        for (uint32_t n = 1; n <= 16; ++n) {
            llrdma_credit_t one, many;
            llrdma_credit_init(&one, 16, 16); // threshold 4
            llrdma_credit_init(&many, 16, 16);
            for (uint32_t i = 0; i < before; ++i) {
                llrdma_credit_consume(&one);
                llrdma_credit_consume(&many);
            }
            if (before >= 6) { // some returned already
                llrdma_credit_return(&one);
                llrdma_credit_return(&many);
            }
            int last = 0;
            for (uint32_t i = 0; i < n; ++i)
                last = llrdma_credit_consume(&one);
            BOOST_TEST(llrdma_credit_consume_n(&many, n) == last);
            BOOST_TEST(many.consumed == one.consumed);
            BOOST_TEST(llrdma_credit_return(&many) == llrdma_credit_return(&one));
        }
    }
}

namespace
{

// One connection's flow control in one direction: a sender, the wire, a
// receiver with an allotment of buffers, and credit writes coming back.
struct Exchange {
    llrdma_credit_t snd{}, rcv{};
    uint32_t allot;
    uint32_t posted;           // receive buffers the receiver has posted
    std::deque<uint64_t> wire; // messages in flight (their sequence numbers)
    std::deque<uint64_t> cq;   // delivered, not polled yet
    // The receiver's sends to the sender, in QP order: credit writes
    // (full count) and, with piggybacking, headers of reverse traffic
    // carrying the low 16 bits (piggy set).
    struct Back {
        uint64_t count;
        bool piggy;
    };
    std::deque<Back> writes;
    uint64_t word = 0; // the sender's credit word
    bool owed = false; // a credit write could not be posted (send queue full)
    uint64_t total, sent = 0, received = 0, rnr = 0, next_expected = 0, piggybacked = 0;

    Exchange(uint32_t a, uint64_t n) : allot(a), posted(a), total(n)
    {
        llrdma_credit_init(&snd, a, 7);  // the peer gave us `a` credits
        llrdma_credit_init(&rcv, 99, a); // we allotted `a` buffers
    }
    bool blocked() { return sent < total && llrdma_credit_avail(&snd, word) == 0; }
};

// Drive one random interleaving to the end.  `full_sq` is the chance that a
// credit write finds the send queue full and stays owed; with `reverse` the
// receiver also sends to the sender now and then, returning credits in the
// headers (llrdma_credit_stamp).
void run_exchange(uint32_t allot, uint64_t total, uint32_t seed, double full_sq,
                  bool reverse = false)
{
    Exchange x(allot, total);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> coin(0, 1);
    uint64_t steps = 0;

    while (x.received < x.total) {
        BOOST_TEST_REQUIRE(++steps < 100 * (total + 10));
        std::vector<int> can;
        if (x.sent < x.total && llrdma_credit_avail(&x.snd, x.word) > 0)
            can.push_back(0);
        if (!x.wire.empty())
            can.push_back(1);
        if (!x.cq.empty())
            can.push_back(2);
        if (x.owed)
            can.push_back(3);
        if (!x.writes.empty())
            can.push_back(4);
        if (reverse)
            can.push_back(5);
        // Nothing can happen: a deadlock.
        BOOST_TEST_REQUIRE(!can.empty());
        switch (can[rng() % can.size()]) {
        case 0: // the sender posts a send, taking a credit
            llrdma_credit_take(&x.snd);
            x.wire.push_back(x.sent++);
            break;
        case 1: // it lands in a posted buffer
            if (x.posted == 0) {
                ++x.rnr; // receiver not ready: must never happen
            } else {
                --x.posted;
                x.cq.push_back(x.wire.front());
            }
            x.wire.pop_front();
            break;
        case 2: // the receiver polls it, reposts the buffer, maybe writes credits
            BOOST_TEST(x.cq.front() == x.next_expected);
            ++x.next_expected;
            x.cq.pop_front();
            ++x.posted;
            ++x.received;
            if (llrdma_credit_consume(&x.rcv)) {
                if (coin(rng) < full_sq)
                    x.owed = true;
                else
                    x.writes.push_back({llrdma_credit_return(&x.rcv), false});
            }
            break;
        case 3: // the send queue has room again: the owed write goes
            x.owed = false;
            if (llrdma_credit_owed(&x.rcv))
                x.writes.push_back({llrdma_credit_return(&x.rcv), false});
            break;
        case 4: // a credit write or a header lands (RC: in order)
            if (x.writes.front().piggy)
                llrdma_credit_piggyback(&x.snd, static_cast<uint16_t>(x.writes.front().count));
            else
                x.word = x.writes.front().count;
            x.writes.pop_front();
            break;
        case 5: { // the receiver sends something: its header may carry returns
            uint64_t stamp = llrdma_credit_stamp(&x.rcv);
            if (stamp != 0) {
                x.writes.push_back({stamp, true});
                llrdma_credit_stamped(&x.rcv, stamp);
                ++x.piggybacked;
            }
            break;
        }
        }
        // The sender never exceeds the receiver's allotment...
        BOOST_TEST_REQUIRE(x.rnr == 0u);
        BOOST_TEST_REQUIRE(x.wire.size() + x.cq.size() <= allot);
        BOOST_TEST_REQUIRE(x.posted + x.cq.size() == allot);
        BOOST_TEST_REQUIRE(x.snd.sent - x.snd.seen <= allot);
        // ...and whenever it is blocked, something is on its way to free it:
        // once nothing else moves, a credit write is due or in flight.
        if (x.blocked() && x.wire.empty() && x.cq.empty()) {
            bool write_coming = !x.writes.empty() && x.writes.back().count > x.snd.seen;
            bool write_due = x.owed && llrdma_credit_owed(&x.rcv);
            BOOST_TEST_REQUIRE((write_coming || write_due));
        }
    }
    BOOST_TEST(x.sent == total);
    BOOST_TEST(x.rcv.consumed == total);
    if (reverse && allot >= 16) // below, every repost already writes (threshold 1-3)
        BOOST_TEST(x.piggybacked > 0u);
}

} // namespace

BOOST_AUTO_TEST_CASE(credit_exchange_never_overruns_never_deadlocks)
{
    int runs = 0;
    for (uint32_t allot : {1u, 2u, 3u, 4u, 5u, 8u, 16u, 17u, 64u}) {
        for (uint32_t seed = 1; seed <= 150; ++seed) {
            run_exchange(allot, 6 * allot + seed % 11, seed * 7919u + allot, 0.0);
            run_exchange(allot, 6 * allot + seed % 11, seed * 104729u + allot, 0.5);
            runs += 2;
        }
    }
    BOOST_TEST_MESSAGE(runs << " interleavings");
}

BOOST_AUTO_TEST_CASE(credit_exchange_with_returns_in_headers)
{
    // Reverse traffic carries returns, credit writes still cover the rest:
    // never an overrun, never a deadlock, every interleaving.
    for (uint32_t allot : {1u, 2u, 5u, 16u, 64u, 512u})
        for (uint32_t seed = 1; seed <= 60; ++seed) {
            run_exchange(allot, 6 * allot + seed % 11, seed * 31u + allot, 0.0, true);
            run_exchange(allot, 6 * allot + seed % 11, seed * 131u + allot, 0.5, true);
        }
    // Past the 16-bit wrap of the header's count, many times over.
    run_exchange(512, 3 * 65536 + 77, 7, 0.3, true);
}

BOOST_AUTO_TEST_CASE(credit_piggyback_rebuilds_the_count)
{
    llrdma_credit_t c;
    llrdma_credit_init(&c, 512, 512);
    BOOST_TEST(c.piggy == 1u);
    // Sent 70000, seen 65530: the header's 16 bits rebuild across the wrap.
    c.sent = 70000;
    c.seen = 65530;
    llrdma_credit_piggyback(&c, static_cast<uint16_t>(65540)); // 4 after the wrap
    BOOST_TEST(c.seen == 65540u);
    llrdma_credit_piggyback(&c, static_cast<uint16_t>(65539)); // older: ignored
    BOOST_TEST(c.seen == 65540u);
    llrdma_credit_piggyback(&c, static_cast<uint16_t>(70001)); // more than sent
    BOOST_TEST(c.seen == 65540u);
    llrdma_credit_piggyback(&c, static_cast<uint16_t>(70000));
    BOOST_TEST(c.seen == 70000u);
    BOOST_TEST(llrdma_credit_avail(&c, 0) == 512u);
    // The stamp: only what is unreturned, and only once posted does it count.
    llrdma_credit_t r;
    llrdma_credit_init(&r, 16, 16);
    BOOST_TEST(llrdma_credit_stamp(&r) == 0u);
    (void)llrdma_credit_consume(&r);
    (void)llrdma_credit_consume(&r);
    BOOST_TEST(llrdma_credit_stamp(&r) == 2u);
    BOOST_TEST(llrdma_credit_owed(&r));
    llrdma_credit_stamped(&r, 2);
    BOOST_TEST(!llrdma_credit_owed(&r));
    BOOST_TEST(llrdma_credit_stamp(&r) == 0u);
    llrdma_credit_stamped(&r, 5); // more than consumed: cannot be
    BOOST_TEST(r.returned == 2u);
    // An allotment the 16 bits cannot cover: no stamps, writes only.
    llrdma_credit_init(&r, 16, LLRDMA_CREDIT_PIGGY_ALLOT_MAX + 1);
    BOOST_TEST(r.piggy == 0u);
    (void)llrdma_credit_consume(&r);
    BOOST_TEST(llrdma_credit_stamp(&r) == 0u);
}

BOOST_AUTO_TEST_CASE(credit_exchange_survives_torn_reads)
{
    // The sender reads the word while the NIC writes it: garbage above what
    // was sent, or a stale lower value, must not give credits it does not have.
    std::mt19937_64 rng(42);
    llrdma_credit_t c;
    llrdma_credit_init(&c, 16, 16);
    uint64_t returned = 0;
    for (int step = 0; step < 20000; ++step) {
        uint32_t before = llrdma_credit_avail(&c, returned);
        if (before > 0 && rng() % 2)
            llrdma_credit_take(&c);
        if (rng() % 3 == 0 && returned < c.sent)
            returned += 1 + rng() % (c.sent - returned);
        uint64_t torn = rng() % 4 == 0 ? rng() : (returned > 0 ? rng() % returned : 0);
        uint32_t avail = llrdma_credit_avail(&c, torn);
        BOOST_TEST_REQUIRE(c.seen <= returned);
        BOOST_TEST_REQUIRE(c.sent - c.seen <= c.granted);
        BOOST_TEST_REQUIRE(avail <= c.granted - (c.sent - returned));
    }
}

// ------------------------------------------------------- receive allotments

BOOST_AUTO_TEST_CASE(rq_pool_init_minimum)
{
    llrdma_rq_pool_t p;
    llrdma_rq_pool_init(&p, 100, 16, 1000, 1 << 30, 0);
    BOOST_TEST(p.min == LLRDMA_RQ_MIN_ALLOT);
    BOOST_TEST(p.want == 16u);
    BOOST_TEST(p.posted == 0u);
    BOOST_TEST(p.reserved == 0u);
    // A profile asking for fewer than the minimum gets what it asks for.
    llrdma_rq_pool_init(&p, 100, 2, 1000, 1 << 30, 0);
    BOOST_TEST(p.min == 2u);
    BOOST_TEST(p.want == 2u);
    llrdma_rq_pool_init(&p, 100, 0, 1000, 1 << 30, 0);
    BOOST_TEST(p.min == 1u);
    BOOST_TEST(p.want == 1u);
}

BOOST_AUTO_TEST_CASE(rq_allot_within_budget_posts_what_it_gives)
{
    llrdma_rq_pool_t p;
    uint32_t allot = 0, post = 0;
    llrdma_rq_pool_init(&p, 1000, 16, 1000, 1 << 30, 0);
    for (uint32_t i = 1; i <= 5; ++i) {
        BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
        BOOST_TEST(allot == 16u);
        BOOST_TEST(post == 16u);
        BOOST_TEST(p.posted == 16 * i);
        BOOST_TEST(p.reserved == 16 * i);
    }
}

BOOST_AUTO_TEST_CASE(rq_allot_shrinks_to_the_minimum_beyond_mem_max)
{
    llrdma_rq_pool_t p;
    uint32_t allot = 0, post = 0;
    // Room for 40 buffers' worth of memory.
    llrdma_rq_pool_init(&p, 1000, 16, 1000, 40 * 1000, 0);
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST((allot == 16u && post == 16u));
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST((allot == 16u && post == 16u)); // 32 posted: within
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST((allot == LLRDMA_RQ_MIN_ALLOT && post == LLRDMA_RQ_MIN_ALLOT)); // 48 > 40
    // Later peers keep getting the minimum: nobody is refused for memory alone.
    for (int i = 0; i < 10; ++i) {
        BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
        BOOST_TEST(allot == LLRDMA_RQ_MIN_ALLOT);
    }
    BOOST_TEST(p.posted == 32 + 11 * LLRDMA_RQ_MIN_ALLOT);
    BOOST_TEST(p.reserved == p.posted);
    // Freed buffers are given whole again, even beyond the budget (no posting).
    llrdma_rq_release(&p, 16);
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST((allot == 16u && post == 0u));
}

BOOST_AUTO_TEST_CASE(rq_released_allotments_are_reused_before_posting)
{
    llrdma_rq_pool_t p;
    uint32_t a1, a2, a3, post;
    llrdma_rq_pool_init(&p, 1000, 16, 1000, 1 << 30, 0);
    BOOST_TEST(llrdma_rq_allot(&p, &a1, &post) == LLRDMA_OK);
    BOOST_TEST(llrdma_rq_allot(&p, &a2, &post) == LLRDMA_OK);
    llrdma_rq_release(&p, a1); // its buffers stay posted
    BOOST_TEST(p.posted == 32u);
    BOOST_TEST(p.reserved == 16u);
    BOOST_TEST(llrdma_rq_allot(&p, &a3, &post) == LLRDMA_OK);
    BOOST_TEST((a3 == 16u && post == 0u));
    BOOST_TEST(p.posted == 32u);
    // Half free: only the difference is posted.
    llrdma_rq_release(&p, 8);
    BOOST_TEST(llrdma_rq_allot(&p, &a1, &post) == LLRDMA_OK);
    BOOST_TEST((a1 == 16u && post == 8u));
    BOOST_TEST(p.posted == 40u);
    BOOST_TEST(p.reserved == 40u);
}

BOOST_AUTO_TEST_CASE(rq_allot_range_when_the_srq_is_full)
{
    llrdma_rq_pool_t p;
    uint32_t allot = 0, post = 0;
    llrdma_rq_pool_init(&p, 20, 16, 1000, 1 << 30, 0);
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST(allot == 16u);
    // 4 places left: the minimum fits, exactly.
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST((allot == 4u && post == 4u));
    // Nothing left: refused, and nothing changed.
    llrdma_rq_pool_t before = p;
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_ERR_RANGE);
    BOOST_TEST(p.posted == before.posted);
    BOOST_TEST(p.reserved == before.reserved);
    // 3 places: less than the minimum, refused.
    llrdma_rq_pool_init(&p, 19, 16, 1000, 1 << 30, 0);
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_ERR_RANGE);
    // A released allotment makes room again.
    llrdma_rq_release(&p, 16);
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST((allot == 16u && post == 0u));
    // An SRQ smaller than the wish: what fits, if at least the minimum.
    llrdma_rq_pool_init(&p, 10, 16, 1000, 1 << 30, 0);
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST((allot == 10u && post == 10u));
}

BOOST_AUTO_TEST_CASE(rq_unpost_undoes_part_of_an_allot)
{
    llrdma_rq_pool_t p;
    uint32_t allot, post;
    llrdma_rq_pool_init(&p, 100, 16, 1000, 1 << 30, 0);
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    // 10 of the 16 buffers could be posted: unpost 6, release the allotment.
    llrdma_rq_unpost(&p, 6);
    BOOST_TEST(p.posted == 10u);
    BOOST_TEST(p.reserved == 16u);
    llrdma_rq_release(&p, 16);
    BOOST_TEST(p.reserved == 0u);
    // The 10 posted are reused first.
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST((allot == 16u && post == 6u));
    // Unposting more than posted clamps; it never touches the allotments.
    llrdma_rq_unpost(&p, 1000);
    BOOST_TEST(p.posted == 0u);
    BOOST_TEST(p.reserved == 16u);
    llrdma_rq_release(&p, 20); // more than reserved: clamps too
    BOOST_TEST(p.reserved == 0u);
}

namespace
{
// A pool of random capacity, window and budget (buffers of 100 bytes).
llrdma_rq_pool_t random_pool(std::mt19937 &rng, int overcommit)
{
    llrdma_rq_pool_t p;
    uint32_t cap = 8 + rng() % 200, want = 1 + rng() % 40;
    uint64_t mem = (uint64_t)(rng() % 300) * 100;
    llrdma_rq_pool_init(&p, cap, want, 100, mem, overcommit);
    return p;
}
} // namespace

BOOST_AUTO_TEST_CASE(rq_random_sequences_keep_the_books)
{
    std::mt19937 rng(7);
    for (int round = 0; round < 200; ++round) {
        llrdma_rq_pool_t p = random_pool(rng, 0);
        std::vector<uint32_t> live;
        for (int step = 0; step < 200; ++step) {
            if (rng() % 3 != 0 || live.empty()) {
                llrdma_rq_pool_t before = p;
                uint32_t allot = 0, post = 0;
                int rc = llrdma_rq_allot(&p, &allot, &post);
                if (rc == LLRDMA_OK) {
                    BOOST_TEST_REQUIRE(allot >= p.min);
                    BOOST_TEST_REQUIRE(allot <= p.want);
                    uint32_t free_before = before.posted - before.reserved;
                    BOOST_TEST_REQUIRE(post == (allot > free_before ? allot - free_before : 0));
                    live.push_back(allot);
                } else {
                    BOOST_TEST_REQUIRE(rc == LLRDMA_ERR_RANGE);
                    BOOST_TEST_REQUIRE(p.posted == before.posted);
                    BOOST_TEST_REQUIRE(p.reserved == before.reserved);
                    // Refused only when not even the minimum fits.
                    BOOST_TEST_REQUIRE(before.cap - before.reserved < p.min);
                }
            } else {
                size_t k = rng() % live.size();
                llrdma_rq_release(&p, live[k]);
                live.erase(live.begin() + (long)k);
            }
            uint64_t sum = 0;
            for (uint32_t a : live)
                sum += a;
            BOOST_TEST_REQUIRE(p.reserved == sum);
            BOOST_TEST_REQUIRE(p.reserved <= p.posted);
            BOOST_TEST_REQUIRE(p.posted <= p.cap);
        }
    }
}

// Overcommitted pools (rnr_retry 7): every connection gets the whole window; buffers back
// windows one for one up to half the budget, then stay; the SRQ limit grows them to it.
BOOST_AUTO_TEST_CASE(rq_overcommit_backs_windows_then_shares_them)
{
    llrdma_rq_pool_t p;
    uint32_t allot = 0, post = 0;
    // Budget 100 buffers, window 16: backed up to 50.
    llrdma_rq_pool_init(&p, 1000, 16, 1000, 100 * 1000, 1);
    BOOST_TEST(p.budget == 100u);
    BOOST_TEST(llrdma_rq_limit(&p) == 0u);
    for (uint32_t i = 1; i <= 3; ++i) {
        BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
        BOOST_TEST((allot == 16u && post == 16u));
        BOOST_TEST(llrdma_rq_limit(&p) == 0u); // fully backed: cannot run dry
    }
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST((allot == 16u && post == 2u)); // 50 = half the budget
    for (int i = 0; i < 996; ++i) {
        BOOST_TEST_REQUIRE(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
        BOOST_TEST_REQUIRE((allot == 16u && post == 0u)); // the 1000th peer too
    }
    BOOST_TEST(p.posted == 50u);
    BOOST_TEST(p.reserved == 16000u);
    // Windows outnumber buffers: the limit is armed at an eighth.
    BOOST_TEST(llrdma_rq_limit(&p) == 6u);
    BOOST_TEST(llrdma_rq_grow(&p) == 16u); // a window (more than a quarter of 50)
    BOOST_TEST(p.posted == 66u);
    BOOST_TEST(llrdma_rq_grow(&p) == 16u);
    BOOST_TEST(llrdma_rq_grow(&p) == 18u); // 82 posted: a quarter is 20, 18 are left
    BOOST_TEST(p.posted == 100u);
    BOOST_TEST(llrdma_rq_grow(&p) == 0u);
    BOOST_TEST(llrdma_rq_limit(&p) == 0u); // nothing more to grow: not armed
    BOOST_TEST(p.grows == 3u);
}

BOOST_AUTO_TEST_CASE(rq_overcommit_budget_is_at_least_one_window_and_at_most_the_srq)
{
    llrdma_rq_pool_t p;
    uint32_t allot = 0, post = 0;
    // A budget smaller than a window still backs one window (the first peer sends it all).
    llrdma_rq_pool_init(&p, 1000, 16, 1000, 3 * 1000, 1);
    BOOST_TEST(p.budget == 16u);
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST((allot == 16u && post == 16u));
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST((allot == 16u && post == 0u));
    // The device's SRQ bounds it too.
    llrdma_rq_pool_init(&p, 40, 16, 1000, 1 << 30, 1);
    BOOST_TEST(p.budget == 40u);
    for (int i = 0; i < 10; ++i)
        BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
    BOOST_TEST(p.posted == 20u);
    while (llrdma_rq_grow(&p) > 0) {
    }
    BOOST_TEST(p.posted == 40u);
    // An SRQ below the minimum refuses, as in the guaranteed mode.
    llrdma_rq_pool_init(&p, 2, 16, 1000, 1 << 30, 1);
    BOOST_TEST(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_ERR_RANGE);
}

// The window: the profile's in the guaranteed mode; overcommitted, the burst window (512
// buffers, 8 MiB of them) where larger, within half the budget and half the SRQ.
BOOST_AUTO_TEST_CASE(rq_window_is_the_burst_where_buffers_are_overcommitted)
{
    const uint64_t mem = 32ull << 20;
    BOOST_TEST(llrdma_rq_window(64, 8256, mem, 16384, 0) == 64u);   // guaranteed: as profiled
    BOOST_TEST(llrdma_rq_window(64, 8256, mem, 16384, 1) == 512u);  // hint 8K, LL
    BOOST_TEST(llrdma_rq_window(32, 65600, mem, 16384, 1) == 127u); // 8 MiB of 64 KiB
    BOOST_TEST(llrdma_rq_window(16, 131136, mem, 16384, 1) == 63u);
    BOOST_TEST(llrdma_rq_window(64, 8256, 96 * 8256, 16384, 1) == 64u); // half of 96 < 64
    BOOST_TEST(llrdma_rq_window(64, 8256, 1000 * 8256, 16384, 1) == 500u);
    BOOST_TEST(llrdma_rq_window(16, 1000, mem, 100, 1) == 50u); // half the SRQ
    BOOST_TEST(llrdma_rq_window(16, 0, mem, 100, 1) == 16u);
}

// Receive memory with 1,000 connected peers at hints 0, 8K and 64K, with the component's
// default budget (btl_llrdma_recv_mem_max, 32 MiB per path) and the profiles' windows: the
// pool posts what the connections' arithmetic says, and every peer gets its whole window.
BOOST_AUTO_TEST_CASE(rq_thousand_peers_stay_within_the_budget)
{
    const uint64_t budget = 32ull << 20;
    for (uint64_t hint : {0ull, 8192ull, 65536ull}) {
        llrdma_profile_t prof;
        BOOST_TEST_REQUIRE(llrdma_profile_derive(hint, nullptr, &prof) == LLRDMA_OK);
        uint64_t total = 0;
        for (const llrdma_path_profile_t *pp : {&prof.ll, &prof.bw}) {
            if (0 == pp->max_bytes)
                continue; // no such path
            llrdma_rq_pool_t p;
            const uint32_t window =
                llrdma_rq_window(pp->rq_depth, pp->recv_buf_bytes, budget, 16384, 1);
            llrdma_rq_pool_init(&p, 16384, window, pp->recv_buf_bytes, budget, 1);
            uint32_t allot = 0, post = 0;
            for (int peer = 0; peer < 1000; ++peer) {
                BOOST_TEST_REQUIRE(llrdma_rq_allot(&p, &allot, &post) == LLRDMA_OK);
                BOOST_TEST_REQUIRE(allot == window);
            }
            while (llrdma_rq_grow(&p) > 0) {
            }
            const uint64_t bytes = (uint64_t)p.posted * pp->recv_buf_bytes;
            BOOST_TEST_MESSAGE("hint " << hint << " path of " << pp->recv_buf_bytes
                                       << " B buffers: window " << allot << ", " << p.posted
                                       << " buffers after every growth, " << bytes / 1024
                                       << " KiB");
            BOOST_TEST(bytes <= budget);
            total += bytes;
        }
        BOOST_TEST(total <= 64ull << 20);
    }
}

BOOST_AUTO_TEST_CASE(rq_overcommit_random_sequences_keep_the_books)
{
    std::mt19937 rng(11);
    for (int round = 0; round < 200; ++round) {
        llrdma_rq_pool_t p = random_pool(rng, 1);
        std::vector<uint32_t> live;
        for (int step = 0; step < 200; ++step) {
            const llrdma_rq_pool_t before = p;
            const unsigned what = rng() % 4;
            if (what < 2 || live.empty()) {
                uint32_t allot = 0, post = 0;
                int rc = llrdma_rq_allot(&p, &allot, &post);
                if (rc == LLRDMA_OK) {
                    BOOST_TEST_REQUIRE(allot == p.want);
                    BOOST_TEST_REQUIRE(p.posted == before.posted + post);
                    live.push_back(allot);
                } else {
                    BOOST_TEST_REQUIRE(rc == LLRDMA_ERR_RANGE);
                    BOOST_TEST_REQUIRE(before.budget < p.min);
                }
            } else if (what == 2) {
                size_t k = rng() % live.size();
                llrdma_rq_release(&p, live[k]);
                live.erase(live.begin() + (long)k);
            } else {
                const uint32_t limit = llrdma_rq_limit(&p);
                const uint32_t n = llrdma_rq_grow(&p);
                BOOST_TEST_REQUIRE(p.posted == before.posted + n);
                // Armed exactly when growing can help someone.
                if (limit > 0)
                    BOOST_TEST_REQUIRE(n > 0);
            }
            uint64_t sum = 0;
            for (uint32_t a : live)
                sum += a;
            BOOST_TEST_REQUIRE(p.reserved == sum);
            BOOST_TEST_REQUIRE(p.posted <= p.budget);
            BOOST_TEST_REQUIRE(p.budget <= p.cap);
            // Buffers never shrink, and a connection never finds fewer than one window
            // posted (unless the SRQ itself is smaller).
            BOOST_TEST_REQUIRE(p.posted >= before.posted);
            if (!live.empty())
                BOOST_TEST_REQUIRE(p.posted >= std::min(p.want, p.budget));
        }
    }
}

// ----------------------------------------------------- connection set-up

namespace
{

const llrdma_conn_have_t kHaves[] = {LLRDMA_CONN_NONE, LLRDMA_CONN_ACTIVE_PENDING,
                                     LLRDMA_CONN_PASSIVE_PENDING, LLRDMA_CONN_UP};

uint64_t name(uint32_t jobid, uint32_t vpid)
{
    return (uint64_t)jobid << 32 | vpid;
}

} // namespace

BOOST_AUTO_TEST_CASE(cm_on_request_every_state_and_order)
{
    const uint64_t small = name(7, 1), big = name(7, 2);
    for (llrdma_conn_have_t have : kHaves) {
        for (bool mine_smaller : {true, false}) {
            uint64_t me = mine_smaller ? small : big, peer = mine_smaller ? big : small;
            llrdma_cm_request_t d = llrdma_cm_on_request(have, me, peer);
            switch (have) {
            case LLRDMA_CONN_NONE:
                BOOST_TEST(d == LLRDMA_CM_ACCEPT);
                break;
            case LLRDMA_CONN_ACTIVE_PENDING:
                BOOST_TEST(d == (mine_smaller ? LLRDMA_CM_REJECT_TIE : LLRDMA_CM_ACCEPT_SUPERSEDE));
                break;
            case LLRDMA_CONN_PASSIVE_PENDING:
                // The peer has one attempt at a time: the one we were accepting is stale.
                BOOST_TEST(d == LLRDMA_CM_ACCEPT_REPLACE);
                break;
            case LLRDMA_CONN_UP:
                BOOST_TEST(d == LLRDMA_CM_REJECT_DUP);
                break;
            }
        }
    }
    // The job id counts before the rank: (jobid << 32 | vpid).
    BOOST_TEST(llrdma_cm_on_request(LLRDMA_CONN_ACTIVE_PENDING, name(6, 9), name(7, 0)) ==
               LLRDMA_CM_REJECT_TIE);
    BOOST_TEST(llrdma_cm_on_request(LLRDMA_CONN_ACTIVE_PENDING, name(8, 0), name(7, 9)) ==
               LLRDMA_CM_ACCEPT_SUPERSEDE);
}

BOOST_AUTO_TEST_CASE(cm_simultaneous_connect_keeps_exactly_one_attempt)
{
    std::mt19937_64 rng(3);
    for (int i = 0; i < 10000; ++i) {
        uint64_t a = name((uint32_t)(rng() % 4), (uint32_t)(rng() % 64));
        uint64_t b = name((uint32_t)(rng() % 4), (uint32_t)(rng() % 64));
        if (a == b)
            continue;
        // Each side has its own attempt pending and gets the other's request.
        llrdma_cm_request_t at_a = llrdma_cm_on_request(LLRDMA_CONN_ACTIVE_PENDING, a, b);
        llrdma_cm_request_t at_b = llrdma_cm_on_request(LLRDMA_CONN_ACTIVE_PENDING, b, a);
        bool a_accepts = at_a == LLRDMA_CM_ACCEPT_SUPERSEDE; // b's attempt survives
        bool b_accepts = at_b == LLRDMA_CM_ACCEPT_SUPERSEDE; // a's attempt survives
        BOOST_TEST_REQUIRE(a_accepts != b_accepts);
        BOOST_TEST_REQUIRE((a_accepts ? at_b : at_a) == LLRDMA_CM_REJECT_TIE);
        // The smaller name's attempt is the one kept.
        BOOST_TEST_REQUIRE(b_accepts == (a < b));
        // The loser's rejected attempt is dropped quietly, whatever the time.
        BOOST_TEST(llrdma_cm_on_active_error(LLRDMA_CM_ERR_TIE, 0, 1000) == LLRDMA_CM_DROP);
    }
}

namespace
{

// Two processes connecting one path to each other, message by message, with
// the rules of llrdma_cm_on_request / llrdma_cm_on_active_error as the BTL
// applies them (btl_llrdma_endpoint.c).  Every interleaving is explored, also
// with one CM message lost: a lost request or accept makes the initiator's CM
// time out (TMO, after which it retries), and a lost accept leaves the
// acceptor waiting for an RTU until its own CM gives up (a timer that may
// fire at any later point).  A side whose attempt was rejected waits for the
// peer's attempt a bounded time, then may try again (llrdma_cm_peer_wait_ms).
enum Kind { REQ, ACC, REJ, RTU, TMO };
constexpr int kMaxStarts = 3; // attempts per side: enough for one loss and one tie
struct Msg {
    Kind kind;
    int attempt;
    int reason; // REJ: an llrdma_cm_err_t
};
struct Side {
    uint64_t name = 0;
    llrdma_conn_have_t have = LLRDMA_CONN_NONE;
    bool wants = true; // has something to send: starts an attempt once
    bool started = false;
    int attempt = -1;      // our active attempt
    bool req_sent = false; // its request left (after address and route)
    int conn = -1;         // the attempt our connection (passive or up) belongs to
    std::set<int> superseded;
    int starts = 0;
    bool may_restart = false; // rejected or timed out: may try again later
    int stale_timer = -1;     // a passive attempt whose accept was lost: its CM times out
};
struct World {
    Side s[2];
    std::deque<Msg> net[2]; // to side i, in order
    int next_attempt = 0;
    int established = 0; // active sides that saw their attempt accepted
    int losses = 0;      // CM messages lost so far (at most one)
    bool bad = false;
};

int terminals;

void explore(const World &w)
{
    bool any = false;
    for (int i = 0; i < 2; ++i) {
        const Side &me = w.s[i];
        // Start an attempt (address and route resolution begin), the first one or,
        // after a rejection or a timeout, another one later.
        if (me.wants && (!me.started || me.may_restart) && me.have == LLRDMA_CONN_NONE &&
            me.starts < kMaxStarts) {
            World n = w;
            Side &m = n.s[i];
            m.started = true;
            m.req_sent = false;
            m.may_restart = false;
            ++m.starts;
            m.attempt = n.next_attempt++;
            m.have = LLRDMA_CONN_ACTIVE_PENDING;
            explore(n);
            any = true;
        }
        // The acceptor of a lost accept gives up on it (any time later).
        if (me.stale_timer >= 0) {
            World n = w;
            Side &m = n.s[i];
            if (m.have == LLRDMA_CONN_PASSIVE_PENDING && m.conn == m.stale_timer) {
                m.have = LLRDMA_CONN_NONE; // dropped; with fragments waiting we connect
                m.conn = -1;
                m.may_restart = true;
            }
            m.stale_timer = -1;
            explore(n);
            any = true;
        }
        // Lose the message at the head of the queue to side i (one loss per run).
        if (w.losses == 0 && !w.net[i].empty() &&
            (w.net[i].front().kind == REQ || w.net[i].front().kind == ACC)) {
            World n = w;
            Msg lost = n.net[i].front();
            n.net[i].pop_front();
            ++n.losses;
            if (lost.kind == REQ) {
                n.net[1 - i].push_back({TMO, lost.attempt, 0}); // the initiator times out
            } else {
                n.net[i].push_back({TMO, lost.attempt, 0}); // initiator i times out
                n.s[1 - i].stale_timer = lost.attempt;      // the acceptor waits for an RTU
            }
            explore(n);
            any = true;
        }
        // Route resolved: the request goes (a superseded attempt is dropped instead).
        if (me.attempt >= 0 && !me.req_sent) {
            World n = w;
            n.s[i].req_sent = true;
            n.net[1 - i].push_back({REQ, me.attempt, 0});
            explore(n);
            any = true;
        }
        if (w.net[i].empty())
            continue;
        any = true;
        World n = w;
        Side &m = n.s[i];
        Msg msg = n.net[i].front();
        n.net[i].pop_front();
        switch (msg.kind) {
        case REQ:
            switch (llrdma_cm_on_request(m.have, m.name, n.s[1 - i].name)) {
            case LLRDMA_CM_ACCEPT_SUPERSEDE:
                m.superseded.insert(m.attempt);
                m.attempt = -1;
                [[fallthrough]];
            case LLRDMA_CM_ACCEPT_REPLACE: // the stale passive attempt is closed
                if (m.stale_timer == m.conn)
                    m.stale_timer = -1;
                [[fallthrough]];
            case LLRDMA_CM_ACCEPT:
                m.have = LLRDMA_CONN_PASSIVE_PENDING;
                m.conn = msg.attempt;
                n.net[1 - i].push_back({ACC, msg.attempt, 0});
                break;
            case LLRDMA_CM_REJECT_TIE:
                n.net[1 - i].push_back({REJ, msg.attempt, LLRDMA_CM_ERR_TIE});
                break;
            case LLRDMA_CM_REJECT_DUP:
                n.net[1 - i].push_back({REJ, msg.attempt, LLRDMA_CM_ERR_DUP});
                break;
            }
            break;
        case ACC:
            if (m.superseded.count(msg.attempt) || m.attempt != msg.attempt) {
                n.bad = true; // a second QP came up for the path
            } else {
                m.have = LLRDMA_CONN_UP;
                m.conn = msg.attempt;
                m.attempt = -1;
                ++n.established;
                n.net[1 - i].push_back({RTU, msg.attempt, 0});
            }
            break;
        case REJ:
            if (m.superseded.count(msg.attempt))
                break; // lost the tie-break earlier: dropped
            if (m.attempt == msg.attempt) {
                llrdma_cm_next_t next =
                    llrdma_cm_on_active_error(static_cast<llrdma_cm_err_t>(msg.reason), 0, 300000);
                if (next != LLRDMA_CM_DROP)
                    n.bad = true; // a tie must never fail the peer
                m.attempt = -1;
                m.have = LLRDMA_CONN_NONE; // the winner's request will come, or we retry
                m.may_restart = true;
            }
            break;
        case TMO:
            if (m.attempt == msg.attempt && !m.superseded.count(msg.attempt)) {
                if (llrdma_cm_on_active_error(LLRDMA_CM_ERR_TIMEOUT, 0, 300000) != LLRDMA_CM_RETRY)
                    n.bad = true;
                m.attempt = -1;
                m.have = LLRDMA_CONN_NONE;
                m.may_restart = true;
            }
            break;
        case RTU:
            if (m.have != LLRDMA_CONN_PASSIVE_PENDING || m.conn != msg.attempt)
                n.bad = true;
            m.have = LLRDMA_CONN_UP;
            break;
        }
        explore(n);
    }
    if (!any) {
        ++terminals;
        // Nothing left to happen: one connection, the same on both sides.
        BOOST_TEST_REQUIRE(!w.bad);
        bool one_wants = w.s[0].wants || w.s[1].wants;
        if (one_wants) {
            BOOST_TEST_REQUIRE(w.s[0].have == LLRDMA_CONN_UP);
            BOOST_TEST_REQUIRE(w.s[1].have == LLRDMA_CONN_UP);
            BOOST_TEST_REQUIRE(w.s[0].conn == w.s[1].conn);
            BOOST_TEST_REQUIRE(w.established == 1);
        }
    }
}

} // namespace

BOOST_AUTO_TEST_CASE(cm_every_interleaving_of_two_connecting_processes)
{
    for (bool a_smaller : {true, false}) {
        for (int who = 0; who < 3; ++who) { // both want, only 0, only 1
            World w;
            w.s[0].name = a_smaller ? name(7, 0) : name(7, 5);
            w.s[1].name = a_smaller ? name(7, 5) : name(7, 0);
            w.s[0].wants = who != 2;
            w.s[1].wants = who != 1;
            terminals = 0;
            explore(w);
            BOOST_TEST(terminals > 0);
            BOOST_TEST_MESSAGE("names " << (a_smaller ? "0<1" : "0>1") << ", wanting " << who
                                        << ": " << terminals << " interleavings");
        }
    }
}

BOOST_AUTO_TEST_CASE(cm_on_active_error_policy)
{
    const uint64_t timeout = 300000;
    for (uint64_t elapsed :
         {uint64_t{0}, uint64_t{1}, timeout - 1, timeout, timeout + 1, uint64_t{UINT64_MAX}}) {
        bool in_time = elapsed < timeout;
        // Lost a tie, or the peer already has the path: its connection serves.
        BOOST_TEST(llrdma_cm_on_active_error(LLRDMA_CM_ERR_TIE, elapsed, timeout) ==
                   LLRDMA_CM_DROP);
        BOOST_TEST(llrdma_cm_on_active_error(LLRDMA_CM_ERR_DUP, elapsed, timeout) ==
                   LLRDMA_CM_DROP);
        // Retrying cannot change these.
        BOOST_TEST(llrdma_cm_on_active_error(LLRDMA_CM_ERR_NORES, elapsed, timeout) ==
                   LLRDMA_CM_FAIL);
        BOOST_TEST(llrdma_cm_on_active_error(LLRDMA_CM_ERR_LOCAL, elapsed, timeout) ==
                   LLRDMA_CM_FAIL);
        // A peer busy elsewhere answers late: retry until the timeout has passed.
        for (llrdma_cm_err_t e :
             {LLRDMA_CM_ERR_REJECTED, LLRDMA_CM_ERR_TIMEOUT, LLRDMA_CM_ERR_RESOLVE}) {
            BOOST_TEST(llrdma_cm_on_active_error(e, elapsed, timeout) ==
                       (in_time ? LLRDMA_CM_RETRY : LLRDMA_CM_FAIL));
        }
    }
    // No time to retry at all.
    BOOST_TEST(llrdma_cm_on_active_error(LLRDMA_CM_ERR_TIMEOUT, 0, 0) == LLRDMA_CM_FAIL);
}

BOOST_AUTO_TEST_CASE(cm_retry_delay_backs_off_to_a_second)
{
    BOOST_TEST(llrdma_cm_retry_delay_ms(0) == 10u);
    BOOST_TEST(llrdma_cm_retry_delay_ms(1) == 10u);
    BOOST_TEST(llrdma_cm_retry_delay_ms(2) == 20u);
    BOOST_TEST(llrdma_cm_retry_delay_ms(3) == 40u);
    BOOST_TEST(llrdma_cm_retry_delay_ms(7) == 640u);
    BOOST_TEST(llrdma_cm_retry_delay_ms(8) == 1000u);
    BOOST_TEST(llrdma_cm_retry_delay_ms(100) == 1000u);
    BOOST_TEST(llrdma_cm_retry_delay_ms(UINT32_MAX) == 1000u);
    uint32_t prev = 0;
    uint64_t total = 0;
    for (uint32_t a = 1; a < 1000; ++a) {
        uint32_t d = llrdma_cm_retry_delay_ms(a);
        BOOST_TEST_REQUIRE(d >= prev);
        BOOST_TEST_REQUIRE((d >= 10u && d <= 1000u));
        prev = d;
        total += d;
    }
    // The default 300 s connect timeout gives a silent peer ~300 attempts.
    BOOST_TEST(total > 300000u);
}

BOOST_AUTO_TEST_CASE(cm_peer_wait_is_bounded)
{
    // A rejected side waits for the peer's attempt, but never the whole connect timeout:
    // the peer's attempt may have died on the way.
    BOOST_TEST(llrdma_cm_peer_wait_ms(0) == 1000u);
    BOOST_TEST(llrdma_cm_peer_wait_ms(1) == 1000u);
    BOOST_TEST(llrdma_cm_peer_wait_ms(2) == 2000u);
    BOOST_TEST(llrdma_cm_peer_wait_ms(5) == 16000u);
    BOOST_TEST(llrdma_cm_peer_wait_ms(6) == 16000u);
    BOOST_TEST(llrdma_cm_peer_wait_ms(UINT32_MAX) == 16000u);
}
