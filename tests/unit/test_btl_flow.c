/*
 * btl/llrdma flow control against the fake device (tests/unit/fake_btl.c):
 * several modules in one process, wired through the fake rdma_cm, exchange
 * messages while the fake enforces send queue, receive queue and completion
 * queue capacities and records every RNR event.
 *
 * Covers: a full send queue with selective signalling (the BTL and the
 * device agree on its occupancy), a receiver that is not polled (credits stop
 * the sender: no RNR while the windows are backed), credits returned by RDMA write (the sender
 * blocks at 0 and resumes after the receiver's progress; inline on LL, from registered memory on
 * BW; a return landing in the middle of a send), completion queue reservations (several CQs per
 * path, no overrun in the worst case, a connection that cannot fit is
 * refused), receive allotments shrinking past btl_llrdma_recv_mem_max
 * (rnr_retry below 7), overcommitted windows (the SRQ limit grows the pool,
 * RNR waits, nothing lost; every seam call of that failing in turn),
 * simultaneous connects (exactly one QP per path survives, for every
 * schedule), receive reposts (preset work requests chained, a chain the
 * SRQ refuses midway; two senders' runs in one batch credited apart),
 * and sendi (contiguous and packed data).  Messages that wait, packed and
 * batched: test_btl_pack.c; peers with other hints and prepare_src:
 * test_btl_limits.c.
 */
#include "fake_btl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/datatype/opal_convertor.h"

#define LL LLRDMA_PATH_LL
#define BW LLRDMA_PATH_BW
#define HDR sizeof(mca_btl_llrdma_hdr_t)

/* ------------------------------------------------------ send queue */

static void test_full_send_queue(void)
{
    mca_btl_llrdma_conn_t *ca;
    int posted, run = 0, max_run = 0;

    CHECK(0 == fw_pair(8192, 8, 0)); /* 8 WRs, one signalled in 2 */
    ca = fw_conn(0, 1, LL);
    CHECK(8 == fake_qp(ca->qp)->attr.cap.max_send_wr && 8 == ca->sq.depth);
    /* Nothing completes while the wire is held: the BTL stops at the
     * device's capacity and queues the rest in order. */
    fake.wire_hold = 1;
    posted = fake.nsends;
    for (int i = 0; i < 30; ++i) {
        /* 1: posted (or a copy queued) and done for ob1; 0: queued. */
        CHECK(0 <= fw_send(0, 1, 1000, 0));
        CHECK(ca->sq.posted == fake_qp_outstanding(ca->qp));
    }
    CHECK(fake_qp_outstanding(ca->qp) == 8);
    CHECK(fake.nsends - posted == 7); /* the first (inline) WR is not retired yet */
    CHECK(23 == opal_list_get_size(&fw[0].ep[1]->pending[LL]));
    /* Inline sends need no completion but still take slots: they queue too. */
    for (int i = 0; i < 40; ++i) {
        CHECK(OPAL_SUCCESS == fw_send(0, 1, 16, 1));
    }
    fake.wire_hold = 0;
    for (int r = 0; r < 200 && fw_sent(0, 1) < 71; ++r) {
        fw_progress(1);
        /* Between progress calls the BTL and the device agree on occupancy. */
        CHECK(ca->sq.posted == fake_qp_outstanding(ca->qp));
    }
    fw_settle(100);
    CHECK(0 == fake.sq_overflows);
    /* Never more unsignalled WRs in a row than the cadence allows. */
    for (int i = 0; i < fake.nsends; ++i) {
        if (fake.sends[i].qp != ca->qp) {
            continue;
        }
        run = (fake.sends[i].flags & IBV_SEND_SIGNALED) ? 0 : run + 1;
        max_run = run > max_run ? run : max_run;
    }
    CHECK(max_run <= (int)ca->sq.interval - 1);
    fw_check_all_arrived();
    fw_end(0);
}

/* ------------------------------------------------------ credits */

/* The receiver is not polled while a sender pushes far more than its
 * allotment: credits stop the sender, the SRQ never runs dry. */
static void test_receiver_never_runs_dry(void)
{
    mca_btl_llrdma_conn_t *ca, *cb;
    uint32_t allot;
    int total = 600;

    CHECK(0 == fw_pair(8192, 0, 0));
    ca = fw_conn(0, 1, LL);
    cb = fw_conn(1, 0, LL);
    allot = cb->allot;
    CHECK(ca->credit.granted == allot);
    for (int i = 0; i < total; ++i) {
        int rc = fw_send(0, 1, i % 3 ? 100 : 2000, 0);
        CHECK(OPAL_SUCCESS == rc || 1 == rc);
    }
    total = (int)fw[0].send_seq[1][0];
    fw_progress_one(0, 50); /* only the sender */
    CHECK(0 == fake.rnr_events);
    CHECK(0 == mca_btl_llrdma_conn_credits(ca));
    /* Every buffer of the allotment holds a message nobody polled. */
    CHECK(allot == fake_cq_waiting(fw[1].m->path[LL].rcq) + fake_srq_posted(fw[1].m->path[LL].srq));
    CHECK(fake_cq_waiting(fw[1].m->path[LL].rcq) == ca->credit.sent - cb->credit.consumed);
    CHECK(fake_cq_waiting(fw[1].m->path[LL].rcq) + 1 >= allot);
    CHECK(1 == fw[0].m->waiting && 0 != ca->stall_since);
    /* The receiver is polled now and then; the sender keeps up. */
    for (int r = 0; r < 2000 && fw_sent(0, 1) < (uint32_t)total; ++r) {
        fw_progress_one(1, 1);
        fw_progress_one(0, 3);
        /* Its receives fit the receive CQ, its own (credit write) completions the
         * send CQ's room. */
        CHECK(fake_cq_waiting(fw[1].m->path[LL].rcq) <= fw[1].m->path[LL].srq_depth);
        CHECK(fake_cq_waiting(fw[1].m->path[LL].scq) + fw[1].m->path[LL].scq_room <=
              fw[1].m->path[LL].scq_cqe);
    }
    fw_settle(100);
    CHECK(0 == fake.rnr_events && 0 == fake.rnr_naks);
    CHECK(0 == fw[0].m->waiting && 0 == ca->stall_since);
    CHECK(allot == fake_srq_posted(fw[1].m->path[LL].srq));
    fw_check_all_arrived();
    fw_end(0);

    /* Two senders into one receiver, which is polled rarely. */
    fw_begin();
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0) && 2 == fw_add(8192, 0, 0));
    fw_mesh();
    for (int i = 0; i < 300; ++i) {
        (void)fw_send(0, 2, 500, 0);
        (void)fw_send(1, 2, 20000, 1);
    }
    for (int r = 0; r < 3000 && (fw_sent(0, 2) < 300 || fw_sent(1, 2) < 300); ++r) {
        fw_progress_one(0, 2);
        fw_progress_one(1, 2);
        if (0 == r % 5) {
            fw_progress_one(2, 1);
        }
    }
    fw_settle(200);
    CHECK(0 == fake.rnr_events);
    fw_check_all_arrived();
    fw_end(0);
}

static int find_write(int from_wr, struct ibv_qp *qp)
{
    for (int i = from_wr; i < fake.nsends; ++i) {
        if (fake.sends[i].qp == qp && IBV_WR_RDMA_WRITE == fake.sends[i].opcode) {
            return i;
        }
    }
    return -1;
}

