/*
 * btl/llrdma RDMA against the fake device (tests/unit/fake_btl.c): memory
 * registration through Open MPI's grdma cache, btl_put / btl_get / btl_flush
 * on the BW queue pair, and the read depths negotiated over rdma_cm.
 *
 * The fake checks every key, range and access right of the work requests
 * (fake_verbs.h), so a wrong rkey, an MR without remote read or a read on a
 * QP without read depth shows up as a device fault.  Data moved by put/get
 * is compared byte for byte.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* memfd_create */
#endif
#include "fake_btl.h"

#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btl_llrdma_gpu.h"
#include "btl_llrdma_rdma.h"

#define BW LLRDMA_PATH_BW
#define V mca_btl_llrdma_verbs
#define RD MCA_BTL_REG_FLAG_REMOTE_READ
#define WR (MCA_BTL_REG_FLAG_LOCAL_WRITE | MCA_BTL_REG_FLAG_REMOTE_WRITE)
#define LW MCA_BTL_REG_FLAG_LOCAL_WRITE

/* What ob1 would see of its RDMA callbacks. */
static int rdma_calls, rdma_errors, rdma_order_bad;
static uintptr_t rdma_last_ctx;

static void on_rdma(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                    void *local, mca_btl_base_registration_handle_t *lh, void *ctx, void *data,
                    int status)
{
    (void)btl;
    (void)ep;
    (void)local;
    (void)lh;
    (void)data;
    ++rdma_calls;
    if (OPAL_SUCCESS != status) {
        ++rdma_errors;
    }
    /* Ops complete in the order they were posted on the one QP. */
    if ((uintptr_t)ctx < rdma_last_ctx) {
        ++rdma_order_bad;
    }
    rdma_last_ctx = (uintptr_t)ctx;
}

static void rdma_reset(void)
{
    rdma_calls = rdma_errors = rdma_order_bad = 0;
    rdma_last_ctx = 0;
}

static mca_btl_base_module_t *B(int i)
{
    return &fw[i].m->super;
}

static mca_btl_base_registration_handle_t *reg(int i, void *p, size_t n, uint32_t flags)
{
    fw_as(i);
    return B(i)->btl_register_mem(B(i), fw[i].ep[1 - i], p, n, flags);
}

static void dereg(int i, mca_btl_base_registration_handle_t *h)
{
    fw_as(i);
    CHECK(OPAL_SUCCESS == B(i)->btl_deregister_mem(B(i), h));
}

static int get(int i, void *local, mca_btl_base_registration_handle_t *lh, void *remote,
               mca_btl_base_registration_handle_t *rh, size_t n, uintptr_t ctx)
{
    fw_as(i);
    return B(i)->btl_get(B(i), fw[i].ep[1 - i], local, (uint64_t)(uintptr_t)remote, lh, rh, n, 0,
                         MCA_BTL_NO_ORDER, on_rdma, (void *)ctx, NULL);
}

static int put(int i, void *local, mca_btl_base_registration_handle_t *lh, void *remote,
               mca_btl_base_registration_handle_t *rh, size_t n, uintptr_t ctx)
{
    fw_as(i);
    return B(i)->btl_put(B(i), fw[i].ep[1 - i], local, (uint64_t)(uintptr_t)remote, lh, rh, n, 0,
                         MCA_BTL_NO_ORDER, on_rdma, (void *)ctx, NULL);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t k = 0; k < n; ++k) {
        p[k] = (unsigned char)(k * 131u + seed);
    }
}

static int same(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t k = 0; k < n; ++k) {
        if (p[k] != (unsigned char)(k * 131u + seed)) {
            printf("#   byte %zu differs\n", k);
            return 0;
        }
    }
    return 1;
}

/* Processes 0 and 1, endpoints known, no connection yet. */
static int two(uint64_t hint, uint32_t bw_sq)
{
    fw_begin();
    if (0 != fw_add(hint, 0, bw_sq) || 1 != fw_add(hint, 0, bw_sq)) {
        return -1;
    }
    fw_mesh();
    rdma_reset();
    return 0;
}

/* ------------------------------------------------------------ module */

