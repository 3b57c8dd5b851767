/*
 * btl/llrdma against a fake device (tests/unit/fake_verbs.c): the BTL's own
 * objects, linked into this program, driven the way ob1 drives them, two or
 * more modules (one per simulated process) wired together through the fake
 * rdma_cm and wire (tests/unit/fake_btl.c).
 *
 * Covers: what the fake device enforces (self-test), profile -> QP
 * attributes and CQ moderation, requested vs granted, lazy connection of each
 * path with the v2 private data, RNR timer and receive buffers posted on
 * demand, post flags (inline, signalling cadence), receive dispatch and
 * malformed fragments, work-completion and post errors reaching ob1's error
 * callback, rejected, retried, passive and dropped connections, with
 * nothing leaked.  Every seam call failing in turn, and an error before ob1
 * registers its callback: test_btl_failures.c.  Flow control is in
 * test_btl_flow.c.  Built with AddressSanitizer (leak checking on).  C, not
 * Boost: Open MPI's headers do not compile as C++.
 */
#include "fake_btl.h"

#include <errno.h>
#include <malloc.h>
#if defined(__SANITIZE_ADDRESS__)
size_t __sanitizer_get_current_allocated_bytes(void); /* the ASan runtime's */
#endif
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define V mca_btl_llrdma_verbs
#define LL LLRDMA_PATH_LL
#define BW LLRDMA_PATH_BW
#define HDR sizeof(mca_btl_llrdma_hdr_t)

/* ------------------------------------------------- the device itself */

static struct ibv_qp *raw_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
                             struct ibv_srq *srq, uint32_t depth, uint32_t inl)
{
    struct ibv_qp_init_attr a;
    memset(&a, 0, sizeof(a));
    a.send_cq = scq;
    a.recv_cq = rcq;
    a.srq = srq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = depth;
    a.cap.max_send_sge = 1;
    a.cap.max_inline_data = inl;
    return V.create_qp(pd, &a);
}

static int raw_send(struct ibv_qp *qp, enum ibv_wr_opcode op, void *buf, uint32_t len,
                    uint32_t lkey, unsigned flags, uint64_t raddr, uint32_t rkey, uint64_t id)
{
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    return V.post_send(qp, &wr, &bad);
}

static int raw_recv(struct ibv_srq *srq, void *buf, uint32_t len, uint32_t lkey, uint64_t id)
{
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
    struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
    return V.post_srq_recv(srq, &wr, &bad);
}