static void credit_round(int p, size_t size)
{
    mca_btl_llrdma_conn_t *ca = fw_conn(0, 1, p), *cb = fw_conn(1, 0, p);
    uint32_t threshold = cb->credit.threshold, n = mca_btl_llrdma_conn_credits(ca) + 10;
    int before, w, stalled_nsends;

    CHECK(threshold == (cb->allot / 4 > 0 ? cb->allot / 4 : 1));
    /* Use up the credits, and 10 more fragments. */
    for (uint32_t i = 0; i < n; ++i) {
        (void)fw_send(0, 1, size, 1);
    }
    fw_progress_one(0, 10);
    CHECK(0 == mca_btl_llrdma_conn_credits(ca));
    CHECK(10 == opal_list_get_size(&fw[0].ep[1]->pending[p]));
    /* The sender alone cannot get further. */
    stalled_nsends = fake.nsends;
    fw_progress_one(0, 50);
    CHECK(stalled_nsends == fake.nsends);
    CHECK(ca->credit.sent - ca->credit.seen == ca->credit.granted);
    /* The receiver progresses: it reposts and, once a quarter of the window
     * is back in its SRQ, writes the count back (a poll takes a batch). */
    before = fake.nsends;
    w = -1;
    for (uint32_t r = 0; r < cb->allot && w < 0; ++r) {
        fw_progress_one(1, 1);
        w = find_write(before, cb->qp);
    }
    CHECK(w >= 0);
    if (w < 0) {
        return;
    }
    CHECK(8 == fake.sends[w].length);
    CHECK(fake.sends[w].remote_addr == (uintptr_t)&ca->credit_buf[0]);
    CHECK(fake.sends[w].rkey == ca->credit_mr->rkey);
    CHECK(!!(fake.sends[w].flags & IBV_SEND_INLINE) == (cb->inline_max >= 8));
    CHECK(cb->credit.returned >= threshold);
    /* It lands when the wire runs; the sender resumes. */
    (void)fake_pump();
    CHECK(ca->credit_buf[0] == cb->credit.returned);
    CHECK(mca_btl_llrdma_conn_credits(ca) > 0);
    fw_progress_one(0, 2);
    CHECK(opal_list_get_size(&fw[0].ep[1]->pending[p]) < 10);
    fw_settle(200);
    CHECK(0 == opal_list_get_size(&fw[0].ep[1]->pending[p]));
}

/* Credit writes posted on qp since *scanned (the post log is a ring). */
static int count_writes(int *scanned, struct ibv_qp *qp)
{
    int n = 0;
    for (; *scanned < fake.nsends; ++*scanned) {
        const fake_wr_t *w = &fake.sends[*scanned % FAKE_MAX_WR];
        n += w->qp == qp && IBV_WR_RDMA_WRITE == w->opcode;
    }
    return n;
}

/* Credits ride in the headers of reverse traffic: a ping-pong of three
 * windows needs no credit write at all, every message arrives; a one-way
 * stream afterwards still gets its credits back by RDMA write. */
static void test_credits_in_headers(void)
{
    mca_btl_llrdma_conn_t *ca, *cb;
    uint32_t n;
    int scanned, writes = 0;
    uint64_t seen0;

    CHECK(0 == fw_pair(8192, 64, 0));
    ca = fw_conn(0, 1, LL);
    cb = fw_conn(1, 0, LL);
    n = 3 * cb->allot;
    seen0 = ca->credit.seen;
    for (uint32_t i = 0; i < n; ++i) {
        scanned = fake.nsends;
        CHECK(fw_send(0, 1, 100, 1) >= 0);
        fw_progress_one(1, 1);
        writes += count_writes(&scanned, cb->qp);
        scanned = fake.nsends;
        CHECK(fw_send(1, 0, 100, 1) >= 0);
        fw_progress_one(0, 1);
        writes += count_writes(&scanned, ca->qp);
    }
    fw_settle(200);
    CHECK(0 == writes);
    /* The sender saw more returns than one window: they came in headers. */
    CHECK(ca->credit.seen - seen0 >= n - 1);
    CHECK(ca->credit.sent - ca->credit.seen <= 1);
    fw_check_all_arrived();
    /* One way only: the returns need writes again. */
    scanned = fake.nsends;
    writes = 0;
    for (uint32_t i = 0; i < n; ++i) {
        (void)fw_send(0, 1, 100, 1);
        fw_progress_one(1, 1);
        writes += count_writes(&scanned, cb->qp);
        fw_progress_one(0, 1);
        scanned = fake.nsends;
    }
    fw_settle(200);
    CHECK(writes > 0);
    fw_check_all_arrived();
    fw_end(0);
}

static void test_credits_by_rdma_write(void)
{
    mca_btl_llrdma_conn_t *ca;
    uint64_t seen;
    uint32_t avail;

    CHECK(0 == fw_pair(8192, 0, 1));
    mca_btl_llrdma_component.stall_warn_ms = 0; /* report a stall at once */
    /* LL: 256 bytes inline granted, the credit write goes inline. */
    credit_round(LL, 100);
    /* BW: no inline, the write's source is the registered credit word. */
    credit_round(BW, 20000);
    CHECK(0 == fw_conn(0, 1, BW)->inline_max);
    /* A value that cannot be true (more than was sent, or going back) is ignored. */
    ca = fw_conn(0, 1, LL);
    avail = mca_btl_llrdma_conn_credits(ca);
    seen = ca->credit.seen;
    ca->credit_buf[0] = ca->credit.sent + 5;
    CHECK(avail == mca_btl_llrdma_conn_credits(ca) && seen == ca->credit.seen);
    ca->credit_buf[0] = seen > 0 ? seen - 1 : 0;
    CHECK(avail == mca_btl_llrdma_conn_credits(ca) && seen == ca->credit.seen);
    ca->credit_buf[0] = seen;
    CHECK(0 == fake.rnr_events);
    fw_check_all_arrived();
    fw_end(0);
}

/* The credit word changes under the sender (an RDMA write of the peer) at
 * any moment, also in the middle of btl_send.  Here it lands while a message
 * that found no credit is being queued: coalescing copies it into a fragment
 * of a send pool that has to grow, and the registration (a seam call) is
 * where the wire runs.  The message must still go once progress runs: the
 * BTL once decided to queue on one read of the word and whether to watch for
 * credits on a second read, so it queued with credits available, no
 * completion to come and no watch, and nothing ever posted it (the 8-rank
 * all-to-all hang in the Soft-RoCE guest). */
static struct ibv_mr *(*real_reg_mr)(struct ibv_pd *, void *, size_t, int);
static int land_credits_at_reg_mr;

static struct ibv_mr *reg_mr_landing_credits(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    if (land_credits_at_reg_mr) {
        land_credits_at_reg_mr = 0;
        fake.wire_hold = 0;
        (void)fake_pump(); /* the receiver's credit write lands now */
    }
    return real_reg_mr(pd, addr, len, access);
}

