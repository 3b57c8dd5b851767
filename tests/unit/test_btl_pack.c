/*
 * btl/llrdma: messages that wait, against the fake device (tests/unit/fake_btl.c).
 *
 * Covers: coalescing (records packed behind a queued fragment, never larger
 * than the peer takes, order kept, sendi packing too), the pack floor (a
 * burst into a busy receiver lands in a few buffers while it computes), and
 * the batched send queue (btl_llrdma_sq_batch: past half the queue, small
 * messages pack and larger ones go as chains; off, each goes alone; a
 * ping-pong never batches).  Flow control, credits and sendi's lanes:
 * test_btl_flow.c.
 */
#include "fake_btl.h"

#include <string.h>

#define LL LLRDMA_PATH_LL
#define HDR sizeof(mca_btl_llrdma_hdr_t)

/* Largest record sequence queued on a path: never more than the peer takes. */
static uint32_t max_queued_wire(mca_btl_llrdma_endpoint_t *ep, int p)
{
    mca_btl_llrdma_frag_t *f;
    uint32_t max = 0;
    OPAL_LIST_FOREACH(f, &ep->pending[p], mca_btl_llrdma_frag_t)
    {
        uint32_t w = 0 != f->wire ? f->wire : (uint32_t)(HDR + f->segment.seg_len);
        max = w > max ? w : max;
    }
    return max;
}

/* A burst of 4 KB messages into a receiver that does not progress, at hint
 * 64K (64 KiB buffers; the overcommitted burst window, 127 of them): the
 * first half of the window goes a message per buffer, the rest packs, so the
 * whole burst lands in the receiver's buffers while it is busy and nothing
 * waits in the sender for credits only the receiver's progress returns.
 * Without the pack floor 127 buffers go out a message each and the rest
 * waits. */
static void test_burst_packs_into_a_busy_receiver(void)
{
    mca_btl_llrdma_conn_t *ca, *cb;
    const int n = 400;
    uint64_t sent0;
    uint32_t bufs, per_buf;

    /* Send queues deeper than the window: only credits hold the sender. */
    CHECK(0 == fw_pair(65536, 256, 0));
    mca_btl_llrdma_component.coalesce = 1;
    ca = fw_conn(0, 1, LL);
    cb = fw_conn(1, 0, LL);
    CHECK(127 == ca->credit.granted && cb->allot == ca->credit.granted);
    CHECK(fw[1].prof.ll.rq_depth < ca->credit.granted);
    sent0 = ca->credit.sent;
    for (int i = 0; i < n; ++i) {
        int rc = fw_send(0, 1, 4096, 0);
        CHECK(OPAL_SUCCESS == rc || 1 == rc);
    }
    fw_progress_one(0, 50); /* only the sender */
    bufs = (uint32_t)(ca->credit.sent - sent0);
    per_buf = fw[0].ep[1]->frag_max[LL] / (4096 + 2 * HDR);
    printf("# burst: %d messages of 4 KB in %u receive buffers of %u (window %u)\n", n, bufs,
           (unsigned)fw[1].m->path[LL].rq.buf_bytes, ca->credit.granted);
    CHECK(0 == opal_list_get_size(&fw[0].ep[1]->pending[LL]));
    CHECK(0 == fw[0].m->waiting && mca_btl_llrdma_conn_credits(ca) > 0);
    CHECK(bufs <= ca->credit.granted / 2 + (n - ca->credit.granted / 2) / per_buf + 2);
    CHECK(fake_cq_waiting(fw[1].m->path[LL].rcq) == bufs);
    fw_settle(300);
    CHECK(0 == fake.rnr_events);
    fw_check_all_arrived();
    fw_end(0);
}

/* Past half the send queue (btl_llrdma_sq_batch) a send waits for the
 * queue's next completion and goes with the others: small messages packed
 * into one buffer, larger ones (4 KB at hint 8K, which do not pack) posted
 * as chains.  With the knob off each goes alone until the queue is full;
 * a sender that progresses between sends (a ping-pong) never batches. */
