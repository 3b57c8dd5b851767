/*
 * btl/llrdma against a fake device (tests/unit/fake_verbs.c): the BTL's own
 * objects, linked into this program, driven the way ob1 drives them.
 *
 * Covers: profile -> QP attributes and CQ moderation, requested vs granted,
 * post flags (inline, signalling cadence), the ordered pending list when a
 * send queue is full, receive dispatch, work-completion and post errors
 * reaching ob1's error callback, and every seam call failing in turn during
 * module creation and connection set-up with nothing leaked.  Built with
 * AddressSanitizer (leak checking on).  C, not Boost: Open MPI's headers do
 * not compile as C++.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/runtime/opal.h"
#include "opal/util/proc.h"

#include "btl_llrdma.h"
#include "fake_verbs.h"

static int failures, checks;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        ++checks;                                                                                  \
        if (!(cond)) {                                                                             \
            ++failures;                                                                            \
            printf("%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                        \
        }                                                                                          \
    } while (0)

/* ---------------------------------------------------------------- helpers */

static int err_calls;
static char err_text[1024];
static opal_proc_t *err_proc;

static void on_error(struct mca_btl_base_module_t *btl, int32_t flags, opal_proc_t *proc,
                     char *info)
{
    (void)btl;
    (void)flags;
    ++err_calls;
    err_proc = proc;
    snprintf(err_text, sizeof(err_text), "%s", NULL != info ? info : "");
}

static int cb_calls, cb_last_status;
static void on_send_done(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                         struct mca_btl_base_descriptor_t *des, int status)
{
    (void)btl;
    (void)ep;
    (void)des;
    ++cb_calls;
    cb_last_status = status;
}

static int recv_calls;
static size_t recv_len;
static unsigned char recv_first;
static void on_recv(struct mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                    mca_btl_base_descriptor_t *des, void *cbdata)
{
    (void)btl;
    (void)tag;
    (void)cbdata;
    ++recv_calls;
    recv_len = des->des_segments[0].seg_len;
    recv_first = ((unsigned char *)des->des_segments[0].seg_addr.pval)[0];
}

static llrdma_profile_t prof;

static void make_profile(uint64_t hint, uint32_t ll_sq, uint32_t bw_sq)
{
    llrdma_profile_overrides_t o;
    memset(&o, 0, sizeof(o));
    o.ll_sq_depth = ll_sq;
    o.bw_sq_depth = bw_sq;
    if (LLRDMA_OK != llrdma_profile_derive(hint, &o, &prof)) {
        fprintf(stderr, "cannot derive the profile\n");
        exit(2);
    }
}

static mca_btl_llrdma_port_t port(void)
{
    mca_btl_llrdma_port_t p;
    memset(&p, 0, sizeof(p));
    snprintf(p.dev, sizeof(p.dev), "fake0");
    p.port = 1;
    p.link_layer = IBV_LINK_LAYER_ETHERNET;
    p.gid_index = 1;
    p.ipv4.s_addr = htonl(0x0a000001);
    p.max_cqe = 4096;
    p.max_srq_wr = 4096;
    p.max_qp_wr = 4096;
    return p;
}

static mca_btl_llrdma_module_t *create(void)
{
    mca_btl_llrdma_port_t p = port();
    mca_btl_llrdma_module_t *m = NULL;
    int rc = mca_btl_llrdma_module_create(&p, &prof, &m);
    if (OPAL_SUCCESS != rc) {
        return NULL;
    }
    m->super.btl_register_error(&m->super, on_error);
    return m;
}

static opal_proc_t *peer_proc;

/* What add_procs does after the modex: an endpoint for the peer. */
static mca_btl_llrdma_endpoint_t *add_peer(mca_btl_llrdma_module_t *m)
{
    mca_btl_llrdma_endpoint_t *ep = OBJ_NEW(mca_btl_llrdma_endpoint_t);
    ep->module = m;
    ep->proc = peer_proc;
    OBJ_RETAIN(peer_proc);
    ep->addr.ipv4 = htonl(0x0a000002);
    ep->addr.cm_port = htons(4243);
    snprintf(ep->addr.dev, sizeof(ep->addr.dev), "fake0");
    opal_list_append(&m->endpoints, &ep->super);
    return ep;
}