static void test_credits_landing_mid_send(void)
{
    mca_btl_llrdma_conn_t *ca;
    mca_btl_llrdma_pool_t *pool;
    mca_btl_base_descriptor_t *d;
    opal_list_t stash;
    opal_list_item_t *item;
    int rc;

    CHECK(0 == fw_pair(8192, 0, 0));
    mca_btl_llrdma_component.coalesce = 1;
    ca = fw_conn(0, 1, LL);
    while (mca_btl_llrdma_conn_credits(ca) > 0) {
        (void)fw_send(0, 1, 100, 0);
        fw_progress_one(0, 1);
    }
    CHECK(0 == opal_list_get_size(&fw[0].ep[1]->pending[LL]));
    /* The receiver takes the messages; its credit writes wait on the wire. */
    fake.wire_hold = 1;
    fw_progress_one(1, (int)fw_conn(1, 0, LL)->allot);
    CHECK(0 == mca_btl_llrdma_conn_credits(ca));
    /* ob1's descriptor, then a send pool with nothing free: the copy grows it. */
    d = fw_alloc(0, 1, 100, 0);
    CHECK(NULL != d);
    if (NULL == d) {
        fw_end(1);
        return;
    }
    pool = &fw[0].m->path[LL].send_pool;
    OBJ_CONSTRUCT(&stash, opal_list_t);
    while (NULL != (item = opal_list_remove_first(&pool->free))) {
        opal_list_append(&stash, item);
    }
    real_reg_mr = mca_btl_llrdma_verbs.reg_mr;
    mca_btl_llrdma_verbs.reg_mr = reg_mr_landing_credits;
    land_credits_at_reg_mr = 1;
    rc = fw[0].m->super.btl_send(&fw[0].m->super, fw[0].ep[1], d, FW_TAG);
    mca_btl_llrdma_verbs.reg_mr = real_reg_mr;
    while (NULL != (item = opal_list_remove_first(&stash))) {
        opal_list_append(&pool->free, item);
    }
    OBJ_DESTRUCT(&stash);
    CHECK(1 == rc); /* copied: complete for ob1 */
    fw[0].inline_done += 1 == rc;
    fw[0].accepted += OPAL_SUCCESS == rc;
    CHECK(0 == land_credits_at_reg_mr); /* the credits did land mid-send */
    CHECK(mca_btl_llrdma_conn_credits(ca) > 0);
    /* Queued on a read of 0 credits: progress must watch for them. */
    CHECK(1 == opal_list_get_size(&fw[0].ep[1]->pending[LL]));
    CHECK(0 != ca->stall_since && 1 == fw[0].m->waiting);
    fw_settle(100);
    CHECK(0 == opal_list_get_size(&fw[0].ep[1]->pending[LL]));
    CHECK(0 == ca->stall_since && 0 == fw[0].m->waiting);
    fw_check_all_arrived();
    fw_end(0);
}

/* A module with work outstanding and nothing moving prints its state at
 * verbose level 1 after btl_llrdma_stall_warn ms (btl_llrdma_stuck.c), then
 * after twice that, ...; an idle one does not. */
static void test_stuck_dump(void)
{
    mca_btl_llrdma_conn_t *ca;
    int saved_verbose = mca_btl_llrdma_component.verbose;

    CHECK(0 == fw_pair(8192, 0, 0));
    mca_btl_llrdma_component.verbose = 1;
    mca_btl_llrdma_component.stall_warn_ms = 2;
    ca = fw_conn(0, 1, LL);
    while (mca_btl_llrdma_conn_credits(ca) > 0) {
        (void)fw_send(0, 1, 100, 0);
        fw_progress_one(0, 1);
    }
    (void)fw_send(0, 1, 100, 0); /* queued: the receiver is not polled */
    for (int k = 0; k < 200 && fw[0].m->stuck_dumps < 2; ++k) {
        fw_progress_one(0, 1100);
        usleep(1000);
    }
    CHECK(2 <= fw[0].m->stuck_dumps);
    fw_settle(100);
    for (int k = 0; k < 20; ++k) { /* both idle now */
        fw_progress(1100);
        usleep(1000);
    }
    CHECK(0 == fw[0].m->stuck_dumps && 0 == fw[1].m->stuck_dumps);
    fw_check_all_arrived();
    fw_end(0);
    mca_btl_llrdma_component.verbose = saved_verbose;
}

/* A stalled sender says so once and again when it resumes (verbose 1). */
static void test_stall_reported(void)
{
    mca_btl_llrdma_conn_t *ca;

    CHECK(0 == fw_pair(8192, 0, 0));
    mca_btl_llrdma_component.stall_warn_ms = 0;
    ca = fw_conn(0, 1, LL);
    for (int i = 0; i < 1000 && mca_btl_llrdma_conn_credits(ca) > 0; ++i) {
        (void)fw_send(0, 1, 100, 0);
        fw_progress_one(0, 1);
    }
    (void)fw_send(0, 1, 100, 0);
    fw_progress_one(0, 3);
    CHECK(0 != ca->stall_since && ca->stall_reported);
    fw_settle(100);
    CHECK(0 == ca->stall_since && !ca->stall_reported && 0 == fw[0].m->waiting);
    fw_check_all_arrived();
    fw_end(0);
}

/* ------------------------------------------------ completion queues */

static void test_cq_room(void)
{
    mca_btl_llrdma_module_t *a;
    uint32_t outstanding;

    /* CQs of 80 entries and send queues of 40: three connections could post
     * 120 WRs, the path's one send CQ holds 80.  Receives complete in the
     * path's receive CQ, as large as the SRQ (80 here), whatever the windows
     * promise.  A BTL that posted past the room, or more receive buffers than
     * its receive CQ holds, would overrun a CQ below; one that left a
     * connection held by the room alone waiting for its own completions
     * would hang. */
    fw_begin();
    mca_btl_llrdma_component.coalesce = 0; /* counts fragments */
    mca_btl_llrdma_component.sq_batch = 0; /* queues that fill, not batches */
    fake.max_cqe = fw_port_max_cqe = 80;
    for (int i = 0; i < 4; ++i) {
        CHECK(i == fw_add(8192, 40, 40));
    }
    fw_mesh();
    a = fw[0].m;
    CHECK(40 == a->lim.sq_depth[LL] && 40 == a->lim.sq_depth[BW]);
    for (int j = 1; j < 4; ++j) {
        (void)fw_send(0, j, 100, 0);
        (void)fw_send(0, j, 20000, 1);
        (void)fw_send(j, 0, 100, 0);
        (void)fw_send(j, 0, 20000, 1);
    }
    fw_settle(200);
    fw_check_all_arrived();
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        CHECK(80 == a->path[p].srq_depth && 80 == ((fake_cq_t *)a->path[p].rcq)->cap);
        CHECK(80 == a->path[p].scq_cqe && 80 == ((fake_cq_t *)a->path[p].scq)->cap);
    }
    /* The room runs out before the send queues do: the first two connections
     * (nearly) fill it, the third is held by the room alone with work queued
     * (its own few completions, if any, may come before room is back), and
     * the WR that took the last entry is signalled (so room comes back). */
    fake.wire_hold = 1;
    for (int j = 1; j < 4; ++j) {
        for (int i = 0; i < 50; ++i) {
            (void)fw_send(0, j, 100, 0);
            (void)fw_send(0, j, 20000, 1);
        }
    }
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        outstanding = 0;
        for (int j = 1; j < 4; ++j) {
            outstanding += fake_qp_outstanding(fw_conn(0, j, p)->qp);
        }
        CHECK(0 == a->path[p].scq_room && 80 == outstanding && a->path[p].scq_starved);
        CHECK(!opal_list_is_empty(&fw[0].ep[3]->pending[p]));
        CHECK(fw_conn(0, 3, p)->sq.posted < fw_conn(0, 3, p)->sq.depth);
    }
    CHECK(fake.sends[fake.nsends - 1].flags & IBV_SEND_SIGNALED);
    /* The wire runs again: room comes back and every endpoint is drained. */
    fake.wire_hold = 0;
    fw_settle(400);
    fw_check_all_arrived();
    CHECK(0 == fake.cq_overruns);
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        CHECK(((fake_cq_t *)a->path[p].scq)->high <= 80);
    }
    /* Worst case for receives: every peer sends far more than its window
     * while process 0 does not poll: its receive CQ fills up to what the SRQ
     * held, the rest waits in the senders' NICs (RNR)... */
    for (int j = 1; j < 4; ++j) {
        for (int i = 0; i < 120; ++i) {
            (void)fw_send(j, 0, 100, 0);
            (void)fw_send(j, 0, 20000, 1);
        }
    }
    for (int r = 0; r < 50; ++r) {
        for (int j = 1; j < 4; ++j) {
            fw_progress_one(j, 1);
        }
    }
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        CHECK(0 == fake_srq_posted(a->path[p].srq));
        CHECK(fake_cq_waiting(a->path[p].rcq) == a->path[p].rq.posted);
    }
    CHECK(fake.rnr_naks > 0);
    /* ...and every WR process 0 has posted completes in error: its QPs fail
     * (the first WR with an error, the rest flushed, each with a completion). */
    fake.wire_hold = 1;
    for (int j = 1; j < 4; ++j) {
        for (int i = 0; i < 50; ++i) {
            (void)fw_send(0, j, 1000, 0);
            (void)fw_send(0, j, 20000, 1);
        }
    }
    for (int j = 1; j < 4; ++j) {
        fake_qp_fail(fw_conn(0, j, LL)->qp, IBV_WC_RETRY_EXC_ERR);
        fake_qp_fail(fw_conn(0, j, BW)->qp, IBV_WC_RETRY_EXC_ERR);
    }
    fake.wire_hold = 0;
    (void)fake_pump();
    CHECK(0 == fake.cq_overruns);
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        fake_cq_t *f = (fake_cq_t *)a->path[p].scq;
        CHECK(f->high <= 80);
        /* The test came close (WRs executed before, unsignalled, do not flush). */
        CHECK(f->high + 8 >= 80);
        if (f->high + 8 < 80) {
            printf("#   %s send CQ: at most %u of 80 entries used\n", p == LL ? "ll" : "bw",
                   f->high);
        }
    }
    fw_progress(20);
    CHECK(3 == fw[0].err_calls); /* each failed peer, once */
    CHECK(0 == fake.cq_overruns);
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        CHECK(80 == a->path[p].scq_room); /* every flushed WR gave its room back */
    }
    /* RNR is how the overcommitted receive side waits: the only device events. */
    CHECK(fake_faults() == fake.rnr_events);
    fw_end(1);
}