static void test_module_offers_rdma(void)
{
    mca_btl_base_module_t *b;
    llrdma_device_info_t dev;
    char why[512];

    CHECK(0 == two(8192, 0));
    b = B(0);
    CHECK((b->btl_flags & MCA_BTL_FLAGS_PUT) && (b->btl_flags & MCA_BTL_FLAGS_GET));
    CHECK(b->btl_flags & MCA_BTL_FLAGS_SEND);
    CHECK(NULL != b->btl_register_mem && NULL != b->btl_put && NULL != b->btl_get &&
          NULL != b->btl_flush);
    CHECK(sizeof(mca_btl_base_registration_handle_t) == b->btl_registration_handle_size);
    /* Limits come from the profile (1 MiB pieces), not from the hint. */
    CHECK(fw[0].prof.bw.rdma_frag_bytes == b->btl_get_limit &&
          b->btl_get_limit == b->btl_put_limit);
    CHECK((1u << 20) == b->btl_get_limit && 0 == b->btl_get_alignment);
    CHECK(b->btl_rdma_pipeline_frag_size == b->btl_get_limit);
    CHECK(b->btl_min_rdma_pipeline_size == fw[0].prof.bw.rdma_pipeline_bytes);
    CHECK(16 == fw[0].m->rd_atomic_req && 16 == fw[0].m->dest_rd_atomic_req);
    CHECK(0 == mca_btl_llrdma_module_granted(fw[0].m, &dev, why, sizeof(why)));
    CHECK(16 == dev.rd_atomic_granted && 16 == dev.dest_rd_atomic_granted);
    CHECK((1u << 20) == dev.rdma_limit_granted);
    fw_end(0);

    /* A device with fewer reads and a smaller max_msg_sz: granted less, said so. */
    fw_begin();
    fake.max_rd_atom = 4;
    fake.max_msg_sz = 65536;
    CHECK(0 == fw_add(0, 0, 0));
    CHECK(4 == fw[0].m->rd_atomic_req && 65536 == B(0)->btl_get_limit);
    CHECK(2 == mca_btl_llrdma_module_granted(fw[0].m, &dev, why, sizeof(why)));
    CHECK(4 == dev.rd_atomic_granted && 65536 == dev.rdma_limit_granted);
    CHECK(NULL != strstr(why, "RDMA reads outstanding 4 of 16") &&
          NULL != strstr(why, "RDMA fragment 65536 of 1048576"));
    fw_end(0);

    /* No reads at all: put only; rdma=put and rdma=off as asked. */
    fw_begin();
    fake.max_rd_atom = 0;
    CHECK(0 == fw_add(0, 0, 0));
    CHECK((B(0)->btl_flags & MCA_BTL_FLAGS_PUT) && !(B(0)->btl_flags & MCA_BTL_FLAGS_GET));
    CHECK(NULL == B(0)->btl_get);
    fw_end(0);
    fw_begin();
    mca_btl_llrdma_component.rdma = "put";
    CHECK(0 == fw_add(0, 0, 0));
    CHECK((B(0)->btl_flags & MCA_BTL_FLAGS_PUT) && !(B(0)->btl_flags & MCA_BTL_FLAGS_GET));
    fw_end(0);
    fw_begin();
    mca_btl_llrdma_component.rdma = "off";
    CHECK(0 == fw_add(0, 0, 0));
    CHECK(!(B(0)->btl_flags & (MCA_BTL_FLAGS_PUT | MCA_BTL_FLAGS_GET)));
    CHECK(NULL == B(0)->btl_register_mem && NULL == fw[0].m->rcache);
    CHECK(0 == mca_btl_llrdma_module_granted(fw[0].m, &dev, why, sizeof(why)));
    CHECK(0 == dev.rdma_limit_granted && 0 == dev.rd_atomic_granted);
    fw_end(0);
}

/* ------------------------------------------------------ registration */

static void test_registration_cache(void)
{
    size_t n = 3 * 4096;
    unsigned char *a = aligned_alloc(4096, n), *b = aligned_alloc(4096, n);
    mca_btl_base_registration_handle_t *h1, *h2, *h3, *h4;
    int mrs;

    CHECK(0 == two(8192, 0));
    mrs = fake.live_mr;
    h1 = reg(0, a, n, RD);
    CHECK(NULL != h1 && mrs + 1 == fake.live_mr);
    /* The same range and a range inside it: a hit, no new MR. */
    h2 = reg(0, a, n, RD);
    h3 = reg(0, a + 100, 200, RD);
    CHECK(h2 == h1 && h3 == h1 && mrs + 1 == fake.live_mr);
    CHECK(h1->rkey != h1->lkey);
    dereg(0, h3);
    dereg(0, h2);
    dereg(0, h1);
    /* Released but cached (leave pinned): the next use is a hit again. */
    CHECK(mrs + 1 == fake.live_mr);
    h1 = reg(0, a, n, RD);
    CHECK(mrs + 1 == fake.live_mr);
    /* More access than the cached MR has: a new one with both. */
    h4 = reg(0, a, n, WR);
    CHECK(NULL != h4 && h4 != h1 && mrs + 2 == fake.live_mr);
    /* Another buffer: a miss. */
    h2 = reg(0, b, n, RD);
    CHECK(NULL != h2 && h2 != h1 && mrs + 3 == fake.live_mr);
    dereg(0, h1);
    dereg(0, h4);
    dereg(0, h2);
    /* Freed memory: the cache drops what covers it (the memory hooks do
     * this in a job), so the next registration of the range is a miss. */
    CHECK(OPAL_SUCCESS == fw[0].m->rcache->rcache_invalidate_range(fw[0].m->rcache, b, n));
    h2 = reg(0, b, n, RD);
    CHECK(NULL != h2);
    dereg(0, h2);
    /* The device refuses a registration: grdma evicts an unused one and
     * tries again (which works here). */
    fake.fail_at = fake.calls + 1;
    h2 = reg(0, b + 4096, 4096, WR);
    CHECK(NULL != h2 && fake.failed);
    if (NULL != h2) {
        dereg(0, h2);
    }
    fake.fail_at = 0;
    fw_end(0); /* finalize deregisters what the cache holds */
    free(a);
    free(b);
}

/* ---------------------------------------------------------- put / get */

/* Connect the BW path with one eager fragment. */
static void connect_bw(void)
{
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 30000, 1));
    fw_settle(100);
    CHECK(NULL != fw_conn(0, 1, BW) && LLRDMA_CONN_ESTABLISHED == fw_conn(0, 1, BW)->state);
}