static void progress(mca_btl_llrdma_module_t *m, int n)
{
    for (int i = 0; i < n; ++i) {
        (void)mca_btl_llrdma_module_progress(m);
    }
}

static mca_btl_base_descriptor_t *frag_of(mca_btl_llrdma_module_t *m, mca_btl_llrdma_endpoint_t *ep,
                                          size_t size)
{
    mca_btl_base_descriptor_t *d =
        m->super.btl_alloc(&m->super, ep, MCA_BTL_NO_ORDER, size, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    if (NULL != d) {
        d->des_cbfunc = on_send_done;
        memset(d->des_segments[0].seg_addr.pval, 0x5a, size);
    }
    return d;
}

static int send_size(mca_btl_llrdma_module_t *m, mca_btl_llrdma_endpoint_t *ep, size_t size)
{
    mca_btl_base_descriptor_t *d = frag_of(m, ep, size);
    return NULL == d ? OPAL_ERR_OUT_OF_RESOURCE : m->super.btl_send(&m->super, ep, d, 0x41);
}

static void finalize(mca_btl_llrdma_module_t *m)
{
    m->super.btl_finalize(&m->super);
}

static void reset_counters(void)
{
    err_calls = cb_calls = recv_calls = 0;
    err_text[0] = '\0';
    err_proc = NULL;
}

/* ------------------------------------------------------------------ tests */

static void test_profile_to_qp_attributes(void)
{
    mca_btl_llrdma_module_t *m;
    llrdma_device_info_t dev;
    char why[512];

    fake_install();
    make_profile(8192, 0, 0);
    m = create();
    CHECK(NULL != m);
    if (NULL == m) {
        return;
    }
    /* The probe QP of the BW path was created last with the BW profile. */
    CHECK(fake.nqp_created == 2);
    CHECK(fake.last_qp_attr.cap.max_send_wr == prof.bw.sq_depth);
    CHECK(fake.last_qp_attr.qp_type == IBV_QPT_RC);
    CHECK(fake.last_qp_attr.sq_sig_all == 0);
    CHECK(NULL != fake.last_qp_attr.srq);
    CHECK(m->granted.inline_bytes[LLRDMA_PATH_LL] == prof.ll.inline_bytes);
    CHECK(m->granted.sq_depth[LLRDMA_PATH_LL] == prof.ll.sq_depth);
    /* Moderation on the BW CQ only; the LL CQ reports every completion. */
    CHECK(((fake_cq_t *)m->path[LLRDMA_PATH_BW].cq)->moderated);
    CHECK(((fake_cq_t *)m->path[LLRDMA_PATH_BW].cq)->mod_count == prof.bw.cq_mod_count);
    CHECK(!((fake_cq_t *)m->path[LLRDMA_PATH_LL].cq)->moderated);
    /* Receive buffers pre-posted: LL rq_depth + BW rq_depth. */
    CHECK((uint32_t)fake.nrecvs == prof.ll.rq_depth + prof.bw.rq_depth);
    /* ob1 limits from the plan: one eager BW fragment above the hint. */
    CHECK(m->super.btl_eager_limit >= 2 * 8192u);
    CHECK(0 == mca_btl_llrdma_module_granted(m, &dev, why, sizeof(why)));
    CHECK(1 == dev.cq_moderation_supported);
    finalize(m);
    CHECK(0 == fake_live_objects());
}

static void test_granted_less_is_reported(void)
{
    mca_btl_llrdma_module_t *m;
    llrdma_device_info_t dev;
    char why[512];

    fake_install();
    fake.max_inline = 100; /* 256 requested: the BTL asks again with 128, then 64 */
    fake.modify_cq_supported = 0;
    make_profile(8192, 0, 0);
    m = create();
    CHECK(NULL != m);
    if (NULL == m) {
        return;
    }
    CHECK(m->granted.inline_bytes[LLRDMA_PATH_LL] == 64);
    CHECK(m->lim.inline_max[LLRDMA_PATH_LL] == 64);
    CHECK(2 == mca_btl_llrdma_module_granted(m, &dev, why, sizeof(why)));
    CHECK(NULL != strstr(why, "ll inline 64 of 256"));
    CHECK(NULL != strstr(why, "CQ moderation"));
    CHECK(0 == dev.cq_moderation_supported);
    CHECK(64 == dev.max_inline_granted_ll);
    finalize(m);
    CHECK(0 == fake_live_objects());
}

static void test_lazy_connect_and_post_flags(void)
{
    mca_btl_llrdma_module_t *m;
    mca_btl_llrdma_endpoint_t *ep;
    int first, sig = 0, inl = 0;

    fake_install();
    reset_counters();
    make_profile(8192, 0, 0);
    m = create();
    ep = add_peer(m);
    CHECK(0 == fake.nsends);
    /* First send: queued, both connections started (lazily, together). */
    CHECK(OPAL_SUCCESS == send_size(m, ep, 8));
    CHECK(LLRDMA_EP_CONNECTING == ep->state);
    CHECK(1 == opal_list_get_size(&ep->pending[LLRDMA_PATH_LL]));
    progress(m, 8);
    CHECK(LLRDMA_EP_READY == ep->state);
    CHECK(NULL != ep->conn[LLRDMA_PATH_LL] && NULL != ep->conn[LLRDMA_PATH_BW]);
    CHECK(1 == fake.nsends);
    CHECK(fake.sends[0].flags & IBV_SEND_INLINE);
    CHECK(!(fake.sends[0].flags & IBV_SEND_SIGNALED));
    CHECK(1 == cb_calls); /* the queued inline fragment completed at post */

    /* A lone 1 KB send (above the inline size) is signalled, on the LL QP. */
    first = fake.nsends;
    CHECK(OPAL_SUCCESS == send_size(m, ep, 1024));
    CHECK(fake.sends[first].flags & IBV_SEND_SIGNALED);
    CHECK(!(fake.sends[first].flags & IBV_SEND_INLINE));
    CHECK(fake.sends[first].qp == ep->conn[LLRDMA_PATH_LL]->qp);
    /* 16 KB at hint 8 KB: one fragment on the BW QP, no rendezvous. */
    CHECK(OPAL_SUCCESS == send_size(m, ep, 16384));
    CHECK(fake.sends[first + 1].qp == ep->conn[LLRDMA_PATH_BW]->qp);
    CHECK(fake.sends[first + 1].length == 16384 + sizeof(mca_btl_llrdma_hdr_t));

    /* 48 inline sends: the cadence signals one in signal_interval. */
    first = fake.nsends;
    for (int i = 0; i < 48; ++i) {
        CHECK(1 == send_size(m, ep, 16));
    }
    for (int i = first; i < fake.nsends; ++i) {
        sig += !!(fake.sends[i].flags & IBV_SEND_SIGNALED);
        inl += !!(fake.sends[i].flags & IBV_SEND_INLINE);
    }
    CHECK(48 == inl);
    CHECK(sig >= 2 && sig <= 48 / (int)prof.ll.signal_interval + 1);
    CHECK(0 == err_calls);
    finalize(m);
    CHECK(0 == fake_live_objects());
}

static void complete_send(mca_btl_llrdma_module_t *m, int path, int index)
{
    fake_push_wc(m->path[path].cq, fake.sends[index].wr_id, IBV_WC_SUCCESS, 0,
                 fake.sends[index].qp->qp_num, IBV_WC_SEND);
}

static void test_pending_list_when_full(void)
{
    mca_btl_llrdma_module_t *m;
    mca_btl_llrdma_endpoint_t *ep;
    int posted, last_sig = -1;

    fake_install();
    reset_counters();
    make_profile(8192, 8, 8); /* shallow queues: 8 WRs each */
    m = create();
    ep = add_peer(m);
    CHECK(OPAL_SUCCESS == send_size(m, ep, 1000));
    progress(m, 8);
    CHECK(LLRDMA_EP_READY == ep->state);
    /* 20 more 1000-byte (non-inline) sends: 8 fit, the rest wait in order. */
    for (int i = 1; i <= 20; ++i) {
        mca_btl_base_descriptor_t *d = frag_of(m, ep, 1000);
        ((unsigned char *)d->des_segments[0].seg_addr.pval)[0] = (unsigned char)i;
        CHECK(OPAL_SUCCESS == m->super.btl_send(&m->super, ep, d, 0x41));
    }
    posted = fake.nsends;
    CHECK(8 == posted);
    CHECK(13 == opal_list_get_size(&ep->pending[LLRDMA_PATH_LL]));
    CHECK(0 == cb_calls);
    /* The LL queue being full does not hold back the BW path. */
    CHECK(OPAL_SUCCESS == send_size(m, ep, 20000));
    CHECK(9 == fake.nsends);
    CHECK(fake.sends[8].qp == ep->conn[LLRDMA_PATH_BW]->qp);
    /* Complete the last signalled LL WR: it retires everything before it. */
    for (int i = 0; i < 8; ++i) {
        if (fake.sends[i].flags & IBV_SEND_SIGNALED) {
            last_sig = i;
        }
    }
    CHECK(last_sig >= 0);
    complete_send(m, LLRDMA_PATH_LL, last_sig);
    progress(m, 1);
    CHECK(cb_calls == last_sig + 1);
    /* Freed slots took pending fragments, in their order. */
    CHECK(fake.nsends == 9 + last_sig + 1);
    for (int i = 9; i < fake.nsends; ++i) {
        unsigned char *payload = (unsigned char *)fake.sends[i].addr + sizeof(mca_btl_llrdma_hdr_t);
        CHECK(payload[0] == (unsigned char)(8 + (i - 9)));
    }
    /* Drain completely: every fragment gets exactly one callback. */
    for (int round = 0; round < 10 && opal_list_get_size(&ep->pending[LLRDMA_PATH_LL]) > 0;
         ++round) {
        int lastll = -1;
        for (int i = 0; i < fake.nsends; ++i) {
            if (fake.sends[i].qp == ep->conn[LLRDMA_PATH_LL]->qp &&
                (fake.sends[i].flags & IBV_SEND_SIGNALED)) {
                lastll = i;
            }
        }
        complete_send(m, LLRDMA_PATH_LL, lastll);
        progress(m, 1);
    }
    CHECK(0 == opal_list_get_size(&ep->pending[LLRDMA_PATH_LL]));
    CHECK(0 == err_calls);
    finalize(m);
    CHECK(0 == fake_live_objects());
}

static void test_receive_dispatch(void)
{
    mca_btl_llrdma_module_t *m;
    mca_btl_llrdma_frag_t *frag;
    int reposted;

    fake_install();
    reset_counters();
    make_profile(8192, 0, 0);
    m = create();
    mca_btl_base_active_message_trigger[0x41].cbfunc = on_recv;
    /* The first receive posted belongs to the LL SRQ. */
    frag = (mca_btl_llrdma_frag_t *)(uintptr_t)(fake.recvs[0] & ~(uint64_t)1);
    frag->hdr->tag = 0x41;
    frag->hdr->magic = MCA_BTL_LLRDMA_HDR_MAGIC;
    frag->hdr->len = 5;
    ((unsigned char *)(frag->hdr + 1))[0] = 0xab;
    reposted = fake.nrecvs;
    fake_push_wc(m->path[LLRDMA_PATH_LL].cq, fake.recvs[0], IBV_WC_SUCCESS,
                 5 + sizeof(mca_btl_llrdma_hdr_t), 77, IBV_WC_RECV);
    progress(m, 1);
    CHECK(1 == recv_calls);
    CHECK(5 == recv_len && 0xab == recv_first);
    CHECK(fake.nrecvs == reposted + 1); /* the buffer went straight back */
    /* A length that disagrees with the header is a fatal error, not data. */
    frag->hdr->len = 9;
    fake_push_wc(m->path[LLRDMA_PATH_LL].cq, fake.recvs[0], IBV_WC_SUCCESS,
                 5 + sizeof(mca_btl_llrdma_hdr_t), 77, IBV_WC_RECV);
    progress(m, 1);
    CHECK(1 == recv_calls);
    CHECK(1 == err_calls && NULL != strstr(err_text, "malformed"));
    mca_btl_base_active_message_trigger[0x41].cbfunc = NULL;
    finalize(m);
    CHECK(0 == fake_live_objects());
}

static void test_completion_error_reaches_ob1(void)
{
    mca_btl_llrdma_module_t *m;
    mca_btl_llrdma_endpoint_t *ep;

    fake_install();
    reset_counters();
    make_profile(8192, 8, 8);
    m = create();
    ep = add_peer(m);
    CHECK(OPAL_SUCCESS == send_size(m, ep, 1000));
    progress(m, 8);
    for (int i = 0; i < 12; ++i) {
        CHECK(OPAL_SUCCESS == send_size(m, ep, 1000)); /* 8 posted, 5 pending */
    }
    /* The peer died: the first WR fails, the rest are flushed. */
    fake_push_wc(m->path[LLRDMA_PATH_LL].cq, fake.sends[0].wr_id, IBV_WC_RETRY_EXC_ERR, 0,
                 fake.sends[0].qp->qp_num, IBV_WC_SEND);
    for (int i = 1; i < 8; ++i) {
        fake_push_wc(m->path[LLRDMA_PATH_LL].cq, fake.sends[i].wr_id, IBV_WC_WR_FLUSH_ERR, 0,
                     fake.sends[i].qp->qp_num, IBV_WC_SEND);
    }
    progress(m, 1);
    CHECK(1 == err_calls); /* reported once, naming the peer and the status */
    CHECK(err_proc == peer_proc);
    CHECK(NULL != strstr(err_text, "rank 1"));
    CHECK(NULL != strstr(err_text, "retry counter exceeded"));
    CHECK(13 == cb_calls && OPAL_SUCCESS != cb_last_status); /* no fragment lost silently */
    CHECK(LLRDMA_EP_FAILED == ep->state);
    CHECK(OPAL_ERR_UNREACH == send_size(m, ep, 8)); /* (the fragment is ob1's to free) */
    finalize(m);
    CHECK(0 == fake_live_objects());
}

static void test_post_failure_reaches_ob1(void)
{
    mca_btl_llrdma_module_t *m;
    mca_btl_llrdma_endpoint_t *ep;

    fake_install();
    reset_counters();
    make_profile(8192, 0, 0);
    m = create();
    ep = add_peer(m);
    fake.post_send_errno = ENOMEM;
    CHECK(OPAL_SUCCESS == send_size(m, ep, 8)); /* queued until connected */
    progress(m, 8);
    CHECK(1 == err_calls && NULL != strstr(err_text, "ibv_post_send failed"));
    CHECK(1 == cb_calls && OPAL_SUCCESS != cb_last_status);
    finalize(m);
    CHECK(0 == fake_live_objects());
}

static void test_connection_rejected(void)
{
    mca_btl_llrdma_module_t *m;
    mca_btl_llrdma_endpoint_t *ep;

    fake_install();
    reset_counters();
    make_profile(0, 0, 0); /* generic: one (BW) connection */
    m = create();
    ep = add_peer(m);
    fake.route_unreachable = 1;
    CHECK(OPAL_SUCCESS == send_size(m, ep, 8));
    progress(m, 4);
    CHECK(1 == err_calls && NULL != strstr(err_text, "RDMA_CM_EVENT_UNREACHABLE"));
    CHECK(1 == cb_calls && OPAL_SUCCESS != cb_last_status);
    finalize(m);
    CHECK(0 == fake_live_objects());
}

static void test_passive_connection(void)
{
    mca_btl_llrdma_module_t *m;
    mca_btl_llrdma_endpoint_t *ep;
    mca_btl_llrdma_conn_req_t req;

    fake_install();
    reset_counters();
    make_profile(8192, 0, 0);
    m = create();
    ep = add_peer(m);
    memset(&req, 0, sizeof(req));
    req.magic = MCA_BTL_LLRDMA_CONN_MAGIC;
    req.version = MCA_BTL_LLRDMA_CONN_VERSION;
    req.jobid = peer_proc->proc_name.jobid;
    req.vpid = peer_proc->proc_name.vpid;
    req.hint = 8192;
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        req.path = (uint8_t)p;
        (void)fake_connect_request(m->listen_id, &req, sizeof(req));
    }
    req.magic = 0xbad; /* a foreign request is rejected and cleaned up */
    (void)fake_connect_request(m->listen_id, &req, sizeof(req));
    progress(m, 70);
    CHECK(LLRDMA_EP_READY == ep->state);
    CHECK(8192 == ep->peer_hint);
    CHECK(1 == send_size(m, ep, 8)); /* inline, at once */
    CHECK(0 == err_calls);
    finalize(m);
    CHECK(0 == fake_live_objects());
}