static void test_busy_queue_batches(void)
{
    for (int batch = 1; batch >= 0; --batch) {
        for (int big = 0; big < 2; ++big) {
            const size_t size = big ? 4096 : 16;
            const int n = 60;
            mca_btl_llrdma_conn_t *ca;
            uint32_t at, posted0, pend;
            int wrs0, posts0, alone, wrs, posts;

            CHECK(0 == fw_pair(8192, 64, 0));
            mca_btl_llrdma_component.coalesce = 1;
            mca_btl_llrdma_component.sq_batch = batch;
            ca = fw_conn(0, 1, LL);
            at = mca_btl_llrdma_conn_batch_at(ca, batch);
            CHECK(64 == ca->sq.depth && 16 == ca->sq.interval && (batch ? 32u : 64u) == at);
            posted0 = ca->sq.posted;
            CHECK(posted0 < 16);
            fake.wire_hold = 1;
            wrs0 = fake.nsends;
            for (int i = 0; i < n; ++i) {
                CHECK(0 <= fw_send(0, 1, size, 0));
            }
            alone = fake.nsends - wrs0;
            pend = (uint32_t)opal_list_get_size(&fw[0].ep[1]->pending[LL]);
            CHECK((uint32_t)alone == at - posted0 || (!batch && n == alone));
            /* Small ones wait in one packed buffer; 4 KB ones two to a
             * buffer: the first waits in its own fragment, whose buffer (the
             * peer's 8 KiB fragment and headroom) takes the next behind it. */
            CHECK(pend == (alone == n ? 0u : big ? (uint32_t)(n - alone + 1) / 2 : 1u));
            printf("# busy queue (batch %d, %zu B): %d of %d alone, %u waiting\n", batch, size,
                   alone, n, pend);
            /* One wait begun at the batching point; the rest queued behind it. */
            CHECK((uint64_t)batch == fw[0].m->sq_batched);
            /* The wire moves; only the sender progresses (no credit writes):
             * what waits goes at its first completion, in chains. */
            fake.wire_hold = 0;
            wrs0 = fake.nsends;
            posts0 = fake.nsend_posts;
            fw_progress_one(0, 50);
            wrs = fake.nsends - wrs0;
            posts = fake.nsend_posts - posts0;
            CHECK(0 == opal_list_get_size(&fw[0].ep[1]->pending[LL]));
            CHECK(wrs == (int)pend);
            if (big && batch) {
                CHECK(posts > 0 && posts < wrs); /* chained */
            }
            fw_settle(300);
            CHECK(n + 1 == (int)fw_sent(0, 1));
            CHECK(0 == fake.sq_overflows && 0 == fake.rnr_events);
            fw_check_all_arrived();
            fw_end(0);
        }
    }
    /* Progress between sends: every one alone, batching on. */
    CHECK(0 == fw_pair(8192, 64, 0));
    mca_btl_llrdma_component.coalesce = 1;
    mca_btl_llrdma_component.sq_batch = 1;
    {
        mca_btl_llrdma_conn_t *ca = fw_conn(0, 1, LL);
        int wrs0 = fake.nsends, mine = 0;
        for (int i = 0; i < 200; ++i) {
            CHECK(0 <= fw_send(0, 1, 16, 0));
            CHECK(0 == opal_list_get_size(&fw[0].ep[1]->pending[LL]));
            fw_progress(2);
        }
        for (int k = wrs0; k < fake.nsends; ++k) {
            mine += fake.sends[k % FAKE_MAX_WR].qp == ca->qp;
        }
        CHECK(200 == mine);
        CHECK(0 == fw[0].m->sq_batched);
    }
    fw_settle(300);
    fw_check_all_arrived();
    fw_end(0);
}

/* A receiver that does not progress, senders that keep sending: once the
 * credits are used, messages are packed behind the queued fragment and
 * complete at once; the receiver gets them all, in order, in a few buffers,
 * and no buffer is larger than the peer's (here smaller: hint 4K). */