static void test_get_and_put_move_data(void)
{
    size_t n = 200000;
    unsigned char *src = malloc(n), *dst = malloc(n);
    mca_btl_base_registration_handle_t *hs, *hd;

    CHECK(0 == two(8192, 0));
    connect_bw();
    /* rdma_cm gave both QPs the read depth asked for (read back). */
    CHECK(16 == fw_conn(0, 1, BW)->rd_atomic && 16 == fw_conn(1, 0, BW)->dest_rd_atomic);
    CHECK(16 == fake_qp(fw_conn(0, 1, BW)->qp)->max_rd_atomic);
    fill(src, n, 7);
    memset(dst, 0, n);
    hs = reg(1, src, n, RD);
    hd = reg(0, dst, n, LW);
    CHECK(NULL != hs && NULL != hd);
    CHECK(OPAL_SUCCESS == get(0, dst, hd, src, hs, n, 1));
    fw_settle(50);
    CHECK(1 == rdma_calls && 0 == rdma_errors && 1 == fake.nreads);
    CHECK(same(dst, n, 7));
    CHECK(0 == fw[1].m->rdma_outstanding && 0 == fw[0].m->rdma_outstanding);
    dereg(1, hs);
    dereg(0, hd);

    /* Put from 1 into 0's buffer (it needs remote write there). */
    fill(src, n, 9);
    memset(dst, 0, n);
    hs = reg(1, src, n, 0);
    hd = reg(0, dst, n, WR);
    CHECK(OPAL_SUCCESS == put(1, src + 10, hs, dst + 10, hd, n - 20, 2));
    fw_settle(50);
    CHECK(2 == rdma_calls && 0 == rdma_errors);
    CHECK(0 == dst[9] && 0 == dst[n - 10] && same(dst + 10, n - 20, 9 + 10 * 131));
    dereg(1, hs);
    dereg(0, hd);
    fw_end(0);
    free(src);
    free(dst);
}

/* A get before the BW connection exists: it waits, connects the path and runs. */
static void test_get_connects(void)
{
    size_t n = 5000;
    unsigned char *src = malloc(n), *dst = malloc(n);
    mca_btl_base_registration_handle_t *hs, *hd;

    CHECK(0 == two(8192, 0));
    fill(src, n, 3);
    hs = reg(1, src, n, RD);
    hd = reg(0, dst, n, LW);
    CHECK(NULL == fw_conn(0, 1, BW));
    CHECK(OPAL_SUCCESS == get(0, dst, hd, src, hs, n, 1));
    CHECK(NULL != fw_conn(0, 1, BW) && 1 == opal_list_get_size(&fw[0].ep[1]->rdma_pending));
    fw_settle(100);
    CHECK(1 == rdma_calls && 0 == rdma_errors && same(dst, n, 3));
    dereg(1, hs);
    dereg(0, hd);
    fw_end(0);
    free(src);
    free(dst);
}

/* 64 gets in flight on a BW queue of 8: they wait in order, every one is
 * called back once, the device never sees more than 8 WRs, selective
 * signalling retires the unsignalled ones. */
static void test_many_in_flight(void)
{
    enum { N = 64, PIECE = 3001 };
    unsigned char *src = malloc(N * PIECE), *dst = malloc(N * PIECE);
    mca_btl_base_registration_handle_t *hs, *hd;
    int signalled = 0, reads = 0;

    CHECK(0 == two(8192, 8));
    fill(src, N * PIECE, 11);
    memset(dst, 0, N * PIECE);
    hs = reg(1, src, N * PIECE, RD);
    hd = reg(0, dst, N * PIECE, LW);
    /* Started before the BW connection exists: they wait, and go as a
     * burst (selective signalling) once it is up. */
    for (int k = 0; k < N; ++k) {
        CHECK(OPAL_SUCCESS ==
              get(0, dst + k * PIECE, hd, src + k * PIECE, hs, PIECE, (uintptr_t)k + 1));
    }
    CHECK(N == (int)opal_list_get_size(&fw[0].ep[1]->rdma_pending));
    fake.wire_hold = 1; /* nothing executes until looked at */
    for (int r = 0; r < 20 && (NULL == fw_conn(0, 1, BW) ||
                               LLRDMA_CONN_ESTABLISHED != fw_conn(0, 1, BW)->state);
         ++r) {
        fw_progress(1);
    }
    CHECK(8 == fake_qp_outstanding(fw_conn(0, 1, BW)->qp));
    CHECK(N - 8 == (int)opal_list_get_size(&fw[0].ep[1]->rdma_pending));
    fake.wire_hold = 0;
    fw_settle(400);
    CHECK(N == rdma_calls && 0 == rdma_errors && 0 == rdma_order_bad);
    CHECK(same(dst, N * PIECE, 11));
    for (int k = 0; k < fake.nsends && k < FAKE_MAX_WR; ++k) {
        if (IBV_WR_RDMA_READ == fake.sends[k].opcode) {
            ++reads;
            signalled += 0 != (fake.sends[k].flags & IBV_SEND_SIGNALED);
        }
    }
    CHECK(N == reads && signalled < N && signalled > 0);
    if (signalled >= N) {
        printf("#   %d of %d reads signalled\n", signalled, reads);
    }
    /* flush with nothing outstanding returns at once; with some, after them. */
    CHECK(OPAL_SUCCESS == B(0)->btl_flush(B(0), fw[0].ep[1]));
    for (int k = 0; k < 3; ++k) {
        CHECK(OPAL_SUCCESS == get(0, dst, hd, src, hs, 100, 1000 + (uintptr_t)k));
    }
    fw_as(0);
    CHECK(OPAL_SUCCESS == B(0)->btl_flush(B(0), NULL));
    CHECK(N + 3 == rdma_calls && 0 == fw[0].m->rdma_outstanding);
    dereg(1, hs);
    dereg(0, hd);
    fw_end(0);
    free(src);
    free(dst);
}