static void test_peer_disconnect(void)
{
    mca_btl_llrdma_module_t *m;
    mca_btl_llrdma_endpoint_t *ep;
    mca_btl_llrdma_conn_t *old;
    int before;

    fake_install();
    reset_counters();
    make_profile(8192, 0, 0);
    m = create();
    ep = add_peer(m);
    CHECK(OPAL_SUCCESS == send_size(m, ep, 8));
    progress(m, 8);
    CHECK(LLRDMA_EP_READY == ep->state);
    /* The peer finalized: no error, the connection is dropped... */
    old = ep->conn[LLRDMA_PATH_LL];
    fake_push_event(old->id, RDMA_CM_EVENT_DISCONNECTED, 0);
    progress(m, 2);
    CHECK(0 == err_calls);
    CHECK(NULL == ep->conn[LLRDMA_PATH_LL]);
    CHECK(LLRDMA_EP_IDLE == ep->state);
    /* ...and a later send reconnects instead of hanging. */
    before = fake.nsends;
    CHECK(OPAL_SUCCESS == send_size(m, ep, 8));
    progress(m, 8);
    CHECK(NULL != ep->conn[LLRDMA_PATH_LL] && old != ep->conn[LLRDMA_PATH_LL]);
    CHECK(fake.nsends == before + 1);
    /* A WR the dead peer never acknowledged comes back flushed: reported. */
    CHECK(OPAL_SUCCESS == send_size(m, ep, 1000));
    fake_push_event(ep->conn[LLRDMA_PATH_LL]->id, RDMA_CM_EVENT_DISCONNECTED, 0);
    fake_push_wc(m->path[LLRDMA_PATH_LL].cq, fake.sends[fake.nsends - 1].wr_id, IBV_WC_WR_FLUSH_ERR,
                 0, fake.sends[fake.nsends - 1].qp->qp_num, IBV_WC_SEND);
    progress(m, 2);
    CHECK(1 == err_calls && NULL != strstr(err_text, "Flushed"));
    finalize(m);
    CHECK(0 == fake_live_objects());
}