/* Guaranteed mode (rnr_retry below 7): past btl_llrdma_recv_mem_max, new
 * connections get the least allotment. */
static void test_allotment_shrinks(void)
{
    fw_begin();
    mca_btl_llrdma_component.rnr_retry = 6;
    for (int i = 0; i < 3; ++i) {
        CHECK(i == fw_add(8192, 0, 0));
    }
    fw_mesh();
    /* Room for one LL allotment (64 buffers of 8256 bytes) on process 0. */
    mca_btl_llrdma_component.recv_mem_max = 64 * 8256 + 100;
    fw_as(0);
    fw[0].m->path[LL].rq.mem_max = mca_btl_llrdma_component.recv_mem_max;
    (void)fw_send(1, 0, 100, 0);
    fw_settle(100);
    (void)fw_send(2, 0, 100, 0);
    fw_settle(100);
    CHECK(64 == fw_conn(1, 0, LL)->credit.granted);
    CHECK(LLRDMA_RQ_MIN_ALLOT == fw_conn(2, 0, LL)->credit.granted);
    CHECK(64 + LLRDMA_RQ_MIN_ALLOT == fake_srq_posted(fw[0].m->path[LL].srq));
    /* Four credits still carry any amount of traffic, without RNR. */
    for (int i = 0; i < 200; ++i) {
        (void)fw_send(2, 0, 1000, 0);
    }
    for (int r = 0; r < 1000 && fw_sent(2, 0) < 201; ++r) {
        fw_progress_one(2, 2);
        fw_progress_one(0, 1);
    }
    CHECK(0 == fake.rnr_events);
    fw_check_all_arrived();
    fw_end(0);
}

/* Processes 0-2 at hint 8K (after the caller's knobs), 1 and 2 connected
 * to 0 on LL by one message each; with fail_after > 0 that seam call from
 * the connections on fails. */
static void three_into_zero(long fail_after)
{
    for (int i = 0; i < 3; ++i) {
        CHECK(i == fw_add(8192, 0, 0));
    }
    fw_mesh();
    if (fail_after > 0) {
        fake.fail_at = fake.calls + fail_after;
    }
    (void)fw_send(1, 0, 100, 0);
    (void)fw_send(2, 0, 100, 0);
    fw_settle(100);
}

/* Overcommitted windows (rnr_retry 7, the default): every peer gets its
 * whole window though the buffers back only some; a burst from all of them
 * while the receiver is busy waits in the senders' NICs (RNR, retried), the
 * SRQ limit event grows the pool to its budget, and nothing is lost. */
static void test_overcommitted_windows(void)
{
    mca_btl_llrdma_path_t *path;
    int rounds = 0;

    fw_begin();
    /* LL budget: 96 buffers of 8256 bytes; windows of 64 backed up to 64. */
    mca_btl_llrdma_component.recv_mem_max = 96 * 8256;
    three_into_zero(0);
    path = &fw[0].m->path[LL];
    CHECK(1 == path->rq.overcommit && 96 == path->rq.budget);
    CHECK(64 == fw_conn(1, 0, LL)->credit.granted && 64 == fw_conn(2, 0, LL)->credit.granted);
    CHECK(64 == fake_srq_posted(path->srq) && 128 == path->rq.reserved);
    CHECK(8 == path->srq_armed);
    /* Both send 150 while process 0 is busy: 64 land, the rest meet RNR. */
    for (int i = 0; i < 150; ++i) {
        (void)fw_send(1, 0, 1000, 0);
        (void)fw_send(2, 0, 1000, 0);
    }
    fw_progress_one(1, 20);
    fw_progress_one(2, 20);
    CHECK(fake.rnr_naks > 0);
    CHECK(0 == fake_srq_posted(path->srq));
    for (; rounds < 5000 && (fw_sent(1, 0) < 151 || fw_sent(2, 0) < 151); ++rounds) {
        fw_progress(1);
    }
    fw_settle(300);
    /* Events are read every 256 progress calls. */
    fw_progress_one(0, 300);
    printf("# overcommit: %d RNR NAKs, drained in %d rounds, %u buffers posted, %u grows\n",
           fake.rnr_naks, rounds, path->rq.posted, path->rq.grows);
    CHECK(151 == fw_sent(1, 0) && 151 == fw_sent(2, 0));
    /* The limit event grew the pool to its budget, once, and it is not re-armed. */
    CHECK(1 == path->rq.grows && 96 == path->rq.posted);
    CHECK(96 == fake_srq_posted(path->srq) && 0 == path->srq_armed);
    fw_check_all_arrived();
    /* RNR is how this mode waits: the only device events allowed. */
    CHECK(fake_faults() == fake.rnr_events);
    fw_end(1);
}

/* The same burst with each seam call failing in turn, from the connections'
 * set-up (where the SRQ limit is armed) through the limit event's growth:
 * every failure is reported to ob1 or absorbed with nothing lost, nothing
 * leaks, and a limit that could not be armed leaves a pool that still
 * carries everything (by RNR, without growing). */