static void test_limits(void)
{
    size_t lim;
    unsigned char *src, *dst;
    mca_btl_base_registration_handle_t *hs, *hd;

    fw_begin();
    fake.max_msg_sz = 65536;
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0));
    fw_mesh();
    rdma_reset();
    lim = B(0)->btl_get_limit;
    CHECK(65536 == lim);
    src = malloc(lim + 1);
    dst = malloc(lim + 1);
    fill(src, lim + 1, 5);
    hs = reg(1, src, lim + 1, RD);
    hd = reg(0, dst, lim + 1, LW);
    /* Above the limit: refused before anything is posted. */
    CHECK(OPAL_ERR_BAD_PARAM == get(0, dst, hd, src, hs, lim + 1, 1));
    CHECK(OPAL_ERR_BAD_PARAM == put(1, src, hs, dst, hd, lim + 1, 1));
    /* At and below it: done, with the device's max_msg_sz respected. */
    CHECK(OPAL_SUCCESS == get(0, dst, hd, src, hs, lim, 1));
    CHECK(OPAL_SUCCESS == get(0, dst, hd, src, hs, lim - 1, 2));
    CHECK(OPAL_SUCCESS == get(0, dst, hd, src, hs, 0, 3));
    fw_settle(100);
    CHECK(3 == rdma_calls && 0 == rdma_errors && same(dst, lim, 5));
    dereg(1, hs);
    dereg(0, hd);
    fw_end(0);
    free(src);
    free(dst);
}

/* A peer that accepts with less read depth than the initiator asked: the
 * accepted values bound both QPs (the fake faults an accept above the
 * request). */
static void test_read_depth_negotiated(void)
{
    CHECK(0 == two(8192, 0));
    fw[0].m->rd_atomic_req = 3;      /* 0 initiates 3 reads... */
    fw[0].m->dest_rd_atomic_req = 2; /* ...and answers 2 */
    connect_bw();
    CHECK(3 == fw_conn(0, 1, BW)->rd_atomic && 2 == fw_conn(0, 1, BW)->dest_rd_atomic);
    CHECK(2 == fw_conn(1, 0, BW)->rd_atomic && 3 == fw_conn(1, 0, BW)->dest_rd_atomic);
    CHECK(2 == fw[1].m->rd_atomic_granted && 3 == fw[0].m->rd_atomic_granted);
    fw_end(0);

    /* A connection without reads: btl_get says "not available" (ob1 puts). */
    CHECK(0 == two(8192, 0));
    fw[0].m->rd_atomic_req = 0;
    connect_bw();
    CHECK(0 == fw_conn(0, 1, BW)->rd_atomic);
    {
        mca_btl_base_registration_handle_t h = {0, 0};
        CHECK(OPAL_ERR_NOT_AVAILABLE == get(0, &h, &h, &h, &h, 8, 1));
    }
    fw_end(0);
}

/* Keys and rights the device checks: a get from memory the peer did not
 * open for reading fails at the device, reaches ob1's callback and error
 * callback, and later operations are refused. */
static void test_access_error_reaches_ob1(void)
{
    size_t n = 4096;
    unsigned char *src = malloc(n), *dst = malloc(n);
    mca_btl_base_registration_handle_t *hs, *hd;

    CHECK(0 == two(8192, 0));
    connect_bw();
    hs = reg(1, src, n, LW); /* no remote read */
    hd = reg(0, dst, n, LW);
    CHECK(OPAL_SUCCESS == get(0, dst, hd, src, hs, n, 1));
    fw_settle(50);
    CHECK(1 == fake.access_errors && 1 == rdma_calls && 1 == rdma_errors);
    CHECK(1 == fw[0].err_calls && NULL != strstr(fw[0].err_text, "send failed"));
    CHECK(OPAL_ERR_UNREACH == get(0, dst, hd, src, hs, n, 2));
    dereg(1, hs);
    dereg(0, hd);
    fw_end(1);
    CHECK(1 == fake_faults());
    free(src);
    free(dst);
}

/* Progress process i until ob1 has been told of an error, at most `ms`. */
static int progress_until_error(int i, int ms)
{
    uint64_t end = mca_btl_llrdma_now_ms() + (uint64_t)ms;
    while (0 == fw[i].err_calls && mca_btl_llrdma_now_ms() < end) {
        fw_progress_one(i, 64);
    }
    return fw[i].err_calls;
}

/* The completion watchdog's limit: 4x the QP's retry budget, at least 60 s,
 * or the knob's value; -1 turns it off. */