static void test_coalesce(void)
{
    mca_btl_llrdma_endpoint_t *ab;
    mca_btl_llrdma_conn_t *ca;
    mca_btl_base_descriptor_t *d = NULL;
    int before_sends, before_posts, n_msgs = 0, queued_rc = 0, packed_rc = 0;
    size_t bytes = 0;

    fw_begin();
    mca_btl_llrdma_component.coalesce = 1;
    CHECK(0 == fw_add(16384, 0, 0)); /* A sends LL up to 16K */
    CHECK(1 == fw_add(4096, 0, 0));  /* B receives LL up to 4K */
    fw_mesh();
    (void)fw_send(0, 1, 16, 0);
    fw_settle(100);
    ab = fw[0].ep[1];
    ca = fw_conn(0, 1, LL);
    CHECK(NULL != ca && ab->frag_max[LL] < 16384);
    printf("# coalesce: peer LL frag_max %u\n", ab->frag_max[LL]);
    if (NULL == ca) {
        fw_end(1);
        return;
    }
    /* Use the credits up: each message its own fragment. */
    while (mca_btl_llrdma_conn_credits(ca) > 0) {
        int rc = fw_send(0, 1, 100, 0);
        CHECK(OPAL_SUCCESS == rc || 1 == rc);
        fw_progress_one(0, 1);
    }
    CHECK(0 == opal_list_get_size(&ab->pending[LL]));
    before_sends = fake.nsends;
    before_posts = fake.nsend_posts;
    /* 300 more of 16..1000 bytes: the first is copied into a fragment of the
     * BTL's own, the rest pack behind it; each completes at once. */
    for (int i = 0; i < 300; ++i) {
        size_t size = 16 + (size_t)(i * 37) % 985;
        int rc = fw_send(0, 1, size, 0);
        queued_rc += OPAL_SUCCESS == rc;
        packed_rc += 1 == rc;
        bytes += size;
        ++n_msgs;
    }
    /* sendi packs too: success, no descriptor. */
    CHECK(OPAL_SUCCESS == fw_sendi(0, 1, 200, 24, &d) && NULL == d);
    ++n_msgs;
    bytes += 200;
    CHECK(fake.nsends == before_sends); /* nothing went: no credits */
    CHECK(0 == queued_rc && 300 == packed_rc);
    /* A new fragment queues only when the last one is full. */
    queued_rc = (int)opal_list_get_size(&ab->pending[LL]);
    CHECK(queued_rc >= 2 && (size_t)queued_rc <= bytes / (ab->frag_max[LL] - 1000 - 2 * HDR) + 1);
    CHECK(max_queued_wire(ab, LL) <= HDR + ab->frag_max[LL]);
    CHECK(1 == fw[0].m->waiting);
    /* The receiver wakes: every message arrives, verified, in order. */
    fw_settle(300);
    CHECK(0 == opal_list_get_size(&ab->pending[LL]));
    CHECK(fake.nsends - before_sends < n_msgs / 5);
    /* The queued fragments left in chains: fewer posts than WRs. */
    CHECK(fake.nsend_posts - before_posts < fake.nsends - before_sends);
    printf("# coalesce: %d messages in %d WRs (%d queued fragments), %d posts\n", n_msgs,
           fake.nsends - before_sends, queued_rc, fake.nsend_posts - before_posts);
    CHECK(0 == fake.rnr_events && 0 == fake.sq_overflows);
    /* A message of more than a quarter of the peer's buffer waits as ob1's
     * own fragment (its completion comes later); a small one still packs
     * behind it. */
    while (mca_btl_llrdma_conn_credits(ca) > 0) {
        (void)fw_send(0, 1, 100, 0);
        fw_progress_one(0, 1);
    }
    CHECK(OPAL_SUCCESS == fw_send(0, 1, ab->frag_max[LL] / 4 + 1, 0));
    CHECK(1 == fw_send(0, 1, 100, 0));
    CHECK(1 == opal_list_get_size(&ab->pending[LL]));
    fw_settle(300);
    fw_check_all_arrived();
    fw_end(0);

    /* btl_llrdma_coalesce=0: one fragment per message, as before. */
    CHECK(0 == fw_pair(8192, 0, 0));
    ca = fw_conn(0, 1, LL);
    while (mca_btl_llrdma_conn_credits(ca) > 0) {
        (void)fw_send(0, 1, 100, 0);
        fw_progress_one(0, 1);
    }
    for (int i = 0; i < 20; ++i) {
        CHECK(OPAL_SUCCESS == fw_send(0, 1, 100, 0));
    }
    CHECK(20 == opal_list_get_size(&fw[0].ep[1]->pending[LL]));
    fw_settle(300);
    fw_check_all_arrived();
    fw_end(0);
}

int main(int argc, char **argv)
{
    if (0 != fw_init(&argc, &argv)) {
        return 2;
    }
    test_coalesce();
    test_burst_packs_into_a_busy_receiver();
    test_busy_queue_batches();
    return fw_finish();
}