static void test_overcommit_failures(void)
{
    long n;
    int ok = 0, reported = 0, absorbed = 0, arm_failed = 0;

    for (n = 1; n < 20000 && !ok; ++n) {
        mca_btl_llrdma_path_t *path;
        fw_begin();
        mca_btl_llrdma_component.connect_timeout_s = 0; /* no time-based retries */
        mca_btl_llrdma_component.recv_mem_max = 96 * 8256;
        three_into_zero(n);
        for (int i = 0; i < 80; ++i) {
            (void)fw_send(1, 0, 1000, 0);
            (void)fw_send(2, 0, 1000, 0);
        }
        fw_progress_one(1, 20);
        fw_progress_one(2, 20);
        fw_settle(300);
        fw_progress_one(0, 300); /* the limit event is read */
        fw_settle(300);
        path = &fw[0].m->path[LL];
        if (!fake.failed) {
            ok = 1;
            CHECK(81 == fw_sent(1, 0) && 81 == fw_sent(2, 0));
            CHECK(1 == path->rq.grows && 96 == fake_srq_posted(path->srq));
        } else if (fw[0].err_calls + fw[1].err_calls + fw[2].err_calls > 0) {
            ++reported;
        } else {
            ++absorbed;
            CHECK(81 == fw_sent(1, 0) && 81 == fw_sent(2, 0));
            if (0 == strcmp(fake.failed_fn, "f_modify_srq")) {
                ++arm_failed;
                /* Never armed: no event, no growth, RNR carried it all. */
                CHECK(0 == path->srq_armed && 0 == path->rq.grows);
                CHECK(64 == fake_srq_posted(path->srq));
            }
            if (81 != fw_sent(1, 0) || 81 != fw_sent(2, 0)) {
                printf("#   after failing %s (call %ld): %u and %u messages arrived\n",
                       fake.failed_fn, n, fw_sent(1, 0), fw_sent(2, 0));
            }
        }
        for (int i = 0; i < 3; ++i) {
            CHECK(fw[i].accepted == fw[i].cb_calls);
        }
        CHECK(fake_faults() == fake.rnr_events);
        fw_end(1);
    }
    CHECK(ok && arm_failed > 0);
    printf("# overcommit failures: %ld points, %d reported, %d absorbed (%d SRQ-limit arms)\n",
           n - 2, reported, absorbed, arm_failed);
}

/* A receiver that computes while overcommitted windows wait in RNR is not
 * a stopped device: past btl_llrdma_completion_timeout the watchdog says
 * so and waits on (the sends are retried for ever); it still fails a QP
 * whose peer retries RNR a bounded number of times (guaranteed windows). */
static void test_watchdog_waits_for_busy_receiver(void)
{
    for (int rnr7 = 1; rnr7 >= 0; --rnr7) {
        uint64_t end;
        fw_begin();
        mca_btl_llrdma_component.coalesce = 0;
        mca_btl_llrdma_component.recv_mem_max = 1; /* one window of buffers for all */
        mca_btl_llrdma_component.completion_timeout_ms = 300;
        if (!rnr7) {
            /* Guaranteed windows: a peer's sends never meet RNR, so the one
             * stuck here is the device's (the wire held). */
            mca_btl_llrdma_component.rnr_retry = 6;
        }
        three_into_zero(0);
        CHECK(rnr7 == fw[0].m->path[LL].rq.overcommit);
        CHECK((rnr7 ? 7 : 6) == fw_conn(1, 0, LL)->qp_rnr_retry);
        if (!rnr7) {
            fake.wire_hold = 1;
        }
        for (int i = 0; i < 100; ++i) {
            (void)fw_send(1, 0, 1000, 0);
            (void)fw_send(2, 0, 1000, 0);
        }
        /* Process 0 computes for 1 s; the senders progress. */
        for (end = mca_btl_llrdma_now_ms() + 1000; mca_btl_llrdma_now_ms() < end;) {
            fw_progress_one(1, 16);
            fw_progress_one(2, 16);
        }
        if (rnr7) {
            CHECK(fake.rnr_naks > 0);
            CHECK(0 == fw[1].err_calls && 0 == fw[2].err_calls);
            CHECK(fw[1].m->wd_rnr_waits + fw[2].m->wd_rnr_waits > 0);
            fw_settle(500);
            CHECK(101 == fw_sent(1, 0) && 101 == fw_sent(2, 0));
            fw_check_all_arrived();
            CHECK(fake_faults() == fake.rnr_events);
            fw_end(1);
        } else {
            CHECK(1 == fw[1].err_calls && NULL != strstr(fw[1].err_text, "stopped completing"));
            CHECK(0 == fw[1].m->wd_rnr_waits);
            fake.wire_hold = 0;
            fw_settle(50);
            fw_end(1);
        }
    }
}

/* ------------------------------------------ simultaneous connects */

static uint32_t rng;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

/* Processes 0 and 1 send to each other on both paths at once (1 after
 * `lag` progress calls of 0).  `sched` says what happens, step by step: '0'
 * or '1' progresses that process, 'a' or 'b' delivers the next CM message in
 * flight to one destination or the other (messages wait in flight when the
 * schedule has any), NULL a random schedule from `seed`. */
static int tie_rejects;
static int cm_reject_counting(struct rdma_cm_id *id, const void *data, uint8_t len)
{
    const mca_btl_llrdma_conn_req_t *r = data;
    if (len >= sizeof(*r) && MCA_BTL_LLRDMA_REJ_TIE == r->reason) {
        ++tie_rejects;
    }
    return fake_ops.cm_reject(id, data, len);
}

static void simultaneous(const char *sched, uint32_t seed, int lag)
{
    static const char moves[] = "01ab";

    fw_begin();
    mca_btl_llrdma_verbs.cm_reject = cm_reject_counting;
    fake.cm_hold = NULL == sched || NULL != strpbrk(sched, "ab");
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0));
    fw_mesh();
    (void)fw_send(0, 1, 100, 0);
    (void)fw_send(0, 1, 20000, 1);
    fw_progress_one(0, lag);
    (void)fw_send(1, 0, 100, 0);
    (void)fw_send(1, 0, 20000, 1);
    rng = seed;
    for (int s = 0; s < 96; ++s) {
        char move = NULL != sched ? sched[s % strlen(sched)] : moves[next_rand() % 4];
        if ('0' == move || '1' == move) {
            fw_progress_one(move - '0', 1);
        } else {
            (void)fake_cm_deliver(move - 'a');
        }
    }
    fake.cm_hold = 0;
    (void)fake_cm_deliver(-1);
    fw_settle(200);
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        mca_btl_llrdma_conn_t *c0 = fw_conn(0, 1, p), *c1 = fw_conn(1, 0, p);
        CHECK(NULL != c0 && NULL != c1);
        if (NULL == c0 || NULL == c1) {
            continue;
        }
        CHECK(LLRDMA_CONN_ESTABLISHED == c0->state && LLRDMA_CONN_ESTABLISHED == c1->state);
        CHECK(fake_qp(c0->qp)->peer == fake_qp(c1->qp)); /* the same connection */
        CHECK(c0->active != c1->active);
    }
    /* The losers' QPs are gone: one per path and side, one accept per path. */
    CHECK(4 == fake.live_qp && 2 == fake.naccepts);
    for (int i = 0; i < 2; ++i) {
        CHECK(0 == fw[i].m->connecting && 0 == fw[i].m->retrying);
        CHECK(LLRDMA_EP_READY == fw[i].ep[1 - i]->state);
    }
    /* Data flows both ways on them. */
    for (int i = 0; i < 20; ++i) {
        (void)fw_send(0, 1, 100 + i, 0);
        (void)fw_send(1, 0, 20000 + i, 1);
    }
    fw_settle(200);
    fw_check_all_arrived();
    fw_end(0);
}