/* The fake must catch what a device catches, or the BTL tests prove nothing. */
static void test_fake_device_enforces(void)
{
    struct ibv_context **devs, *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *scq, *rcq, *xcq;
    struct ibv_srq *srq;
    struct ibv_srq_init_attr sa;
    struct ibv_qp *a, *b, *c, *d;
    struct ibv_mr *mr, *ro, *rw;
    struct ibv_wc wc[8];
    static unsigned char buf[4096], word[64], target[64];
    int n;

    fw_begin();
    devs = V.cm_get_devices(&n);
    ctx = devs[0];
    V.cm_free_devices(devs);
    pd = V.alloc_pd(ctx);
    scq = V.create_cq(ctx, 8, NULL, NULL, 0);
    rcq = V.create_cq(ctx, 4, NULL, NULL, 0);
    xcq = V.create_cq(ctx, 16, NULL, NULL, 0);
    CHECK(NULL == V.create_cq(ctx, 5000, NULL, NULL, 0)); /* above max_cqe */
    memset(&sa, 0, sizeof(sa));
    sa.attr.max_wr = 2;
    sa.attr.max_sge = 1;
    srq = V.create_srq(pd, &sa);
    CHECK(2 == sa.attr.max_wr);
    mr = V.reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
    ro = V.reg_mr(pd, target, sizeof(target), IBV_ACCESS_LOCAL_WRITE);
    rw = V.reg_mr(pd, word, sizeof(word), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    CHECK(mr->lkey != mr->rkey);
    a = raw_qp(pd, scq, xcq, srq, 4, 16);
    b = raw_qp(pd, xcq, rcq, srq, 4, 16);
    CHECK(NULL == raw_qp(pd, scq, rcq, srq, 4, 2048)); /* inline above the device's */
    CHECK(NULL == raw_qp(pd, scq, rcq, srq, 5000, 0)); /* above max_qp_wr */

    /* Posting before the QP is connected fails. */
    CHECK(EINVAL == raw_send(a, IBV_WR_SEND, buf, 8, mr->lkey, 0, 0, 0, 1));
    CHECK(1 == fake.bad_posts);
    fake_connect_pair(a, b);

    /* SRQ capacity. */
    CHECK(0 == raw_recv(srq, buf + 1024, 64, mr->lkey, 11));
    CHECK(0 == raw_recv(srq, buf + 1088, 64, mr->lkey, 12));
    CHECK(ENOMEM == raw_recv(srq, buf + 1152, 64, mr->lkey, 13));
    CHECK(1 == fake.srq_overflows);

    /* Inline limit: the QP was granted 16 bytes. */
    CHECK(EINVAL == raw_send(a, IBV_WR_SEND, buf, 17, mr->lkey, IBV_SEND_INLINE, 0, 0, 1));
    CHECK(1 == fake.inline_overflows);

    /* Send queue capacity: 4 WRs not retired, then ENOMEM. */
    buf[0] = 0xa1;
    CHECK(0 == raw_send(a, IBV_WR_SEND, buf, 8, mr->lkey, IBV_SEND_INLINE, 0, 0, 1));
    buf[0] = 0xa2; /* inline: the first send keeps 0xa1 */
    CHECK(0 == raw_send(a, IBV_WR_SEND, buf, 16, mr->lkey, 0, 0, 0, 2));
    CHECK(0 == raw_send(a, IBV_WR_SEND, buf, 24, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 3));
    CHECK(0 == raw_send(a, IBV_WR_SEND, buf, 32, mr->lkey, 0, 0, 0, 4));
    CHECK(ENOMEM == raw_send(a, IBV_WR_SEND, buf, 8, mr->lkey, 0, 0, 0, 5));
    CHECK(1 == fake.sq_overflows);
    CHECK(4 == fake_qp_outstanding(a));
    /* Nothing ran yet: the wire runs at poll time. */
    CHECK(0 == fake_cq_waiting(rcq));
    CHECK(0 == V.poll_cq(scq, 8, wc));
    /* Two buffers: two SENDs land, the third finds none (RNR, held). */
    CHECK(2 == fake_cq_waiting(rcq));
    CHECK(1 == fake.rnr_events);
    CHECK(2 == V.poll_cq(rcq, 8, wc));
    CHECK(11 == wc[0].wr_id && 8 == wc[0].byte_len && b->qp_num == wc[0].qp_num);
    CHECK(IBV_WC_RECV == wc[0].opcode && a->qp_num == wc[0].src_qp);
    CHECK(12 == wc[1].wr_id && 16 == wc[1].byte_len);
    CHECK(0xa1 == buf[1024] && 0xa2 == buf[1088]);
    CHECK(4 == fake_qp_outstanding(a)); /* no signalled completion polled yet */
    /* A buffer comes back: the held SEND lands (signalled: it retires 1..3). */
    CHECK(0 == raw_recv(srq, buf + 1152, 64, mr->lkey, 13));
    CHECK(1 == V.poll_cq(scq, 8, wc));
    CHECK(3 == wc[0].wr_id && IBV_WC_SUCCESS == wc[0].status);
    CHECK(1 == fake_qp_outstanding(a)); /* the fourth: RNR again */
    CHECK(2 == fake.rnr_events && fake.rnr_naks >= 2);
    /* CQ capacity: rcq holds 4 (one waiting); a completion beyond is an overrun. */
    CHECK(1 == fake_cq_waiting(rcq));
    for (int i = 0; i < 4; ++i) {
        fake_push_wc(rcq, 90 + i, IBV_WC_SUCCESS, 0, b->qp_num, IBV_WC_RECV);
    }
    CHECK(1 == fake.cq_overruns && 4 == fake_cq_waiting(rcq));
    CHECK(NULL != strstr(fake.last_fault, "overrun"));
    /* The wire overruns it too: the held SEND lands in the full CQ. */
    CHECK(0 == raw_recv(srq, buf + 1216, 64, mr->lkey, 14));
    (void)V.poll_cq(scq, 8, wc);
    CHECK(2 == fake.cq_overruns && 4 == fake_cq_waiting(rcq));
    while (V.poll_cq(rcq, 8, wc) > 0) {
    }

    /* RDMA write: into a remote-writable MR with its rkey; else an access error. */
    c = raw_qp(pd, scq, xcq, srq, 8, 16);
    d = raw_qp(pd, scq, xcq, srq, 8, 16);
    fake_connect_pair(c, d);
    memset(buf + 512, 0x5c, 8);
    CHECK(0 == raw_send(c, IBV_WR_RDMA_WRITE, buf + 512, 8, mr->lkey, IBV_SEND_INLINE,
                        (uintptr_t)word + 8, rw->rkey, 40));
    CHECK(0 == raw_send(c, IBV_WR_RDMA_WRITE, buf + 512, 8, mr->lkey, IBV_SEND_SIGNALED,
                        (uintptr_t)word + 60, rw->rkey, 41)); /* past the end */
    CHECK(0 == raw_send(c, IBV_WR_RDMA_WRITE, buf + 512, 8, mr->lkey, IBV_SEND_SIGNALED,
                        (uintptr_t)word, rw->rkey, 42)); /* flushed after the error */
    while (V.poll_cq(scq, 8, wc) > 0) {
    }
    CHECK(0x5c == word[8] && 0 == word[0]);
    CHECK(1 == fake.access_errors);
    CHECK(fake_qp(c)->error);
    (void)V.destroy_qp(c);
    (void)V.destroy_qp(d);
    c = raw_qp(pd, scq, xcq, srq, 8, 16);
    d = raw_qp(pd, scq, xcq, srq, 8, 16);
    fake_connect_pair(c, d);
    CHECK(0 == raw_send(c, IBV_WR_RDMA_WRITE, buf, 8, mr->lkey, IBV_SEND_SIGNALED,
                        (uintptr_t)target, ro->rkey, 43)); /* not remote-writable */
    CHECK(0 == raw_send(c, IBV_WR_RDMA_WRITE, buf, 8, mr->lkey, 0, 0, 0, 44));
    n = 0;
    for (int k; (k = V.poll_cq(scq, 1, wc)) > 0;) {
        CHECK(IBV_WC_SUCCESS != wc[0].status);
        n += k;
    }
    CHECK(2 == n && 2 == fake.access_errors); /* the second: flushed */
    CHECK(IBV_WC_WR_FLUSH_ERR == wc[0].status);
    (void)V.destroy_qp(c);
    (void)V.destroy_qp(d);

    /* rnr_retry 0: the SEND fails at once with RNR_RETRY_EXC_ERR. */
    c = raw_qp(pd, scq, scq, srq, 8, 16);
    d = raw_qp(pd, scq, scq, srq, 8, 16);
    fake_connect_pair(c, d);
    while (fake_srq_posted(srq) > 0) {
        (void)fake_inject_recv(d, "x", 1);
    }
    while (V.poll_cq(xcq, 8, wc) > 0 || V.poll_cq(rcq, 8, wc) > 0 || V.poll_cq(scq, 8, wc) > 0) {
    }
    fake_qp(c)->rnr_retry = 0;
    n = fake.rnr_events;
    CHECK(0 == raw_send(c, IBV_WR_SEND, buf, 8, mr->lkey, 0, 0, 0, 50));
    CHECK(1 == V.poll_cq(scq, 8, wc));
    CHECK(IBV_WC_RNR_RETRY_EXC_ERR == wc[0].status && 50 == wc[0].wr_id);
    CHECK(n + 1 == fake.rnr_events);
    /* A SEND larger than the receive buffer. */
    CHECK(0 == raw_recv(srq, buf + 1024, 16, mr->lkey, 60));
    CHECK(-1 == fake_inject_recv(d, buf, 32));
    CHECK(1 == fake.len_errors);
    /* Failure injection still works. */
    fake.fail_at = fake.calls + 1;
    CHECK(ENOMEM == raw_send(c, IBV_WR_SEND, buf, 8, mr->lkey, 0, 0, 0, 70));
    CHECK(fake.failed && 0 == strcmp(fake.failed_fn, "f_post_send"));

    (void)V.destroy_qp(a);
    (void)V.destroy_qp(b);
    (void)V.destroy_qp(c);
    (void)V.destroy_qp(d);
    (void)V.destroy_srq(srq);
    (void)V.dereg_mr(mr);
    (void)V.dereg_mr(ro);
    (void)V.dereg_mr(rw);
    (void)V.destroy_cq(scq);
    (void)V.destroy_cq(rcq);
    (void)V.destroy_cq(xcq);
    (void)V.dealloc_pd(pd);
    CHECK(0 == fake.misuse);
    CHECK(0 == fake_live_objects());
}

/* ---------------------------------------------------- module creation */

static void test_profile_to_qp_attributes(void)
{
    mca_btl_llrdma_module_t *m;
    llrdma_device_info_t dev;
    char why[512];

    fw_begin();
    CHECK(0 == fw_add(8192, 0, 0));
    m = fw[0].m;
    /* One probe QP per path (for the work-request API, which it also
     * decides); the BW path's was created last, with the BW profile. */
    CHECK(2 == fake.nqp_created);
    CHECK(m->wr_api[LL] && m->wr_api[BW]);
    CHECK(fake.last_qp_attr.cap.max_send_wr == fw[0].prof.bw.sq_depth);
    CHECK(fake.last_qp_attr.cap.max_inline_data == fw[0].prof.bw.inline_bytes);
    CHECK(IBV_QPT_RC == fake.last_qp_attr.qp_type);
    CHECK(0 == fake.last_qp_attr.sq_sig_all);
    CHECK(fake.last_qp_attr.srq == m->path[BW].srq);
    CHECK(fake.last_qp_attr.send_cq == m->path[BW].scq);
    CHECK(fake.last_qp_attr.recv_cq == m->path[BW].rcq && m->path[BW].rcq != m->path[BW].scq);
    CHECK(m->granted.inline_bytes[LL] == fw[0].prof.ll.inline_bytes);
    CHECK(m->granted.sq_depth[LL] == fw[0].prof.ll.sq_depth);
    /* Moderation on the BW CQ only; the LL CQ reports every completion. */
    CHECK(((fake_cq_t *)m->path[BW].scq)->moderated);
    CHECK(((fake_cq_t *)m->path[BW].scq)->mod_count == fw[0].prof.bw.cq_mod_count);
    CHECK(!((fake_cq_t *)m->path[LL].scq)->moderated);
    CHECK(((fake_cq_t *)m->path[BW].rcq)->moderated && !((fake_cq_t *)m->path[LL].rcq)->moderated);
    /* Fixed-size CQs and full-capacity SRQs; no receive buffer before a peer. */
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        CHECK(4096 == m->path[p].scq_cqe && 4096 == ((fake_cq_t *)m->path[p].scq)->cap);
        CHECK(m->path[p].scq_cqe - m->path[p].scq_room <= 1); /* the first send */
        CHECK(4096 == m->path[p].srq_depth && 4096 == m->path[p].rq.cap);
        CHECK(4096 == ((fake_cq_t *)m->path[p].rcq)->cap); /* every posted buffer's completion */
        CHECK(0 == m->path[p].rq.posted && 0 == fake_srq_posted(m->path[p].srq));
    }
    CHECK(0 == fake.nrecvs);
    /* ob1 limits from the plan: one eager BW fragment above the hint. */
    CHECK(m->super.btl_eager_limit >= 2 * 8192u);
    /* The modex record says what this rank receives. */
    CHECK(8192 == m->addr.hint);
    CHECK(m->addr.frag_max[LL] == m->lim.frag_max[LL] &&
          m->addr.frag_max[BW] == m->lim.frag_max[BW]);
    CHECK(0 != m->addr.cm_port);
    CHECK(0 == mca_btl_llrdma_module_granted(m, &dev, why, sizeof(why)));
    CHECK(1 == dev.cq_moderation_supported);
    CHECK(4096 == dev.rq_depth_granted_ll && 4096 == dev.rq_depth_granted_bw);
    fw_end(0);

    /* No hint: one generic path (BW), no LL path in the record. */
    fw_begin();
    CHECK(0 == fw_add(0, 0, 0));
    CHECK(1 == fake.nqp_created);
    CHECK(!fw[0].m->path_used[LL] && 0 == fw[0].m->addr.frag_max[LL]);
    CHECK(0 != fw[0].m->addr.frag_max[BW]);
    fw_end(0);
}

