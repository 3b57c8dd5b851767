// The BTL put transport's per-message protocol (net_put.cc): pieces within
// the put limit, READY/DONE in every order the glue can see them, failures and
// cancels in every state -- always exactly one DONE for a registered READY,
// and no release while a put may still write.
#define BOOST_TEST_MODULE test_net_put
#include <boost/test/unit_test.hpp>

#include "llrdma_allreduce.h"

#include <vector>

namespace
{

// Starts every piece the message offers now; returns their lengths.
std::vector<size_t> start_all(llrdma_np_msg_t *m, size_t limit, size_t align)
{
    std::vector<size_t> got;
    size_t off = 0, len = 0, expect = m->next;
    while (llrdma_np_next_piece(m, limit, align, &off, &len)) {
        BOOST_REQUIRE_EQUAL(off, expect);
        BOOST_REQUIRE_GT(len, 0u);
        llrdma_np_put_started(m, len);
        expect += len;
        got.push_back(len);
    }
    return got;
}

} // namespace

BOOST_AUTO_TEST_CASE(pieces_cover_the_message_within_the_limit)
{
    struct {
        size_t bytes, limit, align;
        std::vector<size_t> want;
    } cases[] = {
        {10, 0, 0, {10}},            // no limit: one put
        {10, 4, 0, {4, 4, 2}},       // the last piece is what is left
        {8, 4, 0, {4, 4}},           // exact multiple
        {3, 4, 0, {3}},              // under the limit
        {20, 7, 4, {4, 4, 4, 4, 4}}, // limit rounded down to the alignment
        {10, 7, 4, {4, 6}},          // the last piece: what is left, under the limit
        {1 << 20, 1 << 18, 8, {1 << 18, 1 << 18, 1 << 18, 1 << 18}},
    };
    for (auto &c : cases) {
        llrdma_np_msg_t m;
        llrdma_np_send_init(&m, c.bytes);
        llrdma_np_on_ready(&m, c.bytes, LLRDMA_NP_OK);
        BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_PUTTING);
        auto got = start_all(&m, c.limit, c.align);
        BOOST_CHECK_EQUAL_COLLECTIONS(got.begin(), got.end(), c.want.begin(), c.want.end());
        BOOST_CHECK_EQUAL(m.puts_out, static_cast<int>(c.want.size()));
        BOOST_CHECK(!llrdma_np_may_release(&m));
    }
}

BOOST_AUTO_TEST_CASE(send_completes_after_every_callback_and_done)
{
    llrdma_np_msg_t m;
    llrdma_np_send_init(&m, 100);
    BOOST_CHECK(llrdma_np_expects_ctl(&m));
    size_t off, len;
    BOOST_CHECK(!llrdma_np_next_piece(&m, 40, 0, &off, &len)); // no READY yet
    llrdma_np_on_ready(&m, 100, LLRDMA_NP_OK);
    BOOST_CHECK(!llrdma_np_expects_ctl(&m));
    BOOST_CHECK_EQUAL(start_all(&m, 40, 0).size(), 3u);
    llrdma_np_put_done(&m, 1);
    llrdma_np_put_done(&m, 1);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_PUTTING); // one still in flight
    BOOST_CHECK(!llrdma_np_may_release(&m));
    llrdma_np_put_done(&m, 1);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_SEND_DONE);
    BOOST_CHECK(llrdma_np_may_release(&m));
    BOOST_CHECK_EQUAL(m.status, LLRDMA_NP_OK);
    llrdma_np_done_sent(&m);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_COMPLETE);
}

BOOST_AUTO_TEST_CASE(receive_completes_on_done_only)
{
    llrdma_np_msg_t m;
    llrdma_np_recv_init(&m, 64, LLRDMA_NP_OK);
    BOOST_CHECK(llrdma_np_expects_ctl(&m));
    BOOST_CHECK(!llrdma_np_may_release(&m));
    llrdma_np_cancel(&m); // too late: the sender may be writing
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_WAIT_DONE);
    BOOST_CHECK(!llrdma_np_may_release(&m));
    llrdma_np_on_done(&m, LLRDMA_NP_OK);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_COMPLETE);
    BOOST_CHECK_EQUAL(m.status, LLRDMA_NP_OK); // the data came: a normal completion
    BOOST_CHECK(llrdma_np_may_release(&m));

    llrdma_np_recv_init(&m, 64, LLRDMA_NP_OK);
    llrdma_np_on_done(&m, LLRDMA_NP_CANCELLED);
    BOOST_CHECK_EQUAL(m.status, LLRDMA_NP_ERR_PEER);
}