static void test_watchdog_limit(void)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;

    c->completion_timeout_ms = 0;
    CHECK(60000 == mca_btl_llrdma_wd_limit_ms(18, 7)); /* 4 x 8.6 s < 60 s */
    /* 4.096 us x 2^20 = 4.29 s, x 8 tries x 4 */
    CHECK(137438 == mca_btl_llrdma_wd_limit_ms(20, 7));
    CHECK(68719 == mca_btl_llrdma_wd_limit_ms(20, 3));
    CHECK(mca_btl_llrdma_wd_limit_ms(31, 7) > mca_btl_llrdma_wd_limit_ms(30, 7));
    /* The nudge: after the retry budget (8.6 s at 18 and 7), at most half
     * the limit. */
    CHECK(8589 == mca_btl_llrdma_wd_nudge_ms(18, 7, 60000));
    CHECK(150 == mca_btl_llrdma_wd_nudge_ms(18, 7, 300));
    c->completion_timeout_ms = 1234;
    CHECK(1234 == mca_btl_llrdma_wd_limit_ms(18, 7));
    c->completion_timeout_ms = -1;
    CHECK(0 == mca_btl_llrdma_wd_limit_ms(18, 7));
    c->completion_timeout_ms = 0;
}

/* The last WR posted on `qp`, from the fake's log (NULL: none since `since`). */
static const fake_wr_t *last_wr_on(struct ibv_qp *qp, int since)
{
    for (int k = fake.nsends - 1; k >= since && k > fake.nsends - FAKE_MAX_WR; --k) {
        if (fake.sends[k % FAKE_MAX_WR].qp == qp) {
            return &fake.sends[k % FAKE_MAX_WR];
        }
    }
    return NULL;
}

/* A QP that stops completing (a device or driver that stopped: the fake's
 * wire held) is first nudged with one more WR (the credit write), then, if
 * still nothing completes, fails its peer after btl_llrdma_completion_timeout,
 * naming the peer and the path, and its work comes back with an error:
 * nothing hangs and nothing is lost silently.  With -1 it waits for ever,
 * as asked; a nudge that gets it moving again ends the episode. */
static void test_watchdog_fails_stopped_qp(void)
{
    size_t n = 65536;
    unsigned char *src = malloc(n), *dst = malloc(n);
    mca_btl_base_registration_handle_t *hs, *hd;
    mca_btl_llrdma_conn_t *c;
    const fake_wr_t *w;
    int posted;

    /* Off: nothing is said however long it waits. */
    CHECK(0 == two(8192, 0));
    mca_btl_llrdma_component.completion_timeout_ms = -1;
    connect_bw();
    c = fw_conn(1, 0, BW);
    CHECK(0 == c->wd_limit_ms);
    hs = reg(1, src, n, 0);
    hd = reg(0, dst, n, WR);
    fake.wire_hold = 1;
    CHECK(OPAL_SUCCESS == put(1, src, hs, dst, hd, n, 1));
    CHECK(0 == progress_until_error(1, 1500));
    CHECK(0 == rdma_calls && 0 == fake.nerr_qp);
    fake.wire_hold = 0;
    fw_settle(50);
    CHECK(1 == rdma_calls && 0 == rdma_errors);
    dereg(1, hs);
    dereg(0, hd);
    fw_end(0);

    /* 300 ms: the put waits, the peer is failed, the put comes back failed. */
    CHECK(0 == two(8192, 0));
    mca_btl_llrdma_component.completion_timeout_ms = 300;
    connect_bw();
    c = fw_conn(1, 0, BW);
    CHECK(300 == c->wd_limit_ms && 18 == c->qp_timeout && 7 == c->qp_retry);
    hs = reg(1, src, n, 0);
    hd = reg(0, dst, n, WR);
    /* Completions that keep coming keep it quiet, however long it runs. */
    for (int k = 0; k < 8; ++k) {
        CHECK(OPAL_SUCCESS == put(1, src, hs, dst, hd, n, (uintptr_t)(10 + k)));
        fw_settle(50);
        usleep(60000);
    }
    CHECK(8 == rdma_calls && 0 == rdma_errors && 0 == fw[1].err_calls);
    fake.wire_hold = 1;
    posted = fake.nsends;
    CHECK(OPAL_SUCCESS == put(1, src, hs, dst, hd, n, 20));
    CHECK(OPAL_SUCCESS == put(1, src, hs, dst, hd, n, 21));
    CHECK(1 == progress_until_error(1, 5000));
    /* The nudge went first: the credit write, to the peer's credit word. */
    CHECK(3 == fake.nsends - posted && 1 == fw[1].m->wd_nudges);
    w = last_wr_on(c->qp, posted);
    CHECK(NULL != w && IBV_WR_RDMA_WRITE == w->opcode && c->peer_credit_rkey == w->rkey &&
          c->peer_credit_addr == w->remote_addr);
    CHECK(fw[1].err_proc == fw[0].proc);
    CHECK(NULL != strstr(fw[1].err_text, "rank 0"));
    CHECK(NULL != strstr(fw[1].err_text, "stopped completing"));
    CHECK(NULL != strstr(fw[1].err_text, "while 2 waited on the bw path"));
    CHECK(NULL != strstr(fw[1].err_text, "btl_llrdma_completion_timeout"));
    CHECK(1 == fake.nerr_qp && LLRDMA_EP_FAILED == fw[1].ep[0]->state);
    /* The flush hands both puts back, failed, while the wire is still held. */
    fw_progress_one(1, 4);
    CHECK(10 == rdma_calls && 2 == rdma_errors && 0 == rdma_order_bad);
    CHECK(0 == fw[1].m->rdma_outstanding);
    CHECK(OPAL_ERR_UNREACH == put(1, src, hs, dst, hd, n, 22));
    CHECK(1 == fw[1].err_calls); /* said once */
    fake.wire_hold = 0;
    dereg(1, hs);
    dereg(0, hd);
    fw_end(0);

    /* A nudge after which the QP moves on: no error, the data arrives. */
    CHECK(0 == two(8192, 0));
    mca_btl_llrdma_component.completion_timeout_ms = 2000; /* nudge at 1 s */
    connect_bw();
    c = fw_conn(1, 0, BW);
    fill(src, n, 3);
    memset(dst, 0, n);
    hs = reg(1, src, n, 0);
    hd = reg(0, dst, n, WR);
    fake.wire_hold = 1;
    CHECK(OPAL_SUCCESS == put(1, src, hs, dst, hd, n, 30));
    for (uint64_t end = mca_btl_llrdma_now_ms() + 3000;
         0 == fw[1].m->wd_nudges && mca_btl_llrdma_now_ms() < end;) {
        fw_progress_one(1, 64);
    }
    CHECK(1 == fw[1].m->wd_nudges && 1 == c->wd_nudged);
    fake.wire_hold = 0;
    fw_settle(50);
    CHECK(1 == rdma_calls && 0 == rdma_errors && same(dst, n, 3));
    CHECK(0 == progress_until_error(1, 1200)); /* past the limit now: quiet */
    CHECK(0 == c->wd_nudged && 0 == fake.nerr_qp);
    dereg(1, hs);
    dereg(0, hd);
    fw_end(0);
    free(src);
    free(dst);
}