/* Fail the Nth seam call of module creation for every N: each failure must
 * leave nothing behind. */
static void test_every_create_failure(void)
{
    long n;
    int ok = 0;

    make_profile(8192, 0, 0);
    for (n = 1; n < 1000 && !ok; ++n) {
        mca_btl_llrdma_module_t *m;
        fake_install();
        fake.fail_at = n;
        m = create();
        if (NULL == m) {
            CHECK(fake.failed);
            CHECK(0 == fake_live_objects());
        } else {
            ok = !fake.failed;
            finalize(m);
            CHECK(0 == fake_live_objects());
        }
    }
    CHECK(ok);
    printf("# module creation: %ld failure points, each cleaned up\n", n - 2);
}

/* Fail the Nth seam call after creation, during connect, post, poll and
 * receive: the failure must reach the error callback or be absorbed (a
 * failed probe of the CM channel is retried), never leak. */
static void test_every_data_path_failure(void)
{
    long n, base;
    int ok = 0, reported = 0, accepted;

    make_profile(8192, 8, 8);
    for (n = 1; n < 2000 && !ok; ++n) {
        mca_btl_llrdma_module_t *m;
        mca_btl_llrdma_endpoint_t *ep;
        fake_install();
        reset_counters();
        m = create();
        ep = add_peer(m);
        base = fake.calls;
        fake.fail_at = base + n;
        accepted = 0;
        accepted += OPAL_SUCCESS == send_size(m, ep, 8);
        accepted += OPAL_SUCCESS == send_size(m, ep, 1000);
        accepted += OPAL_SUCCESS == send_size(m, ep, 20000);
        progress(m, 12);
        for (int i = 0; i < fake.nsends; ++i) {
            if (fake.sends[i].flags & IBV_SEND_SIGNALED) {
                complete_send(m,
                              fake.sends[i].qp == ep->conn[LLRDMA_PATH_LL]->qp ? LLRDMA_PATH_LL
                                                                               : LLRDMA_PATH_BW,
                              i);
            }
        }
        progress(m, 4);
        if (!fake.failed) {
            ok = 1;
            CHECK(0 == err_calls);
            CHECK(3 == cb_calls);
        } else if (err_calls > 0) {
            ++reported;
        } else {
            /* Absorbed (e.g. a failed look at the CM channel): then nothing may be lost. */
            CHECK(accepted == cb_calls);
            if (accepted != cb_calls) {
                printf("#   after failing %s (call %ld): %d of %d sends completed\n",
                       fake.failed_fn, n, cb_calls, accepted);
            }
        }
        finalize(m);
        CHECK(0 == fake_live_objects());
    }
    CHECK(ok);
    printf("# data path: %ld failure points, %d reported to ob1, none leaked\n", n - 2, reported);
}