BOOST_AUTO_TEST_CASE(receive_that_could_not_register_expects_nothing)
{
    llrdma_np_msg_t m;
    llrdma_np_recv_init(&m, 64, LLRDMA_NP_ERR_LOCAL);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_COMPLETE);
    BOOST_CHECK_EQUAL(m.status, LLRDMA_NP_ERR_LOCAL);
    BOOST_CHECK(!llrdma_np_expects_ctl(&m));
    // ... and its sender sends no DONE.
    llrdma_np_msg_t s;
    llrdma_np_send_init(&s, 64);
    llrdma_np_on_ready(&s, 64, LLRDMA_NP_ERR_LOCAL);
    BOOST_CHECK_EQUAL(s.state, LLRDMA_NP_COMPLETE);
    BOOST_CHECK_EQUAL(s.status, LLRDMA_NP_ERR_PEER);
}

BOOST_AUTO_TEST_CASE(sunk_receive_takes_nothing_and_fails_nobody)
{
    // A rank carrying a failure without buffers: its receive completes at
    // once, OK with nothing in it (0 bytes: the failure the Transport
    // carries); the sender puts nothing, sends no DONE and is not failed.
    llrdma_np_msg_t r, s;
    llrdma_np_recv_init(&r, 4096, LLRDMA_NP_SUNK);
    BOOST_TEST(r.state == LLRDMA_NP_COMPLETE);
    BOOST_TEST(r.status == LLRDMA_NP_OK);
    BOOST_TEST(!llrdma_np_expects_ctl(&r));
    BOOST_TEST(llrdma_np_may_release(&r));
    for (size_t bytes : {size_t(4096), size_t(0)}) {
        llrdma_np_send_init(&s, bytes);
        BOOST_TEST(llrdma_np_expects_ctl(&s));
        llrdma_np_on_ready(&s, 4096, LLRDMA_NP_SUNK);
        size_t off, len;
        BOOST_TEST(!llrdma_np_next_piece(&s, 0, 0, &off, &len));
        BOOST_TEST(s.state == LLRDMA_NP_COMPLETE); // not SEND_DONE: no DONE
        BOOST_TEST(s.status == LLRDMA_NP_OK);
        BOOST_TEST(!llrdma_np_expects_ctl(&s));
        BOOST_TEST(llrdma_np_may_release(&s));
    }
}

BOOST_AUTO_TEST_CASE(failed_put_waits_for_the_others_then_reports_in_done)
{
    llrdma_np_msg_t m;
    llrdma_np_send_init(&m, 100);
    llrdma_np_on_ready(&m, 100, LLRDMA_NP_OK);
    size_t off, len;
    BOOST_REQUIRE(llrdma_np_next_piece(&m, 30, 0, &off, &len));
    llrdma_np_put_started(&m, len);
    BOOST_REQUIRE(llrdma_np_next_piece(&m, 30, 0, &off, &len));
    llrdma_np_fail(&m, LLRDMA_NP_ERR_LOCAL); // the second btl_put refused
    BOOST_CHECK(!llrdma_np_next_piece(&m, 30, 0, &off, &len));
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_PUTTING); // the first still writes
    BOOST_CHECK(!llrdma_np_may_release(&m));
    llrdma_np_put_done(&m, 1);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_SEND_DONE);
    BOOST_CHECK_EQUAL(m.status, LLRDMA_NP_ERR_LOCAL);

    // A callback with an error: the same.
    llrdma_np_send_init(&m, 60);
    llrdma_np_on_ready(&m, 60, LLRDMA_NP_OK);
    BOOST_CHECK_EQUAL(start_all(&m, 30, 0).size(), 2u);
    llrdma_np_put_done(&m, 0);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_PUTTING);
    llrdma_np_put_done(&m, 1);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_SEND_DONE);
    BOOST_CHECK_EQUAL(m.status, LLRDMA_NP_ERR_LOCAL);

    // A source that could not be registered: DONE with the error, no put.
    llrdma_np_send_init(&m, 60);
    llrdma_np_on_ready(&m, 60, LLRDMA_NP_OK);
    llrdma_np_fail(&m, LLRDMA_NP_ERR_LOCAL);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_SEND_DONE);
    BOOST_CHECK_EQUAL(m.next, 0u);
}