/* ------------------------------------------------------------ GPU memory */

static void test_gpu_modes(void)
{
    static const struct {
        const char *knob;
        int dmabuf, peermem, mode, error;
        const char *report;
    } t[] = {
        {"auto", 0, 0, LLRDMA_GPU_NONE, 0,
         "none (the device has no dma-buf MRs; neither nvidia_peermem nor nv_peer_mem is loaded)"},
        {"auto", 1, 1, LLRDMA_GPU_DMABUF, 0, "dmabuf"},
        {"auto", 2, 1, LLRDMA_GPU_PEERMEM, 0, "peermem"},
        {"dmabuf", 1, 0, LLRDMA_GPU_DMABUF, 0, "dmabuf"},
        {"dmabuf", 0, 1, LLRDMA_GPU_NONE, 1, "the device has no dma-buf MRs"},
        {"peermem", 1, 0, LLRDMA_GPU_NONE, 1, "neither nvidia_peermem nor nv_peer_mem is loaded"},
        {"peermem", 0, 1, LLRDMA_GPU_PEERMEM, 0, "peermem"},
        {"off", 1, 1, LLRDMA_GPU_NONE, 0, "none (btl_llrdma_gpu_rdma=off)"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); ++i) {
        llrdma_device_info_t dev;
        char why[512];
        fw_begin();
        mca_btl_llrdma_component.gpu_rdma = (char *)t[i].knob;
        fake.dmabuf = t[i].dmabuf;
        fake.peermem = t[i].peermem;
        CHECK(0 == fw_add(8192, 0, 0));
        CHECK(t[i].mode == (int)fw[0].m->gpu_mode && t[i].error == fw[0].m->gpu_error);
        CHECK(0 == strcmp(t[i].report, fw[0].m->gpu_report));
        if (0 != strcmp(t[i].report, fw[0].m->gpu_report)) {
            printf("#   %s: '%s'\n", t[i].knob, fw[0].m->gpu_report);
        }
        (void)mca_btl_llrdma_module_granted(fw[0].m, &dev, why, sizeof(why));
        CHECK(0 == strcmp(t[i].report, dev.gpu_rdma));
        fw_end(0);
    }
}

/* A pretend device allocation: the fake CUDA driver says pointers inside it
 * are device memory with buffer id `dev_id` (a new id = freed and allocated
 * again at the same address). */
static unsigned char *dev_mem;
static size_t dev_len;
static uint64_t dev_id;
static int attr_calls, export_calls, export_fail;
static unsigned long long export_ptr;
static size_t export_size;

static int fake_pointer_attrs(unsigned int n, int *attrs, void **data, unsigned long long p)
{
    ++attr_calls;
    if (p < (uintptr_t)dev_mem || p >= (uintptr_t)dev_mem + dev_len) {
        return 1; /* CUDA_ERROR_INVALID_VALUE: not a CUDA pointer */
    }
    for (unsigned int i = 0; i < n; ++i) {
        uint64_t v = 2 == attrs[i] ? 2 /* CU_MEMORYTYPE_DEVICE */ : 7 == attrs[i] ? dev_id : 0;
        memcpy(data[i], &v, 2 == attrs[i] ? 4 : 8);
    }
    return 0;
}

static int fake_range_handle(int *fd, unsigned long long p, size_t size, int type,
                             unsigned long long flags)
{
    ++export_calls;
    export_ptr = p;
    export_size = size;
    if (export_fail || 1 != type || 0 != flags || 0 != p % 4096 || 0 != size % 4096) {
        return 1; /* CUDA_ERROR_INVALID_VALUE, as for an unaligned range */
    }
    /* A file of the exported size stands for the dma-buf: the fake device
     * checks every MR against it, as the kernel does. */
    *fd = memfd_create("fake-dmabuf", 0);
    if (*fd < 0 || 0 != ftruncate(*fd, (off_t)size)) {
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    }
    return 0;
}