static void test_simultaneous_connects(void)
{
    /* Without and with the CM messages held in flight: requests cross. */
    static const char *scheds[] = {"01",     "10",     "001",    "110",    "0011", "1100",
                                   "01ab",   "10ba",   "01ba",   "0a1b",   "1b0a", "01aa01bb",
                                   "0011ab", "01a01b", "10b10a", "011ab0", "ab01", "0101abab"};
    int cases = 0, ties = 0;

    for (size_t k = 0; k < sizeof(scheds) / sizeof(scheds[0]); ++k) {
        for (int lag = 0; lag < 3; ++lag) {
            tie_rejects = 0;
            simultaneous(scheds[k], 0, lag);
            ties += tie_rejects > 0;
            ++cases;
        }
    }
    for (uint32_t seed = 1; seed <= 60; ++seed) {
        tie_rejects = 0;
        simultaneous(NULL, seed * 2654435761u, (int)(seed % 3));
        ties += tie_rejects > 0;
        ++cases;
    }
    /* Requests did cross (the tie-break decided) in a good share of them. */
    CHECK(ties >= cases / 4);
    printf("# simultaneous connects: %d schedules, %d decided by the tie-break\n", cases, ties);
}

/* ------------------------------------------------------ sendi */

/* What ob1 does with the descriptor sendi handed back: fill and send it. */
static void send_descriptor(int i, int j, mca_btl_base_descriptor_t *d, size_t size)
{
    fw_fill(i, j, d->des_segments[0].seg_addr.pval, size, size > 8000);
    d->des_segments[0].seg_len = size;
    fw_as(i);
    /* No callback (ob1 set none): the fragment returns to the BTL. */
    CHECK(0 <= fw[i].m->super.btl_send(&fw[i].m->super, fw[i].ep[j], d, FW_TAG));
}

static void test_sendi(void)
{
    mca_btl_base_descriptor_t *d = NULL;
    mca_btl_llrdma_conn_t *ca;
    int before;

    fw_begin();
    mca_btl_llrdma_component.coalesce = 0; /* counts fragments */
    mca_btl_llrdma_component.sq_batch = 0; /* a queue that fills */
    CHECK(0 == fw_add(8192, 8, 8) && 1 == fw_add(8192, 8, 8));
    fw_mesh();
    /* Not connected: busy, with a descriptor for the regular path. */
    CHECK(OPAL_ERR_RESOURCE_BUSY == fw_sendi(0, 1, 100, 16, &d));
    CHECK(NULL != d);
    if (NULL != d) {
        send_descriptor(0, 1, d, 100);
    }
    fw_settle(100);
    CHECK(1 == fw_sent(0, 1));
    ca = fw_conn(0, 1, LL);
    /* Connected: header only, header + payload, inline or not, on either path. */
    {
        /* Inline ones are built on the stack: no send fragment is taken. */
        size_t free_before = opal_list_get_size(&fw[0].m->path[LL].send_pool.free);
        uint32_t frags_before = fw[0].m->path[LL].send_pool.nfrags;
        before = fake.nsends;
        CHECK(OPAL_SUCCESS == fw_sendi(0, 1, 16, 16, &d) && NULL == d);
        CHECK(OPAL_SUCCESS == fw_sendi(0, 1, 200, 16, &d) && NULL == d);
        CHECK(fake.nsends == before + 2);
        CHECK((fake.sends[before].flags & IBV_SEND_INLINE) &&
              (fake.sends[before + 1].flags & IBV_SEND_INLINE));
        CHECK(free_before == opal_list_get_size(&fw[0].m->path[LL].send_pool.free) &&
              frags_before == fw[0].m->path[LL].send_pool.nfrags);
        fw_settle(100);
        CHECK(3 == fw_sent(0, 1)); /* and they arrive intact (the receiver checks) */
    }
    before = fake.nsends;
    CHECK(OPAL_SUCCESS == fw_sendi(0, 1, 3000, 40, &d) && NULL == d);
    CHECK(fake.nsends == before + 1 && !(fake.sends[before].flags & IBV_SEND_INLINE));
    CHECK(OPAL_SUCCESS != fw_sendi(0, 1, 20000, 16, &d)); /* BW path not connected yet */
    if (NULL != d) {
        send_descriptor(0, 1, d, 20000);
        d = NULL;
    }
    fw_settle(100);
    CHECK(OPAL_SUCCESS == fw_sendi(0, 1, 20000, 16, &d) && NULL == d);
    /* Above the eager limit: busy and no descriptor. */
    CHECK(OPAL_ERR_RESOURCE_BUSY == fw_sendi(0, 1, fw[0].m->super.btl_eager_limit + 1, 16, &d));
    CHECK(NULL == d);
    fw_settle(100);
    /* Send queue full (the wire held): busy, with a descriptor; sent later in order. */
    fake.wire_hold = 1;
    for (int i = 0; i < 100 && llrdma_sq_free_slots(&ca->sq) > 0; ++i) {
        CHECK(0 <= fw_send(0, 1, 1000, 0));
    }
    CHECK(0 == llrdma_sq_free_slots(&ca->sq));
    CHECK(OPAL_ERR_RESOURCE_BUSY == fw_sendi(0, 1, 100, 16, &d) && NULL != d);
    if (NULL != d) {
        send_descriptor(0, 1, d, 100);
        d = NULL;
    }
    /* Something queued: busy even once the queue has room (order). */
    fake.wire_hold = 0;
    CHECK(OPAL_ERR_RESOURCE_BUSY == fw_sendi(0, 1, 100, 16, &d));
    if (NULL != d) {
        send_descriptor(0, 1, d, 100);
        d = NULL;
    }
    fw_settle(100);
    /* No credits: busy. */
    for (int i = 0; i < 1000 && mca_btl_llrdma_conn_credits(ca) > 0; ++i) {
        if (OPAL_SUCCESS != fw_sendi(0, 1, 100, 16, NULL)) {
            fw_progress_one(0, 1);
        }
    }
    CHECK(OPAL_ERR_RESOURCE_BUSY == fw_sendi(0, 1, 100, 16, &d));
    if (NULL != d) {
        send_descriptor(0, 1, d, 100);
        d = NULL;
    }
    fw_settle(200);
    CHECK(0 == fake.rnr_events && 0 == fake.sq_overflows);
    fw_check_all_arrived();
    fw_end(0);
}

/* sendi of data the convertor must pack (a strided datatype): inline all the
 * same, packed on the stack, and it arrives intact. */
static void test_sendi_packed(void)
{
    const size_t size = 64, hdr = 16, n = size - hdr;
    unsigned char msg[64], strided[2 * 48];
    opal_datatype_t *vec;
    opal_convertor_t *conv;
    mca_btl_base_descriptor_t *d = NULL;
    int before, inline_before;

    CHECK(0 == fw_pair(8192, 0, 0));
    fw_fill(0, 1, msg, size, 0);
    for (size_t k = 0; k < n; ++k) {
        strided[2 * k] = msg[hdr + k];
        strided[2 * k + 1] = 0xee; /* the gaps, never sent */
    }
    /* n bytes, one in every 2 (opal has no vector constructor of its own). */
    vec = opal_datatype_create(4);
    CHECK(OPAL_SUCCESS == opal_datatype_add(vec, &opal_datatype_uint1, n, 0, 2));
    CHECK(OPAL_SUCCESS == opal_datatype_commit(vec));
    conv = opal_convertor_create(opal_local_arch, 0);
    opal_convertor_prepare_for_send(conv, vec, 1, strided);
    CHECK(opal_convertor_need_buffers(conv));
    before = fake.nsends;
    inline_before = fw[0].m->sends_done_at_post[0] + fw[0].m->sends_done_at_post[1];
    fw_as(0);
    CHECK(OPAL_SUCCESS == fw[0].m->super.btl_sendi(&fw[0].m->super, fw[0].ep[1], conv, msg, hdr, n,
                                                   MCA_BTL_NO_ORDER,
                                                   MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, FW_TAG, &d));
    CHECK(NULL == d);
    CHECK(before + 1 == fake.nsends && (fake.sends[before].flags & IBV_SEND_INLINE));
    CHECK(size + HDR == fake.sends[before].length);
    CHECK(inline_before == (int)(fw[0].m->sends_done_at_post[0] + fw[0].m->sends_done_at_post[1]));
    OBJ_RELEASE(conv);
    OBJ_RELEASE(vec);
    fw_settle(100);
    fw_check_all_arrived(); /* the receiver checks every byte */
    CHECK(0 == fw[1].recv_bad);
    fw_end(0);
}