BOOST_AUTO_TEST_CASE(size_mismatch_puts_nothing_and_says_so)
{
    llrdma_np_msg_t m;
    llrdma_np_send_init(&m, 100);
    llrdma_np_on_ready(&m, 99, LLRDMA_NP_OK);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_SEND_DONE);
    BOOST_CHECK_EQUAL(m.status, LLRDMA_NP_ERR_SIZE);
    BOOST_CHECK_EQUAL(m.next, 0u);
    // An empty send (a failure carried) matches any receive: no put, DONE
    // with OK at once (the glue's DONE says 0 bytes).
    llrdma_np_send_init(&m, 0);
    llrdma_np_on_ready(&m, 100, LLRDMA_NP_OK);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_SEND_DONE);
    BOOST_CHECK_EQUAL(m.status, LLRDMA_NP_OK);
    size_t off, len;
    BOOST_CHECK(!llrdma_np_next_piece(&m, 64, 8, &off, &len));
    BOOST_CHECK(llrdma_np_may_release(&m));
}

BOOST_AUTO_TEST_CASE(cancelled_send_still_answers_ready)
{
    // Before READY: it must still consume READY and answer it with DONE.
    llrdma_np_msg_t m;
    llrdma_np_send_init(&m, 100);
    llrdma_np_cancel(&m);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_WAIT_READY);
    BOOST_CHECK(llrdma_np_expects_ctl(&m));
    llrdma_np_on_ready(&m, 100, LLRDMA_NP_OK);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_SEND_DONE);
    BOOST_CHECK_EQUAL(m.status, LLRDMA_NP_CANCELLED);
    BOOST_CHECK_EQUAL(m.next, 0u);

    // Puts in flight: no more start, DONE only after the last callback.
    llrdma_np_send_init(&m, 100);
    llrdma_np_on_ready(&m, 100, LLRDMA_NP_OK);
    size_t off, len;
    BOOST_REQUIRE(llrdma_np_next_piece(&m, 50, 0, &off, &len));
    llrdma_np_put_started(&m, len);
    llrdma_np_cancel(&m);
    BOOST_CHECK(!llrdma_np_next_piece(&m, 50, 0, &off, &len));
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_PUTTING);
    BOOST_CHECK(!llrdma_np_may_release(&m));
    llrdma_np_put_done(&m, 1);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_SEND_DONE);
    BOOST_CHECK_EQUAL(m.status, LLRDMA_NP_CANCELLED);

    // Every piece already written: the cancel is too late, DONE says OK.
    llrdma_np_send_init(&m, 10);
    llrdma_np_on_ready(&m, 10, LLRDMA_NP_OK);
    start_all(&m, 0, 0);
    llrdma_np_put_done(&m, 1);
    llrdma_np_cancel(&m);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_SEND_DONE);
    BOOST_CHECK_EQUAL(m.status, LLRDMA_NP_OK);
    llrdma_np_done_sent(&m);
    llrdma_np_cancel(&m);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_COMPLETE);
}

BOOST_AUTO_TEST_CASE(events_out_of_state_change_nothing)
{
    llrdma_np_msg_t m;
    llrdma_np_send_init(&m, 10);
    llrdma_np_on_done(&m, LLRDMA_NP_OK); // a receive's event
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_WAIT_READY);
    llrdma_np_done_sent(&m);
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_WAIT_READY);
    llrdma_np_recv_init(&m, 10, LLRDMA_NP_OK);
    llrdma_np_on_ready(&m, 10, LLRDMA_NP_OK); // a send's event
    BOOST_CHECK_EQUAL(m.state, LLRDMA_NP_WAIT_DONE);
    size_t off, len;
    BOOST_CHECK(!llrdma_np_next_piece(&m, 0, 0, &off, &len));
}