static void test_granted_less_is_reported(void)
{
    mca_btl_llrdma_module_t *m;
    llrdma_device_info_t dev;
    char why[512];

    fw_begin();
    fake.max_inline = 100; /* 256 requested: the BTL asks again with 128, then 64 */
    fake.modify_cq_supported = 0;
    fake.max_srq_wr = 20; /* less than one LL (64) or BW (32) allotment */
    CHECK(0 == fw_add(8192, 0, 0));
    m = fw[0].m;
    CHECK(64 == m->granted.inline_bytes[LL]);
    CHECK(64 == m->lim.inline_max[LL]);
    CHECK(m->wr_api[LL] && m->wr_api[BW]); /* the probe asked that way */
    CHECK(20 == m->path[LL].srq_depth && 20 == m->path[LL].rq.cap);
    /* No progress thread: moderation acts on nothing, so it is no miss. */
    CHECK(3 == mca_btl_llrdma_module_granted(m, &dev, why, sizeof(why)));
    CHECK(NULL != strstr(why, "ll inline 64 of 256"));
    CHECK(NULL == strstr(why, "CQ moderation"));
    CHECK(NULL != strstr(why, "ll receive queue holds 20 buffers, less than one connection's 64"));
    CHECK(NULL != strstr(why, "bw receive queue holds 20 buffers"));
    CHECK(0 == dev.cq_moderation_supported);
    CHECK(64 == dev.max_inline_granted_ll);
    CHECK(20 == dev.rq_depth_granted_ll);
    fw_end(0);

    /* The same without the work-request API: the classic probe asks again. */
    fw_begin();
    fake.max_inline = 100;
    fake.no_wr_api = 1;
    CHECK(0 == fw_add(8192, 0, 0));
    CHECK(64 == fw[0].m->granted.inline_bytes[LL] && !fw[0].m->wr_api[LL]);
    CHECK(0 == strcmp("ibv_create_qp_ex: Operation not supported", fw[0].m->wr_api_why[LL]));
    CHECK(2 == fake.nqp_ex_calls); /* once per path, not once per inline size */
    fw_end(0);

    /* A provider that refuses the extended create for another reason: asked
     * once per path, then the classic probe, at the full inline size. */
    fw_begin();
    fake.qp_ex_errno = EPERM;
    CHECK(0 == fw_add(8192, 0, 0));
    CHECK(2 == fake.nqp_ex_calls);
    CHECK(!fw[0].m->wr_api[LL] && !fw[0].m->wr_api[BW]);
    CHECK(256 == fw[0].m->granted.inline_bytes[LL]);
    CHECK(0 == strcmp("ibv_create_qp_ex: Operation not permitted", fw[0].m->wr_api_why[LL]));
    fw_end(0);

    /* The classic probe follows the same rule: refused with EPERM, it is
     * asked once, not once per inline size, and the port is not used. */
    fw_begin();
    fake.qp_ex_errno = EPERM;
    fake.qp_errno = EPERM;
    CHECK(0 != fw_add(8192, 0, 0));
    CHECK(1 == fake.nqp_ex_calls && 1 == fake.nqp_calls);
    fw_end(0);

    /* With the thread, the missing moderation is reported. */
    fw_begin();
    fake_lock_install(); /* the thread polls the fake too */
    fake.modify_cq_supported = 0;
    mca_btl_llrdma_component.progress_thread = 1;
    CHECK(0 == fw_add(8192, 0, 0));
    mca_btl_llrdma_component.progress_thread = 0;
    CHECK(fw[0].m->thread_running);
    CHECK(1 == mca_btl_llrdma_module_granted(fw[0].m, &dev, why, sizeof(why)));
    CHECK(NULL != strstr(why, "bw CQ moderation (16 completions / 8 us) not supported"));
    fw_end(0);
}

/* ------------------------------------------------------- connections */

static void test_lazy_connect_and_post_flags(void)
{
    mca_btl_llrdma_conn_t *ca, *cb;
    mca_btl_llrdma_endpoint_t *ep;
    int first, sig = 0, inl = 0, before;

    fw_begin();
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0));
    fw_mesh();
    ep = fw[0].ep[1];
    CHECK(NULL != ep && ep->use_path[LL] && ep->use_path[BW]);
    CHECK(ep->frag_max[LL] == fw[1].m->lim.frag_max[LL]);
    CHECK(0 == fake.nsends && 0 == fake.nrecvs && 2 * 2 == fake.nqp_created); /* the probes */
    /* First small send: queued; only the LL path connects. */
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 16, 0));
    CHECK(LLRDMA_EP_CONNECTING == ep->state);
    CHECK(1 == opal_list_get_size(&ep->pending[LL]));
    CHECK(NULL != ep->conn[LL] && NULL == ep->conn[BW]);
    fw_settle(100);
    ca = fw_conn(0, 1, LL);
    cb = fw_conn(1, 0, LL);
    CHECK(NULL != ca && NULL != cb && NULL == fw_conn(0, 1, BW) && NULL == fw_conn(1, 0, BW));
    if (NULL == ca || NULL == cb) {
        fw_end(1);
        return;
    }
    CHECK(LLRDMA_CONN_ESTABLISHED == ca->state && LLRDMA_CONN_ESTABLISHED == cb->state);
    CHECK(ca->active && !cb->active);
    CHECK(fake_qp(ca->qp)->peer == fake_qp(cb->qp)); /* one QP each side, wired */
    CHECK(1 == fake.nconnects && 1 == fake.naccepts && 0 == fake.nrejects);
    CHECK(1 == fw_sent(0, 1));
    CHECK(1 == fw[0].cb_calls && 0 == fw[0].cb_errors); /* the queued fragment went inline */
    /* The private data: credits, fragment limit, where to write credits. */
    /* Overcommitted (rnr_retry 7): the burst window, 512 buffers of 8 KiB and
     * more than the profile's, within half the budget and half the SRQ. */
    CHECK(512 == ca->allot && 512 == cb->allot && fw[0].prof.ll.rq_depth < 512);
    CHECK(ca->credit.granted == cb->allot && cb->credit.granted == ca->allot);
    /* The peer's fragment limit, from the private data, on the endpoint. */
    CHECK(fw[0].ep[1]->frag_max[LL] == fw[1].m->lim.frag_max[LL]);
    CHECK(ca->peer_credit_addr == (uintptr_t)&cb->credit_buf[0]);
    CHECK(ca->peer_credit_rkey == cb->credit_mr->rkey &&
          cb->peer_credit_rkey == ca->credit_mr->rkey);
    /* Receive buffers were posted for the connection, on demand. */
    for (int i = 0; i < 2; ++i) {
        mca_btl_llrdma_path_t *path = &fw[i].m->path[LL];
        CHECK(fake_srq_posted(path->srq) == 512);
        CHECK(path->rq.posted == 512 && path->rq.reserved == path->rq.posted);
        CHECK(0 == fake_srq_posted(fw[i].m->path[BW].srq));
        /* Room in the shared send CQ for what is posted, nothing reserved. */
        CHECK(path->scq_cqe - path->scq_room == fw_conn(i, 1 - i, LL)->sq.posted);
    }
    /* RNR timer set after establishment; retry counts from the connect parameters. */
    CHECK(12 == fake_qp(ca->qp)->min_rnr_timer && 12 == fake_qp(cb->qp)->min_rnr_timer);
    CHECK(7 == fake_qp(ca->qp)->rnr_retry && 7 == fake_qp(cb->qp)->retry_count);
    /* btl_llrdma_ack_timeout 0: rdma_cm's own ACK timeout on both sides. */
    CHECK(18 == fake_qp(ca->qp)->ack_timeout && 18 == fake_qp(cb->qp)->ack_timeout);
    /* The first send: inline, unsignalled. */
    CHECK(1 == fake.nsends && IBV_WR_SEND == fake.sends[0].opcode);
    CHECK(fake.sends[0].flags & IBV_SEND_INLINE);
    CHECK(!(fake.sends[0].flags & IBV_SEND_SIGNALED));
    CHECK(16 + HDR == fake.sends[0].length);

    /* A lone 1 KB send (above the inline size) is signalled, on the LL QP,
     * and done for ob1 at post: the BTL owns the fragment, which holds a copy
     * of the data, and ob1 asked for no callback. */
    first = fake.nsends;
    CHECK(1 == fw_send(0, 1, 1024, 0));
    CHECK(1 == fw[0].m->sends_done_at_post[1] && 0 == fw[0].m->sends_done_at_post[0]);
    CHECK(fake.sends[first].flags & IBV_SEND_SIGNALED);
    CHECK(!(fake.sends[first].flags & IBV_SEND_INLINE));
    CHECK(fake.sends[first].qp == ca->qp);
    /* 16 KB at hint 8 KB: one fragment for the BW path, which connects now. */
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 16384, 1));
    CHECK(NULL != ep->conn[BW]);
    fw_settle(100);
    CHECK(LLRDMA_EP_READY == ep->state);
    CHECK(fake.sends[fake.nsends - 1].qp == ep->conn[BW]->qp);
    CHECK(fake.sends[fake.nsends - 1].length == 16384 + HDR);
    CHECK(!(fake.sends[fake.nsends - 1].flags & IBV_SEND_INLINE)); /* BW: no inline */
    CHECK(3 == fw_sent(0, 1));

    /* 48 inline sends: the cadence signals one in signal_interval.  Each
     * goes alone: past half the queue batching would hold them
     * (test_btl_flow, test_busy_queue_batches). */
    first = fake.nsends;
    before = fw[0].inline_done;
    mca_btl_llrdma_component.sq_batch = 0;
    for (int i = 0; i < 48; ++i) {
        CHECK(1 == fw_send(0, 1, 16, 0));
    }
    mca_btl_llrdma_component.sq_batch = 1;
    CHECK(48 == fw[0].inline_done - before);
    for (int i = first; i < fake.nsends; ++i) {
        sig += !!(fake.sends[i].flags & IBV_SEND_SIGNALED);
        inl += !!(fake.sends[i].flags & IBV_SEND_INLINE);
    }
    CHECK(48 == inl && 48 == fake.nsends - first);
    CHECK(sig >= 2 && sig <= 48 / (int)fw[0].prof.ll.signal_interval + 1);
    fw_settle(100);
    CHECK(51 == fw_sent(0, 1));
    CHECK(fw[0].accepted == fw[0].cb_calls);
    CHECK(0 == fw[0].err_calls && 0 == fw[1].err_calls);
    fw_end(0);
}