/* sendi's fast lane copies ob1's header and the payload in line by size
 * class (0-3, 4-7, 8-16, 17-32 bytes, libc above): every split of small
 * messages into header and payload goes through it and arrives intact. */
static void test_sendi_sizes(void)
{
    static const size_t hdrs[] = {0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 40};
    static const size_t sizes[] = {16, 17, 20, 23, 24, 25, 31, 32, 33, 40, 47, 48, 49, 64, 72};
    int sent = 0, slow_before;
    mca_btl_base_descriptor_t *d = NULL;

    CHECK(0 == fw_pair(8192, 0, 0));
    slow_before = (int)(fw[0].m->sends_done_at_post[0] + fw[0].m->sends_done_at_post[1]);
    for (size_t a = 0; a < sizeof(sizes) / sizeof(sizes[0]); ++a) {
        for (size_t b = 0; b < sizeof(hdrs) / sizeof(hdrs[0]) && hdrs[b] <= sizes[a]; ++b) {
            const int at = fake.nsends;
            CHECK(OPAL_SUCCESS == fw_sendi(0, 1, sizes[a], hdrs[b], &d) && NULL == d);
            CHECK(at + 1 == fake.nsends && (fake.sends[at % FAKE_MAX_WR].flags & IBV_SEND_INLINE) &&
                  sizes[a] + HDR == fake.sends[at % FAKE_MAX_WR].length);
            ++sent;
            fw_settle(10); /* credits back: every one takes the fast lane */
        }
    }
    /* None went the slow way (it counts its inline sends there). */
    CHECK(slow_before == (int)(fw[0].m->sends_done_at_post[0] + fw[0].m->sends_done_at_post[1]));
    fw_settle(100);
    fw_check_all_arrived(); /* the receiver checks every byte */
    CHECK(0 == fw[1].recv_bad);
    printf("# sendi sizes: %d header/payload splits of 16-72 bytes\n", sent);
    fw_end(0);
}

/* sendi's inline post by rdma-core's work-request API (btl_llrdma_wr_api).
 * `no_api`: the device has none; `knob`: btl_llrdma_wr_api; `refuse`: the
 * device grants the probe QP but refuses each connection's.  Checks that
 * the fast lane posted by the API only where every step allowed it (the
 * fake's counts of each kind of post), the dump says which and why, the
 * messages arrive intact, and a failed post fails the peer naming the call. */
static int refuse_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *a)
{
    (void)id, (void)a;
    errno = ENOMEM;
    return -1;
}

static void sendi_post_api_case(int no_api, int knob, int refuse, const char *want)
{
    const int by_wr = !no_api && knob && !refuse;
    mca_btl_base_descriptor_t *d = NULL;
    llrdma_device_info_t dev;
    char why[256];
    int wr0, posts0;

    fw_begin();
    fake.no_wr_api = no_api;
    mca_btl_llrdma_component.wr_api = knob;
    if (refuse) {
        mca_btl_llrdma_verbs.cm_create_qp_ex = refuse_ex;
    }
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0));
    fw_mesh();
    (void)fw_send(0, 1, 16, 0);
    (void)fw_send(0, 1, 30000, 1);
    fw_settle(100);
    CHECK(NULL != fw_conn(0, 1, LL) && LLRDMA_CONN_ESTABLISHED == fw_conn(0, 1, LL)->state);
    CHECK(fw[0].m->wr_api[LL] == (!no_api && knob));
    CHECK(by_wr == (NULL != fw_conn(0, 1, LL)->qpx) && by_wr == (NULL != fw_conn(1, 0, LL)->qpx));
    memset(&dev, 0, sizeof(dev));
    (void)mca_btl_llrdma_module_granted(fw[0].m, &dev, why, sizeof(why));
    CHECK(0 == strcmp(dev.post_api, want));
    if (0 != strcmp(dev.post_api, want)) {
        printf("#   post_api \"%s\", expected \"%s\"\n", dev.post_api, want);
    }
    wr0 = fake.nwr_posts;
    posts0 = fake.nsend_posts;
    for (int k = 0; k < 5; ++k) {
        CHECK(OPAL_SUCCESS == fw_sendi(0, 1, 24 + k, 16, &d) && NULL == d);
    }
    CHECK(fake.nsend_posts == posts0 + 5 && fake.nwr_posts == wr0 + (by_wr ? 5 : 0));
    CHECK(fake.sends[(fake.nsends - 1) % FAKE_MAX_WR].flags & IBV_SEND_INLINE);
    fw_settle(100);
    fw_check_all_arrived(); /* the receiver checks every byte */
    CHECK(0 == fw[1].recv_bad && 0 == fake_faults());
    /* A post the device refuses: the peer fails, once, naming the call. */
    fake.post_send_errno = EIO;
    (void)fw_sendi(0, 1, 24, 16, &d);
    fake.post_send_errno = 0;
    fw_settle(20);
    CHECK(1 == fw[0].err_calls &&
          NULL != strstr(fw[0].err_text, by_wr ? "ibv_wr_send failed" : "ibv_post_send failed"));
    fw_end(0);
}

static void test_sendi_post_api(void)
{
    sendi_post_api_case(0, 1, 0, "ll: ibv_wr_send, bw: ibv_wr_send");
    sendi_post_api_case(1, 1, 0,
                        "ll: ibv_post_send (ibv_create_qp_ex: Operation not supported), "
                        "bw: ibv_post_send (ibv_create_qp_ex: Operation not supported)");
    sendi_post_api_case(0, 0, 0,
                        "ll: ibv_post_send (btl_llrdma_wr_api=0), "
                        "bw: ibv_post_send (btl_llrdma_wr_api=0)");
    /* The probe said yes; each connection's QP was then created the classic way. */
    sendi_post_api_case(0, 1, 1, "ll: ibv_wr_send, bw: ibv_wr_send");
}