static void gpu_world(const char *knob, int dmabuf, int peermem)
{
    fw_begin();
    mca_btl_llrdma_component.gpu_rdma = (char *)knob;
    fake.dmabuf = dmabuf;
    fake.peermem = peermem;
    mca_btl_llrdma_cuda.loaded = 1;
    mca_btl_llrdma_cuda.pointer_attrs = fake_pointer_attrs;
    mca_btl_llrdma_cuda.range_handle = fake_range_handle;
    attr_calls = export_calls = export_fail = 0;
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0));
    fw_mesh();
    rdma_reset();
}

static void test_gpu_registration(void)
{
    mca_btl_base_registration_handle_t *h, *h2, *hh, *hd;
    unsigned char *host = malloc(8192), *dst = malloc(4096);
    int mrs;

    dev_len = 1 << 20;
    dev_mem = aligned_alloc(1 << 16, dev_len);
    dev_id = 41;

    /* dma-buf: the page-aligned range is exported and registered with the
     * device address as iova, at an unaligned offset too. */
    gpu_world("auto", 1, 0);
    h = reg(0, dev_mem + 100, 5000, RD);
    CHECK(NULL != h && 1 == fake.ndmabuf_mrs && 1 == export_calls);
    CHECK(export_ptr == (uintptr_t)dev_mem && 8192 == export_size);
    CHECK(fake.last_iova == (uintptr_t)dev_mem);
    /* Cached: a second registration of the same allocation is a hit. */
    h2 = reg(0, dev_mem + 200, 100, RD);
    CHECK(h2 == h && 1 == fake.ndmabuf_mrs);
    dereg(0, h2);
    /* The peer reads device memory by RDMA (the fake checks keys and range). */
    fill(dev_mem + 100, 5000, 3);
    hd = reg(1, dst, 4096, LW);
    fw_as(1);
    CHECK(OPAL_SUCCESS == B(1)->btl_get(B(1), fw[1].ep[0], dst,
                                        (uint64_t)(uintptr_t)(dev_mem + 100), hd, h, 4096, 0,
                                        MCA_BTL_NO_ORDER, on_rdma, (void *)1, NULL));
    fw_settle(100);
    CHECK(1 == rdma_calls && 0 == rdma_errors && same(dst, 4096, 3));
    dereg(0, h);
    dereg(1, hd);
    /* The GPU-direct inter-node step (coll/llrdma's put transport): device
     * memory to device memory by btl_put, both ends registered with write
     * access by dma-buf; the same ranges again are cache hits. */
    for (int call = 0; call < 2; ++call) {
        mca_btl_base_registration_handle_t *src, *tgt;
        int exports = export_calls;
        fill(dev_mem + 65536, 12000, 9 + (unsigned)call);
        memset(dev_mem + 131072 + 8, 0, 12000);
        src = reg(1, dev_mem + 65536, 12000, WR);
        tgt = reg(0, dev_mem + 131072 + 8, 12000, WR);
        CHECK(NULL != src && NULL != tgt);
        CHECK(0 == call ? export_calls == exports + 2 : export_calls == exports);
        rdma_reset();
        CHECK(OPAL_SUCCESS == put(1, dev_mem + 65536, src, dev_mem + 131072 + 8, tgt, 12000, 1));
        fw_settle(100);
        CHECK(1 == rdma_calls && 0 == rdma_errors &&
              same(dev_mem + 131072 + 8, 12000, 9 + (unsigned)call));
        dereg(1, src);
        dereg(0, tgt);
    }
    /* Freed and allocated again at the same address (new buffer id): the
     * cached registration is stale, a new one is made. */
    mrs = fake.live_mr;
    dev_id = 42;
    {
        const int dm0 = fake.ndmabuf_mrs, ex0 = export_calls;
        h = reg(0, dev_mem + 100, 5000, RD);
        CHECK(NULL != h && dm0 + 1 == fake.ndmabuf_mrs && ex0 + 1 == export_calls);
        dereg(0, h);
        CHECK(fake.live_mr <= mrs + 1);
        /* Host memory next to it: an ordinary MR, no export. */
        hh = reg(0, host, 8192, RD);
        CHECK(NULL != hh && dm0 + 1 == fake.ndmabuf_mrs && ex0 + 1 == export_calls);
    }
    dereg(0, hh);
    /* The driver refuses the export: the registration fails cleanly. */
    export_fail = 1;
    CHECK(NULL == reg(0, dev_mem + 65536, 100, RD));
    fw_end(0);

    /* peermem: ibv_reg_mr on the device address. */
    gpu_world("peermem", 0, 1);
    h = reg(0, dev_mem, 4096, RD);
    CHECK(NULL != h && 0 == fake.ndmabuf_mrs && 0 == export_calls && attr_calls > 0);
    dereg(0, h);
    fw_end(0);

    /* No GPU mode: where memory lives is never asked (no libcuda for host
     * jobs); the registration is the device's business (a real one refuses
     * a device address). */
    gpu_world("auto", 0, 0);
    h = reg(0, host, 4096, RD);
    CHECK(NULL != h && 0 == attr_calls && 0 == export_calls);
    dereg(0, h);
    fw_end(0);
    gpu_world("off", 1, 1);
    h = reg(0, host, 4096, RD);
    CHECK(NULL != h && 0 == attr_calls);
    dereg(0, h);
    fw_end(0);

    free(dev_mem);
    free(host);
    free(dst);
}