/* A connected pair (processes 0 and 1) with the LL path up. */
static int pair_ll(uint64_t hint, uint32_t sq)
{
    fw_begin();
    mca_btl_llrdma_component.coalesce = 0; /* one WR per message: exact counts */
    mca_btl_llrdma_component.sq_batch = 0; /* each posted while the queue has room */
    if (0 != fw_add(hint, sq, sq) || 1 != fw_add(hint, sq, sq)) {
        return -1;
    }
    fw_mesh();
    if (OPAL_SUCCESS != fw_send(0, 1, 16, 0)) {
        return -1;
    }
    fw_settle(100);
    return NULL != fw_conn(0, 1, LL) && NULL != fw_conn(1, 0, LL) &&
                   LLRDMA_CONN_ESTABLISHED == fw_conn(0, 1, LL)->state
               ? 0
               : -1;
}

static void test_receive_dispatch(void)
{
    unsigned char wire[HDR + sizeof(fw_msg_t) + 4];
    mca_btl_llrdma_hdr_t h = {.tag = FW_TAG};
    mca_btl_llrdma_conn_t *cb;
    uint32_t posted;

    CHECK(0 == pair_ll(8192, 0));
    cb = fw_conn(1, 0, LL);
    posted = fake_srq_posted(fw[1].m->path[LL].srq);
    /* A well-formed fragment on B's QP (from a raw peer): dispatched to the
     * tag's callback, the buffer reposted. */
    h.len = MCA_BTL_LLRDMA_HDR_WORD(sizeof(fw_msg_t) + 4);
    memcpy(wire, &h, HDR);
    fw_fill(0, 1, wire + HDR, sizeof(fw_msg_t) + 4, 1);
    CHECK(0 == fake_inject_recv(cb->qp, wire, sizeof(wire)));
    CHECK(posted - 1 == fake_srq_posted(fw[1].m->path[LL].srq));
    fw_progress_one(1, 1);
    CHECK(2 == fw[1].recv_calls && 2 == fw_sent(0, 1));
    CHECK(sizeof(fw_msg_t) + 4 == fw[1].recv_max_len);
    CHECK(posted == fake_srq_posted(fw[1].m->path[LL].srq));
    CHECK(2 == cb->credit.consumed);
    /* A length that disagrees with the header is a fatal error, not data. */
    h.len = MCA_BTL_LLRDMA_HDR_WORD(9);
    memcpy(wire, &h, HDR);
    CHECK(0 == fake_inject_recv(cb->qp, wire, sizeof(wire)));
    fw_progress_one(1, 1);
    CHECK(2 == fw[1].recv_calls);
    CHECK(1 == fw[1].err_calls && NULL != strstr(fw[1].err_text, "malformed"));
    CHECK(posted == fake_srq_posted(fw[1].m->path[LL].srq)); /* reposted all the same */
    fw_end(0);
}

/* Packed records (btl_llrdma_coalesce on the sender): each one dispatched in
 * order; a sequence that does not end exactly at the received length, or a
 * record without the magic, is malformed and nothing of it is delivered. */
static size_t pack_rec(unsigned char *wire, size_t off, int first, size_t len, int fill)
{
    mca_btl_llrdma_hdr_t h = {.tag = FW_TAG,
                              .flags = first ? MCA_BTL_LLRDMA_HDR_PACKED : 0,
                              .len = MCA_BTL_LLRDMA_HDR_WORD(len)};
    off = MCA_BTL_LLRDMA_REC_ALIGN(off);
    memcpy(wire + off, &h, HDR);
    if (fill) {
        fw_fill(0, 1, wire + off + HDR, len, 1);
    }
    return off + HDR + len;
}

static void test_packed_dispatch(void)
{
    static unsigned char wire[4096];
    size_t len;

    CHECK(0 == pair_ll(8192, 0));
    len = pack_rec(wire, 0, 1, sizeof(fw_msg_t) + 3, 1);
    len = pack_rec(wire, len, 0, sizeof(fw_msg_t) + 17, 1);
    len = pack_rec(wire, len, 0, sizeof(fw_msg_t), 1);
    CHECK(0 == fake_inject_recv(fw_conn(1, 0, LL)->qp, wire, len));
    fw_progress_one(1, 1);
    CHECK(4 == fw[1].recv_calls && 4 == fw_sent(0, 1) && 0 == fw[1].recv_bad);
    CHECK(0 == fw[1].err_calls);
    fw_end(0);

    /* Malformed: 0 trailing bytes short of a header, 1 a record running past
     * the end, 2 a bad magic in the second record, 3 a single record whose
     * length disagrees with the completion. */
    for (int k = 0; k < 4; ++k) {
        CHECK(0 == pair_ll(8192, 0));
        len = pack_rec(wire, 0, 3 != k, sizeof(fw_msg_t) + 3, 0);
        if (0 == k) {
            len = MCA_BTL_LLRDMA_REC_ALIGN(len) + HDR - 2;
        } else if (1 == k) {
            len = pack_rec(wire, len, 0, 64, 0) - 8;
        } else if (2 == k) {
            size_t off = MCA_BTL_LLRDMA_REC_ALIGN(len);
            len = pack_rec(wire, len, 0, 24, 0);
            wire[off + 7] ^= 0xff; /* the magic: the length word's high byte */
        } else {
            len += 8;
        }
        CHECK(0 == fake_inject_recv(fw_conn(1, 0, LL)->qp, wire, len));
        fw_progress_one(1, 1);
        CHECK(1 == fw[1].recv_calls); /* the connecting message only */
        CHECK(1 == fw[1].err_calls && NULL != strstr(fw[1].err_text, "malformed"));
        fw_end(0);
    }
}

static void test_completion_error_reaches_ob1(void)
{
    mca_btl_llrdma_conn_t *ca;
    int posted;

    CHECK(0 == pair_ll(8192, 8));
    fw_cb_always = 1; /* fragments whose callback ob1 waits for */
    ca = fw_conn(0, 1, LL);
    /* The peer stops answering: WRs posted now never arrive. */
    fake.wire_hold = 1;
    posted = fake.nsends;
    for (int i = 0; i < 12; ++i) {
        CHECK(OPAL_SUCCESS == fw_send(0, 1, 1000, 0));
    }
    posted = fake.nsends - posted;
    CHECK(posted >= 6 && posted < 12); /* the queue holds 8, less the first WR */
    CHECK(12 - posted == (int)opal_list_get_size(&fw[0].ep[1]->pending[LL]));
    fake_qp_fail(ca->qp, IBV_WC_RETRY_EXC_ERR);
    fake.wire_hold = 0;
    fw_progress_one(0, 2);
    CHECK(1 == fw[0].err_calls); /* reported once, naming the peer and the status */
    CHECK(fw[0].err_proc == fw[1].proc);
    CHECK(NULL != strstr(fw[0].err_text, "rank 1"));
    CHECK(NULL != strstr(fw[0].err_text, "retry counter exceeded"));
    /* No fragment lost silently (the first went inline at connection). */
    CHECK(13 == fw[0].cb_calls && 12 == fw[0].cb_errors);
    CHECK(LLRDMA_EP_FAILED == fw[0].ep[1]->state);
    CHECK(OPAL_ERR_UNREACH == fw_send(0, 1, 8, 0));
    CHECK(1 == fw_sent(0, 1));
    fw_end(0);
}

/* ob1's eager sends (BTL-owned, no callback asked): done for ob1 at post,
 * the fragment ours until its work completion, which returns it to its
 * pool; the data arrives intact.  When the connection then fails, the peer
 * is reported through the error callback and every fragment still comes
 * back to the pool (none leaks, none calls back). */
static void test_copied_send_done_at_post(void)
{
    mca_btl_llrdma_pool_t *pool;
    int cb0;

    CHECK(0 == pair_ll(8192, 8));
    pool = &fw[0].m->path[LL].send_pool;
    cb0 = fw[0].cb_calls; /* the connecting message, queued: it calls back */
    fake.wire_hold = 1;
    for (int i = 0; i < 5; ++i) {
        CHECK(1 == fw_send(0, 1, 1000, 0));
    }
    CHECK(5 == fw[0].m->sends_done_at_post[1] && 0 == fw[0].m->sends_done_at_post[0]);
    CHECK(opal_list_get_size(&pool->free) + 5 <= pool->nfrags); /* in flight: ours */
    CHECK(cb0 == fw[0].cb_calls);
    fake.wire_hold = 0;
    fw_settle(100);
    CHECK(6 == fw_sent(0, 1)); /* the connecting message and the five, verified */
    CHECK(cb0 == fw[0].cb_calls && 0 == fw[1].err_calls);
    CHECK(pool->nfrags == opal_list_get_size(&pool->free));
    /* The same in flight when the connection fails. */
    fake.wire_hold = 1;
    for (int i = 0; i < 3; ++i) {
        CHECK(1 == fw_send(0, 1, 1000, 0));
    }
    fake_qp_fail(fw_conn(0, 1, LL)->qp, IBV_WC_RETRY_EXC_ERR);
    fake.wire_hold = 0;
    fw_progress_one(0, 2);
    CHECK(1 == fw[0].err_calls && NULL != strstr(fw[0].err_text, "retry counter exceeded"));
    CHECK(cb0 == fw[0].cb_calls);
    CHECK(pool->nfrags == opal_list_get_size(&pool->free));
    fw_end(0);
}