static void sendi_fast_lane_case(uint64_t hint, int path)
{
    mca_btl_base_descriptor_t *d = NULL;
    mca_btl_llrdma_conn_t *ca;
    uint32_t f0, room, before;
    int rc;

    fw_begin();
    mca_btl_llrdma_component.coalesce = 0;
    CHECK(0 == fw_add(hint, 64, 64) && 1 == fw_add(hint, 64, 64));
    fw_mesh();
    (void)fw_send(0, 1, 16, 0);
    fw_settle(100);
    ca = fw_conn(0, 1, path);
    CHECK(NULL != ca && LLRDMA_CONN_ESTABLISHED == ca->state);
    if (NULL == ca) {
        fw_end(0);
        return;
    }
    CHECK(OPAL_SUCCESS == fw_sendi(0, 1, 24, 16, &d)); /* the full lane: one btl_send came before */
    f0 = ca->sq.fast;
    CHECK(f0 > 2 && f0 < ca->sq.interval);
    before = fake.nsend_posts;
    CHECK(OPAL_SUCCESS == fw_sendi(0, 1, 40, 16, &d) && f0 - 1 == ca->sq.fast);
    CHECK(OPAL_SUCCESS == fw_sendi(0, 1, 16, 16, &d) && f0 - 2 == ca->sq.fast);
    CHECK(before + 2 == fake.nsend_posts); /* one post each */
    CHECK(0 == (fake.sends[fake.nsends - 1].flags & IBV_SEND_SIGNALED));
    /* A message by btl_send (another kind of post) ends the budget. */
    CHECK(0 <= fw_send(0, 1, 100, 0));
    CHECK(0 == ca->sq.fast);
    CHECK(OPAL_SUCCESS == fw_sendi(0, 1, 24, 16, &d) && ca->sq.fast > 0);
    /* The room gone: the next message queues, and its queueing ends the
     * budget; with the room back, sendi goes behind it. */
    room = fw[0].m->path[path].scq_room;
    fw[0].m->path[path].scq_room = 0;
    CHECK(0 <= fw_send(0, 1, 100, 0));
    CHECK(!opal_list_is_empty(&fw[0].ep[1]->pending[path]));
    CHECK(0 == ca->sq.fast);
    fw[0].m->path[path].scq_room = room;
    before = fake.nsend_posts;
    rc = fw_sendi(0, 1, 24, 16, &d);
    if (OPAL_ERR_RESOURCE_BUSY == rc && NULL != d) {
        send_descriptor(0, 1, d, 24);
    } else {
        CHECK(OPAL_SUCCESS == rc); /* packed behind the queued one */
    }
    CHECK(before == fake.nsend_posts); /* nothing posted past it */
    fw_settle(100);
    CHECK(8 == fw_sent(0, 1)); /* the first, five by sendi, two by btl_send, in order */
    fw_end(0);
}

/* sendi's fast lane (llrdma_sq_fast_budget): a send of the full lane
 * leaves the connection a budget; the sends after it spend it one each (the
 * lane ran: it is the only thing that lowers it by one); a post of any
 * other kind ends it; and a message that queues while budget is left (the
 * path's shared CQ room gone, which closes the lane but not the budget) is
 * not overtaken once the room is back.  The receiver checks every byte and
 * the order (fake_btl.c).  On the LL path (hint 8K) and, at hint 0 (no LL
 * path), on BW, which the lane picks without the full rule. */
static void test_sendi_fast_lane(void)
{
    sendi_fast_lane_case(8192, LL);
    sendi_fast_lane_case(0, BW);
}

/* ------------------------------------------------------ receive reposts */

/* Receive buffers go back in one chain of their own preset work requests:
 * every one posted, with its own buffer and wr_id; a chain the SRQ refuses
 * midway says how many went in (those before the refused one), the rest can
 * be posted again, and messages still arrive whole afterwards. */
static void test_repost_chain(void)
{
    mca_btl_llrdma_module_t *m;
    mca_btl_llrdma_frag_t *f[6];
    uint32_t before;
    int posted = -1;

    CHECK(0 == fw_pair(8192, 0, 0));
    m = fw[1].m;
    for (int i = 0; i < 6; ++i) {
        f[i] = mca_btl_llrdma_pool_get(&m->path[LL].recv_pool);
        CHECK(NULL != f[i]);
    }
    before = fake_srq_posted(m->path[LL].srq);
    CHECK(0 == mca_btl_llrdma_path_repost(m, LL, f, 4, &posted));
    CHECK(4 == posted);
    CHECK(before + 4 == fake_srq_posted(m->path[LL].srq));
    for (int i = 0; i < 4; ++i) {
        const uint64_t id = fake.recvs[(fake.nrecvs - 4 + i) % FAKE_MAX_WR];
        CHECK(((uintptr_t)f[i] | 1u) == id);
        CHECK((uintptr_t)f[i]->hdr == f[i]->rsge.addr);
        CHECK(m->path[LL].recv_pool.buf_bytes == f[i]->rsge.length);
        CHECK(f[i]->lkey == f[i]->rsge.lkey);
    }
    /* Refused at the second of two: one went in. */
    fake.srq_fail_wr = 2;
    posted = -1;
    CHECK(0 != mca_btl_llrdma_path_repost(m, LL, f + 4, 2, &posted));
    CHECK(1 == posted);
    CHECK(before + 5 == fake_srq_posted(m->path[LL].srq));
    CHECK(((uintptr_t)f[4] | 1u) == fake.recvs[(fake.nrecvs - 1) % FAKE_MAX_WR]);
    CHECK(0 == mca_btl_llrdma_path_repost(m, LL, f + 5, 1, &posted));
    CHECK(1 == posted && before + 6 == fake_srq_posted(m->path[LL].srq));
    /* Refused at the first: none went in. */
    f[0] = mca_btl_llrdma_pool_get(&m->path[LL].recv_pool);
    fake.srq_fail_wr = 1;
    CHECK(0 != mca_btl_llrdma_path_repost(m, LL, f, 1, &posted));
    CHECK(0 == posted && before + 6 == fake_srq_posted(m->path[LL].srq));
    mca_btl_llrdma_pool_put(f[0]);
    for (int i = 0; i < 40; ++i) {
        int rc = fw_send(0, 1, i % 2 ? 100 : 3000, 0);
        CHECK(OPAL_SUCCESS == rc || 1 == rc);
    }
    fw_settle(1000);
    CHECK(fw[1].recv_seq[0][0] == fw[0].send_seq[1][0]);
    CHECK(0 == fw[1].recv_bad);
    fw_end(0);
}

/* Two senders' messages in one receive batch: each connection is credited
 * with exactly the buffers its peer used (runs by queue pair). */
static void test_batch_of_two_senders(void)
{
    mca_btl_llrdma_conn_t *from0, *from2;
    uint64_t c0, c2;

    fw_begin();
    mca_btl_llrdma_component.coalesce = 0;
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0) && 2 == fw_add(8192, 0, 0));
    fw_mesh();
    (void)fw_send(0, 1, 16, 0);
    (void)fw_send(2, 1, 16, 0);
    fw_settle(100);
    from0 = fw_conn(1, 0, LL);
    from2 = fw_conn(1, 2, LL);
    CHECK(NULL != from0 && NULL != from2);
    if (NULL == from0 || NULL == from2) {
        fw_end(1);
        return;
    }
    c0 = from0->credit.consumed;
    c2 = from2->credit.consumed;
    /* 3 from 0, 4 from 2, 2 from 0: three runs, one batch (16 at most). */
    for (int i = 0; i < 9; ++i) {
        int from = i < 3 || i >= 7 ? 0 : 2;
        CHECK(OPAL_SUCCESS <= fw_send(from, 1, 100, 0));
        fw_progress_one(from, 1);
    }
    fw_progress_one(1, 1);
    CHECK(9 == fw_sent(0, 1) + fw_sent(2, 1) - 2);
    CHECK(c0 + 5 == from0->credit.consumed);
    CHECK(c2 + 4 == from2->credit.consumed);
    fw_settle(1000);
    fw_check_all_arrived();
    fw_end(0);
}

int main(int argc, char **argv)
{
    int saved_stderr;

    if (0 != fw_init(&argc, &argv)) {
        return 2;
    }
    test_full_send_queue();
    test_receiver_never_runs_dry();
    test_repost_chain();
    test_batch_of_two_senders();
    test_credits_in_headers();
    test_credits_by_rdma_write();
    test_stall_reported();
    test_credits_landing_mid_send();
    test_allotment_shrinks();
    test_overcommitted_windows();
    test_simultaneous_connects();
    test_sendi();
    test_sendi_packed();
    test_sendi_post_api();
    test_sendi_fast_lane();
    test_sendi_sizes();
    /* The expected transport errors print a user-facing message each. */
    saved_stderr = fw_stderr_off();
    test_cq_room();
    test_stuck_dump();
    test_watchdog_waits_for_busy_receiver();
    test_overcommit_failures();
    fw_stderr_on(saved_stderr);
    return fw_finish();
}