int main(int argc, char **argv)
{
    opal_process_name_t name = {.jobid = 7, .vpid = 1};
    int saved_stderr, devnull;

    setenv("LLRDMA_HELPDIR", LLRDMA_TEST_SRCDIR "/common", 1);
    if (OPAL_SUCCESS != opal_init_util(&argc, &argv)) {
        fprintf(stderr, "opal_init_util failed\n");
        return 2;
    }
    peer_proc = OBJ_NEW(opal_proc_t);
    peer_proc->proc_name = name;
    mca_btl_llrdma_component.cm_timeout_ms = 100;
    mca_btl_llrdma_component.cm_poll_every = 1;

    test_profile_to_qp_attributes();
    test_granted_less_is_reported();
    test_lazy_connect_and_post_flags();
    test_pending_list_when_full();
    test_receive_dispatch();
    test_completion_error_reaches_ob1();
    test_post_failure_reaches_ob1();
    test_connection_rejected();
    test_passive_connection();
    test_peer_disconnect();
    /* The exhaustive loops print one user-facing error per failure: keep the log short. */
    fflush(stderr);
    saved_stderr = dup(2);
    devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    test_every_create_failure();
    test_every_data_path_failure();
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    close(devnull);

    fake_uninstall();
    OBJ_RELEASE(peer_proc);
    opal_finalize_util();
    printf("%s: %d checks, %d failed\n", failures ? "FAIL" : "PASS", checks, failures);
    return failures ? 1 : 0;
}