static void test_post_failure_reaches_ob1(void)
{
    fw_begin();
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0));
    fw_mesh();
    fake.post_send_errno = ENOMEM;
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 16, 0)); /* queued until connected */
    fw_settle(100);
    CHECK(1 == fw[0].err_calls && NULL != strstr(fw[0].err_text, "ibv_post_send failed"));
    CHECK(1 == fw[0].cb_calls && 1 == fw[0].cb_errors);
    fw_end(0);
}

/* post_send of the fake device, failing the Nth WR from now, as a device
 * would: the WRs of a chain before it are posted, *bad names it. */
static int post_fail_in, post_chains;
static int post_send_failing(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct ibv_send_wr *w = wr, *prev = NULL;
    post_chains += NULL != wr && NULL != wr->next;
    for (; NULL != w; prev = w, w = w->next) {
        if (0 < post_fail_in && 0 == --post_fail_in) {
            break;
        }
    }
    if (NULL == w) {
        return fake_ops.post_send(qp, wr, bad);
    }
    if (NULL != prev) { /* the WRs before the failing one go */
        int rc;
        prev->next = NULL;
        rc = fake_ops.post_send(qp, wr, bad);
        prev->next = w;
        if (0 != rc) {
            return rc;
        }
    }
    *bad = w;
    return ENOMEM;
}

/* A post that fails in the middle of a burst: the fragments posted before it
 * without a signal (their completion was to come with the failed WR) must
 * still be completed towards ob1. */
static void test_post_failure_mid_burst(void)
{
    int before;

    CHECK(0 == pair_ll(8192, 8)); /* 8 WRs, one signalled in 2 */
    fw_cb_always = 1;
    CHECK(2 == fw_conn(0, 1, LL)->sq.interval);
    fake.wire_hold = 1;
    before = fake.nsends;
    for (int i = 0; i < 12; ++i) {
        CHECK(OPAL_SUCCESS == fw_send(0, 1, 1000, 0));
    }
    CHECK(7 == fake.nsends - before); /* the queue is full: the rest wait */
    /* The completions free slots: the drain posts the waiting ones as one
     * chain, whose second WR fails. */
    post_fail_in = 2;
    post_chains = 0;
    mca_btl_llrdma_verbs.post_send = post_send_failing;
    fake.wire_hold = 0;
    fw_progress_one(0, 4);
    CHECK(0 == post_fail_in && 1 <= post_chains);
    CHECK(1 == fw[0].err_calls && NULL != strstr(fw[0].err_text, "ibv_post_send failed"));
    CHECK(fw[0].accepted == fw[0].cb_calls);
    if (fw[0].accepted != fw[0].cb_calls) {
        printf("#   %d sends, %d callbacks: a fragment posted before the failed post is "
               "never completed\n",
               fw[0].accepted, fw[0].cb_calls);
    }
    fw_settle(20);
    fw_end(0);
}

static int accept_fail_in;
static int cm_accept_failing(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
    if (0 < accept_fail_in && 0 == --accept_fail_in) {
        errno = ENOMEM;
        return -1;
    }
    return fake_ops.cm_accept(id, param);
}

/* Both sides connect at once; the side that lost the tie-break (and dropped
 * its own attempt) cannot accept the winner's.  The winner is told (no
 * resources) and fails; the loser's own fragments must not wait forever. */
static void test_accept_failure_after_tie(void)
{
    fw_begin();
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0));
    fw_mesh();
    accept_fail_in = 1;
    mca_btl_llrdma_verbs.cm_accept = cm_accept_failing;
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 16, 0));
    CHECK(OPAL_SUCCESS == fw_send(1, 0, 16, 0));
    fw_settle(100);
    CHECK(0 == accept_fail_in);
    CHECK(1 == fw[0].err_calls && 1 == fw[0].cb_errors);
    CHECK(1 == fw[1].cb_calls && 1 == fw[1].err_calls);
    if (0 == fw[1].cb_calls) {
        printf("#   process 1's fragment waits for a connection nobody sets up\n");
    }
    fw_end(0);
}

static void wait_delivered(int from, int to, uint32_t n, int ms)
{
    for (int t = 0; t < ms && fw_sent(from, to) < n && 0 == fw[from].err_calls; ++t) {
        fw_progress(2);
        usleep(1000);
    }
}

static int ack_fail_in;
static int cm_set_ack_timeout_failing(struct rdma_cm_id *id, uint8_t t)
{
    if (0 < ack_fail_in && 0 == --ack_fail_in) {
        errno = ENOSYS;
        return -1;
    }
    return fake_ops.cm_set_ack_timeout(id, t);
}

/* btl_llrdma_ack_timeout reaches both sides' QPs (the active side sets it
 * before connect, the passive before accept); a device that cannot take it
 * fails the connection, said with the knob's name, on the side that set it
 * first (1) or second (2), and nothing is left connected. */
static void test_ack_timeout(void)
{
    mca_btl_llrdma_conn_t *ca, *cb;

    fw_begin();
    mca_btl_llrdma_component.ack_timeout = 14;
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0));
    fw_mesh();
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 16, 0));
    wait_delivered(0, 1, 1, 2000);
    ca = fw[0].ep[1]->conn[LL];
    cb = fw[1].ep[0]->conn[LL];
    CHECK(NULL != ca && NULL != cb && 0 == fake.misuse);
    if (NULL != ca && NULL != cb) {
        CHECK(14 == fake_qp(ca->qp)->ack_timeout && 14 == fake_qp(cb->qp)->ack_timeout);
    }
    fw_end(0);

    for (int nth = 1; nth <= 2; ++nth) {
        fw_begin();
        mca_btl_llrdma_component.ack_timeout = 14;
        mca_btl_llrdma_component.connect_timeout_s = 0;
        CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0));
        fw_mesh();
        ack_fail_in = nth;
        mca_btl_llrdma_verbs.cm_set_ack_timeout = cm_set_ack_timeout_failing;
        CHECK(OPAL_SUCCESS == fw_send(0, 1, 16, 0));
        fw_settle(100);
        CHECK(0 == ack_fail_in && 0 == fw_sent(0, 1));
        CHECK(1 == fw[0].cb_calls && 1 == fw[0].cb_errors && 1 == fw[0].err_calls);
        if (1 == nth) {
            CHECK(NULL != strstr(fw[0].err_text, "btl_llrdma_ack_timeout 14"));
        }
        fw_end(0);
    }
}

static void test_connection_rejected(void)
{
    /* No route: with no time left to retry, the peer is unreachable. */
    fw_begin();
    mca_btl_llrdma_component.connect_timeout_s = 0;
    CHECK(0 == fw_add(0, 0, 0) && 1 == fw_add(0, 0, 0)); /* generic: one (BW) connection */
    fw_mesh();
    fake.route_unreachable = 1;
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 16, 0));
    fw_settle(100);
    CHECK(1 == fw[0].err_calls && NULL != strstr(fw[0].err_text, "RDMA_CM_EVENT_UNREACHABLE"));
    CHECK(1 == fw[0].cb_calls && 1 == fw[0].cb_errors);
    fw_end(0);

    /* A peer that does not listen yet (busy outside MPI): retried with a
     * back-off of 10, 20 ms, then connected. */
    fw_begin();
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0));
    fw_mesh();
    fake.refuse_connects = 2;
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 16, 0));
    wait_delivered(0, 1, 1, 2000);
    CHECK(1 == fw_sent(0, 1) && 0 == fw[0].err_calls);
    CHECK(3 == fake.nconnects && 1 == fake.naccepts);
    CHECK(0 == fw[0].ep[1]->attempts[LL] && 0 == fw[0].m->retrying);
    fw_end(0);

    /* A peer that never listens: reported once the connect timeout has passed. */
    fw_begin();
    mca_btl_llrdma_component.connect_timeout_s = 0;
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0));
    fw_mesh();
    fake.refuse_connects = 1000;
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 16, 0));
    fw_settle(100);
    CHECK(1 == fw[0].err_calls && NULL != strstr(fw[0].err_text, "no llrdma listener"));
    CHECK(1 == fw[0].cb_errors);
    fw_end(0);

    /* The peer has no receive buffers for us: rejected with the reason, at once. */
    fw_begin();
    CHECK(0 == fw_add(8192, 0, 0));
    fw_port_max_srq_wr = 2; /* below the least allotment (4) */
    CHECK(1 == fw_add(8192, 0, 0));
    fw_mesh();
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 16, 0));
    fw_settle(100);
    CHECK(1 == fw[0].err_calls && NULL != strstr(fw[0].err_text, "no receive buffers"));
    CHECK(1 == fake.nrejects);
    CHECK(0 == fw[1].err_calls);
    fw_end(0);
}