/* ------------------------------------------------ failure injection */

/* Fail every seam call of register / get / put / deregister / finalize in
 * turn: each failure reaches a callback or an error return, nothing leaks. */
static void test_every_rdma_failure(void)
{
    size_t n = 70000;
    unsigned char *src = malloc(n), *dst = malloc(n);
    long k, base;
    int ok = 0, failed_calls = 0;

    fill(src, n, 1);
    for (k = 1; k < 2000 && !ok; ++k) {
        mca_btl_base_registration_handle_t *hs, *hd, *hp;
        int started = 0;
        fw_begin();
        mca_btl_llrdma_component.connect_timeout_s = 0;
        CHECK(0 == fw_add(8192, 8, 8) && 1 == fw_add(8192, 8, 8));
        fw_mesh();
        rdma_reset();
        base = fake.calls;
        fake.fail_at = base + k;
        hs = reg(1, src, n, RD);
        hd = reg(0, dst, n, WR);
        hp = reg(1, src, n, 0);
        if (NULL != hs && NULL != hd) {
            for (int j = 0; j < 4; ++j) {
                started += OPAL_SUCCESS == get(0, dst + j * 1000, hd, src + j * 1000, hs, 1000, 1);
            }
        }
        if (NULL != hp && NULL != hd) {
            started += OPAL_SUCCESS == put(1, src, hp, dst + 50000, hd, 4000, 10);
        }
        fw_settle(300);
        /* Every operation started was called back, with an error only if
         * something failed. */
        CHECK(started == rdma_calls);
        if (started != rdma_calls) {
            printf("#   after failing %s (call %ld): %d started, %d called back; out %llu/%llu "
                   "pend %zu/%zu conn %p/%p st %d/%d err %d/%d\n",
                   fake.failed_fn, k, started, rdma_calls,
                   (unsigned long long)fw[0].m->rdma_outstanding,
                   (unsigned long long)fw[1].m->rdma_outstanding,
                   opal_list_get_size(&fw[0].ep[1]->rdma_pending),
                   opal_list_get_size(&fw[1].ep[0]->rdma_pending), (void *)fw_conn(0, 1, BW),
                   (void *)fw_conn(1, 0, BW), fw[0].ep[1]->state, fw[1].ep[0]->state,
                   fw[0].err_calls, fw[1].err_calls);
        }
        if (!fake.failed) {
            ok = 1;
            CHECK(5 == started && 0 == rdma_errors && same(dst, 4000, 1));
        } else {
            ++failed_calls;
        }
        if (NULL != hs) {
            dereg(1, hs);
        }
        if (NULL != hp) {
            dereg(1, hp);
        }
        if (NULL != hd) {
            dereg(0, hd);
        }
        fw_end(0);
    }
    CHECK(ok);
    printf("# rdma: %ld failure points, each cleaned up\n", k - 2);
    free(src);
    free(dst);
}

/* Every seam call of a device-memory registration and its use failing in turn. */
static void test_every_gpu_failure(void)
{
    long k;
    int ok = 0;
    unsigned char *dst = malloc(4096);

    dev_len = 1 << 20;
    dev_mem = aligned_alloc(1 << 16, dev_len);
    dev_id = 5;
    fill(dev_mem, 4096, 8);
    for (k = 1; k < 500 && !ok; ++k) {
        mca_btl_base_registration_handle_t *h, *hd;
        int started = 0;
        gpu_world("dmabuf", 1, 0);
        mca_btl_llrdma_component.connect_timeout_s = 0;
        fake.fail_at = fake.calls + k;
        h = reg(0, dev_mem, 4096, RD);
        hd = reg(1, dst, 4096, LW);
        if (NULL != h && NULL != hd) {
            fw_as(1);
            started = OPAL_SUCCESS == B(1)->btl_get(B(1), fw[1].ep[0], dst,
                                                    (uint64_t)(uintptr_t)dev_mem, hd, h, 4096, 0,
                                                    MCA_BTL_NO_ORDER, on_rdma, (void *)1, NULL);
        }
        fw_settle(200);
        CHECK(started == rdma_calls);
        if (!fake.failed) {
            ok = 1;
            CHECK(1 == started && 0 == rdma_errors && same(dst, 4096, 8));
        }
        if (NULL != h) {
            dereg(0, h);
        }
        if (NULL != hd) {
            dereg(1, hd);
        }
        fw_end(0);
    }
    CHECK(ok);
    printf("# gpu registration: %ld failure points, each cleaned up\n", k - 2);
    free(dev_mem);
    free(dst);
}

int main(int argc, char **argv)
{
    int saved_stderr;

    if (0 != fw_init(&argc, &argv)) {
        return 2;
    }
    test_module_offers_rdma();
    test_registration_cache();
    test_get_and_put_move_data();
    test_get_connects();
    test_many_in_flight();
    test_limits();
    test_read_depth_negotiated();
    test_access_error_reaches_ob1();
    test_watchdog_limit();
    test_watchdog_fails_stopped_qp();
    test_gpu_modes();
    test_gpu_registration();
    /* The expected transport errors print a user-facing message each. */
    saved_stderr = fw_stderr_off();
    test_every_rdma_failure();
    test_every_gpu_failure();
    fw_stderr_on(saved_stderr);
    return fw_finish();
}