static void test_passive_connection(void)
{
    int qps;
    struct rdma_cm_id *second;
    mca_btl_llrdma_conn_req_t req;
    mca_btl_llrdma_endpoint_t *ep;
    mca_btl_llrdma_module_t *b;

    fw_begin();
    CHECK(0 == fw_add(4096, 0, 0) && 1 == fw_add(8192, 0, 0));
    b = fw[1].m;
    /* Process 0 (a raw peer here) connects to 1 before 1's add_procs knows it. */
    memset(&req, 0, sizeof(req));
    req.magic = MCA_BTL_LLRDMA_CONN_MAGIC;
    req.version = MCA_BTL_LLRDMA_CONN_VERSION;
    req.jobid = fw[0].proc->proc_name.jobid;
    req.vpid = fw[0].proc->proc_name.vpid;
    req.hint = 4096;
    req.credits = 16;
    req.secret = b->addr.secret; /* from 1's modex record, as a member of the job */
    CHECK(0 != b->addr.secret && fw[0].m->addr.secret != b->addr.secret);
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        req.path = (uint8_t)p;
        req.frag_max = fw[0].m->lim.frag_max[p];
        (void)fake_connect_request(b->listen_id, &req, sizeof(req));
    }
    /* Foreign, older, for no path, without the listener's secret or with
     * another: rejected before any QP, counted, and cleaned up. */
    req.path = LL;
    req.magic = 0xbad;
    (void)fake_connect_request(b->listen_id, &req, sizeof(req));
    req.magic = MCA_BTL_LLRDMA_CONN_MAGIC;
    req.version = 1;
    (void)fake_connect_request(b->listen_id, &req, sizeof(req));
    req.version = MCA_BTL_LLRDMA_CONN_VERSION;
    req.path = 5;
    (void)fake_connect_request(b->listen_id, &req, sizeof(req));
    req.path = LL;
    req.secret = 0;
    (void)fake_connect_request(b->listen_id, &req, sizeof(req));
    req.secret = b->addr.secret ^ 1;
    (void)fake_connect_request(b->listen_id, &req, sizeof(req));
    req.secret = b->addr.secret;
    /* A second BW request while the first is still being accepted: the peer
     * runs one attempt at a time, so it gave the first up (its accept was
     * lost): the new one replaces it rather than being refused. */
    req.path = BW;
    second = fake_connect_request(b->listen_id, &req, sizeof(req));
    qps = fake.nqp_created;
    fw_progress_one(1, 20);
    CHECK(5 == fake.nrejects && 3 == fake.naccepts);
    CHECK(5 == b->foreign_rejects);
    CHECK(qps + 3 == fake.nqp_created); /* the accepted three only */
    ep = fw_add_procs(1, 0);            /* ob1 adds the process later: the same endpoint */
    CHECK(NULL != ep && 1 == opal_list_get_size(&b->endpoints));
    if (NULL == ep) {
        fw_end(1);
        return;
    }
    CHECK(LLRDMA_EP_READY == ep->state);
    CHECK(4096 == ep->peer_hint);
    /* Per-peer limits: the smaller LL fragment of the two. */
    CHECK(ep->frag_max[LL] == fw[0].m->lim.frag_max[LL] && ep->frag_max[LL] < b->lim.frag_max[LL]);
    CHECK(16 == ep->conn[LL]->credit.granted && 16 == ep->conn[BW]->credit.granted);
    CHECK(ep->conn[BW]->id == second);
    /* The stale attempt's receive allotment went back: one allotment posted per path. */
    CHECK(b->path[BW].rq.reserved == ep->conn[BW]->allot);
    CHECK(b->path[LL].rq.posted == b->path[LL].rq.want);
    /* A request for a path that is up is refused (DUP). */
    req.path = LL;
    (void)fake_connect_request(b->listen_id, &req, sizeof(req));
    fw_progress_one(1, 20);
    CHECK(6 == fake.nrejects && 3 == fake.naccepts);
    CHECK(5 == b->foreign_rejects); /* a refused duplicate is not foreign */
    fake.wire_hold = 1;             /* nobody behind the raw QPs */
    CHECK(1 == fw_send(1, 0, 16, 0));
    CHECK(fake.sends[0].qp == ep->conn[LL]->qp);
    CHECK(0 == fw[1].err_calls);
    fw_end(0);
}

/* Bytes the process has allocated (AddressSanitizer's count: this test
 * runs under it, and its allocator bypasses mallinfo). */
static size_t heap_bytes(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return __sanitizer_get_current_allocated_bytes();
#else
    return mallinfo2().uordblks;
#endif
}

/* 1,000 processes connect to one module at once (issues 25 and 27): each
 * sends its LL and BW requests, in waves of the listen backlog (128; a
 * kernel CM drops what is beyond it and the initiator's CM resends).  Every
 * request is accepted, none lost or refused, each peer ends with one
 * endpoint and both paths; what the module holds per connection is
 * printed (receive buffers posted, heap), and so is the time per wave. */
static void many_peers(uint64_t hint, int n)
{
    enum { WAVE = 100 };
    mca_btl_llrdma_conn_req_t req;
    mca_btl_llrdma_module_t *b;
    size_t before, after, cqes = 0;
    double t0, t_first = 0, t_last = 0;
    int paths = 0, ready = 0, both = 0;
    size_t posted_bytes = 0;

    fw_begin();
    /* rxe's CQ size limit (the world's 4096 elsewhere): each path keeps one
     * receive and one send CQ of it, whatever the peers (test_cq_room in
     * test_btl_flow runs the send CQ's room out). */
    fw_port_max_cqe = fake.max_cqe = 32767;
    CHECK(0 == fw_add(hint, 0, 0) && 1 == fw_add(hint, 0, 0));
    b = fw[1].m;
    if (NULL == b || 0 != fw_raw_begin(n, 0)) {
        CHECK(0);
        fw_end(1);
        return;
    }
    before = heap_bytes();
    memset(&req, 0, sizeof(req));
    req.magic = MCA_BTL_LLRDMA_CONN_MAGIC;
    req.version = MCA_BTL_LLRDMA_CONN_VERSION;
    req.jobid = 7;
    req.hint = hint;
    req.credits = 16;
    req.secret = b->addr.secret;
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        paths += b->path_used[p];
    }
    for (int k0 = 0; k0 < n; k0 += WAVE) {
        int k1 = k0 + WAVE < n ? k0 + WAVE : n;
        double w0 = fw_now_s(), dt;
        for (int k = k0; k < k1; ++k) {
            req.vpid = FW_RAW_BASE + (uint32_t)k;
            for (int p = 0; p < LLRDMA_NPATHS; ++p) {
                if (b->path_used[p]) {
                    req.path = (uint8_t)p;
                    req.frag_max = fw[0].m->lim.frag_max[p];
                    (void)fake_connect_request(b->listen_id, &req, sizeof(req));
                }
            }
        }
        fw_progress_one(1, 4);
        dt = fw_now_s() - w0;
        if (0 == k0) {
            t_first = dt;
        }
        t_last = dt;
    }
    for (int r = 0; r < 1000 && fake.naccepts + fake.nrejects < paths * n; ++r) {
        fw_progress_one(1, 1);
    }
    printf("# after the waves: %d accepted, %d rejected\n", fake.naccepts, fake.nrejects);
    t0 = fw_now_s();
    after = heap_bytes();
    CHECK(fake.naccepts == paths * n && 0 == fake.nrejects && 0 == b->foreign_rejects);
    CHECK(n == (int)opal_list_get_size(&b->endpoints));
    for (int k = 0; k < n; ++k) {
        opal_process_name_t name = {7, FW_RAW_BASE + (uint32_t)k};
        mca_btl_llrdma_endpoint_t *ep = mca_btl_llrdma_endpoint_lookup(b, &name, 0);
        if (NULL == ep) {
            continue;
        }
        ready += LLRDMA_EP_READY == ep->state;
        both += (!b->path_used[LL] || NULL != ep->conn[LL]) && NULL != ep->conn[BW];
    }
    CHECK(n == ready && n == both);
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        if (b->path_used[p]) {
            posted_bytes += (size_t)b->path[p].rq.posted * b->path[p].rq.buf_bytes;
            /* Two CQs per path whatever the peers. */
            cqes += ((fake_cq_t *)b->path[p].rcq)->cap + b->path[p].scq_cqe;
            /* Every connection has the profile's whole window (overcommitted). */
            CHECK(b->path[p].rq.reserved == (uint32_t)n * b->path[p].rq.want);
        }
    }
    /* Bounded by the budget (recv_mem_max per path), whatever the peers. */
    CHECK(posted_bytes <= (size_t)paths * mca_btl_llrdma_component.recv_mem_max);
    /* A CQE is 64 bytes on mlx5 and rxe. */
    printf("# %d peers at hint %llu: %d connections accepted, %d refused; receive buffers %.1f "
           "MiB in all (%.1f KiB per peer), CQs %zu entries (%.1f KiB per peer at 64 B), "
           "heap %.1f KiB per peer; first wave of %d peers %.1f ms, last %.1f ms; lookups of "
           "all %d: %.2f ms\n",
           n, (unsigned long long)hint, fake.naccepts, fake.nrejects, posted_bytes / 1048576.0,
           posted_bytes / 1024.0 / n, cqes, cqes * 64.0 / 1024.0 / n,
           ((double)after - (double)before) / 1024.0 / n, WAVE, t_first * 1e3, t_last * 1e3, n,
           (fw_now_s() - t0) * 1e3);
    fw_end(0);
    fw_raw_end();
}

static void test_many_peers(void)
{
    many_peers(0, 1000);
    many_peers(8192, 1000);
    many_peers(65536, 1000);
}

static void test_peer_disconnect(void)
{
    mca_btl_llrdma_conn_t *old, *cb;
    uint32_t posted;

    CHECK(0 == pair_ll(8192, 0));
    old = fw_conn(0, 1, LL);
    posted = fake_srq_posted(fw[1].m->path[LL].srq);
    /* The connection breaks: both sides drop it, without an error... */
    (void)V.cm_disconnect(old->id);
    fw_settle(50);
    CHECK(0 == fw[0].err_calls && 0 == fw[1].err_calls);
    CHECK(NULL == fw_conn(0, 1, LL) && NULL == fw_conn(1, 0, LL));
    CHECK(LLRDMA_EP_IDLE == fw[0].ep[1]->state);
    CHECK(0 == fw[1].m->path[LL].rq.reserved); /* the allotment is free again */
    /* Its QP went to the error state at once, and the device's report of its
     * last receive reached the connection (read within 256 progress calls;
     * by process 0 only: the fake's processes share one device context). */
    CHECK(fake_qp(old->qp)->error);
    for (int r = 0; r < 600 && !old->last_wqe; ++r) {
        fw_progress_one(0, 1);
    }
    CHECK(old->last_wqe);
    CHECK(0 == fw[0].err_calls && 0 == fw[1].err_calls);
    /* ...and a later send reconnects instead of hanging; the peer gives the
     * new connection the buffers it already posted. */
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 16, 0));
    fw_settle(100);
    CHECK(2 == fw_sent(0, 1));
    cb = fw_conn(1, 0, LL);
    CHECK(NULL != fw_conn(0, 1, LL) && old != fw_conn(0, 1, LL) && NULL != cb);
    CHECK(posted == fake_srq_posted(fw[1].m->path[LL].srq));
    CHECK(NULL != cb && cb->allot == fw[1].m->path[LL].rq.reserved);
    /* A WR the dead peer never received comes back flushed: reported. */
    fw_cb_always = 1;
    fake.wire_hold = 1;
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 1000, 0));
    (void)V.cm_disconnect(fw_conn(0, 1, LL)->id);
    fake.wire_hold = 0;
    fw_settle(50);
    CHECK(1 == fw[0].err_calls && NULL != strstr(fw[0].err_text, "Flushed"));
    CHECK(1 == fw[0].cb_errors);
    fw_end(0);

    /* The peer finalized: no error until a send needs it, then it is reported. */
    CHECK(0 == pair_ll(8192, 0));
    mca_btl_llrdma_component.connect_timeout_s = 0;
    fw_as(1);
    fw[1].m->super.btl_finalize(&fw[1].m->super);
    fw[1].m = NULL;
    fw_settle(50);
    CHECK(0 == fw[0].err_calls && NULL == fw_conn(0, 1, LL));
    CHECK(OPAL_SUCCESS == fw_send(0, 1, 16, 0));
    fw_settle(50);
    CHECK(1 == fw[0].err_calls && 1 == fw[0].cb_errors);
    fw_end(0);
}

/* Three processes, both paths connected from 0 to 1 and 2 (one message
 * each way on each path, received). */
static void three_connected(void)
{
    fw_begin();
    CHECK(0 == fw_add(4096, 0, 0) && 1 == fw_add(4096, 0, 0) && 2 == fw_add(4096, 0, 0));
    fw_mesh();
    for (int j = 1; j < 3; ++j) {
        CHECK(0 <= fw_send(0, j, 100, 0));
        CHECK(0 <= fw_send(0, j, 9000, 1));
    }
    fw_settle(200);
    CHECK(2 == fw_sent(0, 1) && 2 == fw_sent(0, 2));
}

/* ------------------------------------------------------ fork safety */

/* With ibv_fork_init every registration marks its pages MADV_DONTFORK: a
 * registered buffer must not share a page with another heap object, or a
 * forked child (a data-loader worker, system()) loses that object. */
static void test_registered_pages_are_ours(void)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    int words = 0, slabs = 0;

    three_connected();
    /* Buffer slabs: page-aligned, whole pages registered. */
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        mca_btl_llrdma_pool_t *pools[2] = {&fw[0].m->path[p].send_pool,
                                           &fw[0].m->path[p].recv_pool};
        for (int k = 0; k < 2; ++k) {
            for (mca_btl_llrdma_slab_t *sl = pools[k]->slabs; NULL != sl; sl = sl->next) {
                CHECK(0 == (uintptr_t)sl->mem % page && 0 == sl->mr->length % page);
                ++slabs;
            }
        }
    }
    /* Credit words: every connection's lies in one of the module's pages of
     * credit words, and no two connections share one. */
    for (int j = 1; j < 3; ++j) {
        for (int p = 0; p < LLRDMA_NPATHS; ++p) {
            mca_btl_llrdma_conn_t *c = fw_conn(0, j, p);
            int found = 0;
            if (NULL == c) {
                continue;
            }
            for (mca_btl_llrdma_cword_page_t *pg = fw[0].m->cword_pages; NULL != pg;
                 pg = pg->next) {
                found |= (uintptr_t)c->credit_buf - (uintptr_t)pg->mem < page;
                CHECK(0 == (uintptr_t)pg->mem % page);
            }
            CHECK(found);
            CHECK(c->credit_mr->length == 2 * sizeof(uint64_t)); /* its own slot only */
            for (int jj = 1; jj < 3; ++jj) {
                for (int pp = 0; pp < LLRDMA_NPATHS; ++pp) {
                    mca_btl_llrdma_conn_t *o = fw_conn(0, jj, pp);
                    CHECK(NULL == o || o == c || o->credit_buf != c->credit_buf);
                }
            }
            ++words;
        }
    }
    printf("# %d slabs and %d credit words on pages of their own\n", slabs, words);
    CHECK(slabs >= 4 && 4 == words);
    fw_end(0);
}

/* ------------------------------------------------ asynchronous events */

/* Progress process i only until its module has read the device's events
 * (every fake module shares one context: the others must not take them). */
static void take_async(int i)
{
    for (int r = 0; r < 1000 && 0 != fake_async_waiting(); ++r) {
        fw_progress_one(i, 1);
    }
    fw_progress_one(i, 1); /* and delivered what they queued for ob1 */
}

static void test_async_events(void)
{
    mca_btl_llrdma_conn_t *c01;
    uint64_t t0;
    int before;

    three_connected();
    c01 = fw_conn(0, 1, BW);

    /* Informational events: said, acknowledged, nothing fails. */
    fake_push_async_port(IBV_EVENT_LID_CHANGE, 1);
    fake_push_async_port(IBV_EVENT_PORT_ACTIVE, 1);
    fake_push_async_port(IBV_EVENT_GID_CHANGE, 1);
    fake_push_async_qp(IBV_EVENT_COMM_EST, c01->qp);
    fake_push_async_qp(IBV_EVENT_SQ_DRAINED, c01->qp);
    fake_push_async_srq(IBV_EVENT_SRQ_LIMIT_REACHED, fw[0].m->path[BW].srq);
    take_async(0);
    CHECK(0 == fake_async_waiting() && 6 == fake.async_taken && 0 == fake.live_async);
    CHECK(6 == fw[0].m->async_events);
    CHECK(0 == fw[0].err_calls);

    /* The last receive of a QP in the error state: recorded on its connection. */
    fake_push_async_qp(IBV_EVENT_QP_LAST_WQE_REACHED, c01->qp);
    take_async(0);
    CHECK(1 == c01->last_wqe && 0 == fw[0].err_calls);

    /* A queue pair the device failed: that peer is reported, by name, with
     * the QP; the other peer carries on. */
    fake_push_async_qp(IBV_EVENT_QP_FATAL, c01->qp);
    take_async(0);
    CHECK(1 == fw[0].err_calls && fw[0].err_proc == fw[1].proc);
    CHECK(NULL != strstr(fw[0].err_text, "the queue pair failed"));
    CHECK(NULL != strstr(fw[0].err_text, "rank 1"));
    {
        char qp[32];
        snprintf(qp, sizeof(qp), "qp %u (bw path)", c01->qp->qp_num);
        CHECK(NULL != strstr(fw[0].err_text, qp));
    }
    CHECK(LLRDMA_EP_FAILED == fw[0].ep[1]->state);
    CHECK(OPAL_ERR_UNREACH == fw_send(0, 1, 100, 0));
    CHECK(0 <= fw_send(0, 2, 100, 0));
    fw_settle(200);
    CHECK(3 == fw_sent(0, 2));
    /* Its events again: the endpoint is failed already, said once only. */
    fake_push_async_qp(IBV_EVENT_QP_REQ_ERR, c01->qp);
    take_async(0);
    CHECK(1 == fw[0].err_calls);

    /* The port goes down: every connection of the module fails within a
     * few progress calls, naming the port; later sends are refused. */
    before = fw[2].err_calls;
    t0 = mca_btl_llrdma_now_ms();
    fake_push_async_port(IBV_EVENT_PORT_ERR, 1);
    take_async(2);
    printf("# port down noticed after %llu ms\n",
           (unsigned long long)(mca_btl_llrdma_now_ms() - t0));
    CHECK(mca_btl_llrdma_now_ms() - t0 < 1000);
    CHECK(1 == fw[2].err_calls - before); /* the peer it is connected to */
    CHECK(fw[2].err_proc == fw[0].proc);
    CHECK(NULL != strstr(fw[2].err_text, "port fake0:1 went down"));
    CHECK(fw[2].m->port_down);
    CHECK(OPAL_ERR_UNREACH == fw_send(2, 0, 100, 0));
    /* A peer it never talked to: refused at the first send, said then. */
    CHECK(OPAL_ERR_UNREACH == fw_send(2, 1, 100, 0));
    CHECK(2 == fw[2].err_calls - before && fw[2].err_proc == fw[1].proc);
    CHECK(NULL != strstr(fw[2].err_text, "the port went down"));

    /* A send failing on a port that is down before its event was read: the
     * report says the port went down (the device is asked on error). */
    fake.port_state = IBV_PORT_DOWN;
    fake_qp_fail(fw_conn(1, 0, LL)->qp, IBV_WC_LOC_QP_OP_ERR);
    CHECK(0 <= fw_send(1, 0, 4000, 0));
    for (int r = 0; r < 100 && 0 == fw[1].err_calls; ++r) {
        fw_progress_one(1, 1);
    }
    fake.port_state = 0;
    CHECK(1 == fw[1].err_calls && fw[1].err_proc == fw[0].proc);
    CHECK(NULL != strstr(fw[1].err_text, "local QP operation error; port fake0:1 went down "
                                         "(state DOWN)"));
    CHECK(fw[1].m->port_down);
    fw[1].err_calls = 0;

    /* Errors of the module's own queues: the module is reported as a whole. */
    fake_push_async_cq(IBV_EVENT_CQ_ERR, fw[1].m->path[LL].scq);
    take_async(1);
    CHECK(1 == fw[1].err_calls && NULL == fw[1].err_proc);
    CHECK(NULL != strstr(fw[1].err_text, "completion queue error on fake0:1"));
    fw_end(1); /* failed endpoints flush their work: the fake counts those */
    CHECK(0 == fake.live_async);

    fw_begin();
    CHECK(0 == fw_add(4096, 0, 0));
    fake_push_async_srq(IBV_EVENT_SRQ_ERR, fw[0].m->path[BW].srq);
    take_async(0);
    CHECK(1 == fw[0].err_calls && NULL != strstr(fw[0].err_text, "SRQ"));
    fw_end(0);
}

/* ------------------------------------------- a port that lags its error */

/* A local QP error on a port that still says ACTIVE (rxe fails the work of
 * a netdev taken down before the port's state changes): the report waits
 * for the port, briefly, and names it; a port that stays ACTIVE is
 * reported without it, after that wait. */
static void test_port_state_lags_the_error(void)
{
    for (int lags = 1; lags >= 0; --lags) {
        uint64_t t0;
        CHECK(0 == pair_ll(8192, 0));
        /* The first query (the settle loop's) and a few more still see ACTIVE. */
        fake.port_down_after = lags ? 4 : 0;
        fake_qp_fail(fw_conn(0, 1, LL)->qp, IBV_WC_LOC_QP_OP_ERR);
        CHECK(0 <= fw_send(0, 1, 4000, 0));
        t0 = mca_btl_llrdma_now_ms();
        for (int r = 0; r < 100 && 0 == fw[0].err_calls; ++r) {
            fw_progress_one(0, 1);
        }
        CHECK(1 == fw[0].err_calls && fw[0].err_proc == fw[1].proc);
        if (lags) {
            CHECK(0 == fake.port_down_after);
            CHECK(NULL != strstr(fw[0].err_text, "local QP operation error; port fake0:1 went "
                                                 "down (state DOWN)"));
            CHECK(fw[0].m->port_down);
        } else {
            CHECK(NULL != strstr(fw[0].err_text, "local QP operation error"));
            CHECK(NULL == strstr(fw[0].err_text, "went down"));
            CHECK(!fw[0].m->port_down);
            CHECK(mca_btl_llrdma_now_ms() - t0 >= 190); /* waited for it, once */
        }
        fake.port_state = 0;
        fake.port_down_after = 0;
        fw_end(1);
    }
}

/* Discovery under the device policy (docs/btl-design.md "Devices by
 * locality"): fake0 has no sysfs entry (an empty LLRDMA_SYSFS_ROOT), so its
 * class is UNKNOWN and nearest uses it; excluded, it is not used and said so. */
static void test_discovery_device_policy(void)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    mca_btl_llrdma_component_t saved = *c;
    llrdma_rank_config_t cfg;
    char root[] = "/tmp/llrdma-fake-sysfs-XXXXXX";

    CHECK(NULL != mkdtemp(root));
    setenv("LLRDMA_SYSFS_ROOT", root, 1);
    c->device_policy = "nearest";
    c->devices = c->if_include = c->if_exclude = NULL;
    c->gid_index = -1;
    c->roce_version = "auto";
    memset(&cfg, 0, sizeof(cfg));
    CHECK(1 == mca_btl_llrdma_discover(&cfg));
    CHECK(1 == c->nports && 1 == c->ports[0].port && 0 == strcmp(c->ports[0].dev, "fake0"));
    CHECK(0 == strcmp(cfg.nic_policy, "nearest"));
    CHECK(1 == cfg.nnics && 0 == strcmp(cfg.nics[0].name, "fake0") && cfg.nics[0].chosen);
    CHECK(0 == strcmp(cfg.nics[0].cls, "UNKNOWN") && 0 == strcmp(cfg.nics[0].ports, "1"));
    CHECK(0 == strcmp(cfg.nics[0].reason, "no PCI device in sysfs (virtual device?)"));

    c->if_exclude = "fake0";
    memset(&cfg, 0, sizeof(cfg));
    CHECK(0 == mca_btl_llrdma_discover(&cfg));
    CHECK(0 == c->nports && 1 == cfg.nnics && !cfg.nics[0].chosen);
    CHECK(0 == strcmp(cfg.nics[0].reason, "excluded by btl_llrdma_if_exclude"));
    CHECK(0 == strncmp(cfg.btl_status, "disqualified: no usable active verbs port", 41));

    c->if_exclude = NULL;
    c->device_policy = "list";
    c->devices = "fake0:1";
    memset(&cfg, 0, sizeof(cfg));
    CHECK(1 == mca_btl_llrdma_discover(&cfg));
    CHECK(1 == cfg.nnics && cfg.nics[0].chosen);
    CHECK(0 == strcmp(cfg.nics[0].reason,
                      "named in btl_llrdma_devices; no PCI device in sysfs (virtual device?)"));

    *c = saved;
    unsetenv("LLRDMA_SYSFS_ROOT");
    rmdir(root);
}

int main(int argc, char **argv)
{
    if (0 != fw_init(&argc, &argv)) {
        return 2;
    }
    test_fake_device_enforces();
    test_profile_to_qp_attributes();
    test_granted_less_is_reported();
    test_lazy_connect_and_post_flags();
    test_receive_dispatch();
    test_packed_dispatch();
    test_completion_error_reaches_ob1();
    test_copied_send_done_at_post();
    test_post_failure_reaches_ob1();
    test_post_failure_mid_burst();
    test_accept_failure_after_tie();
    test_ack_timeout();
    test_connection_rejected();
    test_passive_connection();
    test_many_peers();
    test_peer_disconnect();
    test_async_events();
    test_port_state_lags_the_error();
    test_registered_pages_are_ours();
    test_discovery_device_policy();
    return fw_finish();
}
