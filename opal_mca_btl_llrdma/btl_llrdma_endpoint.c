/*
 * btl/llrdma endpoints: the post path with its ordered pending lists, and
 * connection set-up over librdmacm (see btl_llrdma_endpoint.h and
 * docs/btl-design.md).
 */
#include "opal_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/mca/pmix/pmix.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_llrdma.h"

/* ------------------------------------------------------------ classes */

static void conn_construct(mca_btl_llrdma_conn_t *c)
{
    c->endpoint = NULL;
    c->id = NULL;
    c->qp = NULL;
    c->ring = NULL;
    c->ring_head = c->ring_tail = 0;
    c->inline_max = 0;
    memset(&c->sq, 0, sizeof(c->sq));
}

static void conn_destruct(mca_btl_llrdma_conn_t *c)
{
    free(c->ring);
    c->ring = NULL;
}

OBJ_CLASS_INSTANCE(mca_btl_llrdma_conn_t, opal_list_item_t, conn_construct, conn_destruct);

static void endpoint_construct(mca_btl_llrdma_endpoint_t *ep)
{
    ep->module = NULL;
    ep->proc = NULL;
    ep->state = LLRDMA_EP_IDLE;
    ep->peer_hint = 0;
    ep->in_add_procs = 0;
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        ep->conn[p] = NULL;
        OBJ_CONSTRUCT(&ep->pending[p], opal_list_t);
    }
}

static void endpoint_destruct(mca_btl_llrdma_endpoint_t *ep)
{
    /* Finalize: queued fragments go back to their pools unsent. */
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        opal_list_item_t *item;
        while (NULL != (item = opal_list_remove_first(&ep->pending[p]))) {
            mca_btl_llrdma_pool_put((mca_btl_llrdma_frag_t *)item);
        }
        OBJ_DESTRUCT(&ep->pending[p]);
    }
    if (NULL != ep->proc) {
        OBJ_RELEASE(ep->proc);
    }
}

OBJ_CLASS_INSTANCE(mca_btl_llrdma_endpoint_t, opal_list_item_t, endpoint_construct,
                   endpoint_destruct);

/* ----------------------------------------------------------- lookup */

static int same_name(const opal_process_name_t *a, const opal_process_name_t *b)
{
    return a->jobid == b->jobid && a->vpid == b->vpid;
}

static mca_btl_llrdma_endpoint_t *endpoint_create(mca_btl_llrdma_module_t *m, opal_proc_t *proc)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    mca_btl_llrdma_addr_t *addrs = NULL;
    mca_btl_llrdma_endpoint_t *ep;
    size_t size = 0;
    int rc, index = 0, n;

    OPAL_MODEX_RECV(rc, &c->super.btl_version, &proc->proc_name, (void **)&addrs, &size);
    if (OPAL_SUCCESS != rc || NULL == addrs || size < sizeof(*addrs)) {
        free(addrs);
        return NULL;
    }
    /* Spread this rank's modules over the peer's: module i talks to peer module i mod n. */
    n = (int)(size / sizeof(*addrs));
    for (int i = 0; i < c->nmodules; ++i) {
        if (c->modules[i] == m) {
            index = i % n;
        }
    }
    ep = OBJ_NEW(mca_btl_llrdma_endpoint_t);
    if (NULL == ep) {
        free(addrs);
        return NULL;
    }
    ep->module = m;
    ep->proc = proc;
    OBJ_RETAIN(proc);
    ep->addr = addrs[index];
    free(addrs);
    opal_list_append(&m->endpoints, &ep->super);
    return ep;
}

mca_btl_llrdma_endpoint_t *mca_btl_llrdma_endpoint_lookup(mca_btl_llrdma_module_t *m,
                                                          const opal_process_name_t *name,
                                                          int create)
{
    mca_btl_llrdma_endpoint_t *ep;
    opal_proc_t *proc;

    OPAL_LIST_FOREACH(ep, &m->endpoints, mca_btl_llrdma_endpoint_t)
    {
        if (same_name(&ep->proc->proc_name, name)) {
            return ep;
        }
    }
    if (!create || NULL == opal_proc_for_name) {
        return NULL;
    }
    proc = opal_proc_for_name(*name);
    return NULL == proc ? NULL : endpoint_create(m, proc);
}

/* ------------------------------------------------------------ errors */

void mca_btl_llrdma_frag_complete(mca_btl_llrdma_frag_t *frag, int status)
{
    mca_btl_base_descriptor_t *des = &frag->base;
    int own = des->des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    mca_btl_llrdma_module_t *m = frag->pool->module;

    if ((des->des_flags & MCA_BTL_DES_SEND_ALWAYS_CALLBACK) && NULL != des->des_cbfunc) {
        des->des_cbfunc(&m->super, frag->endpoint, des, status);
    }
    if (own) {
        mca_btl_llrdma_pool_put(frag);
    }
}

void mca_btl_llrdma_endpoint_fail(mca_btl_llrdma_endpoint_t *ep, const char *what,
                                  const char *status)
{
    mca_btl_llrdma_module_t *m = ep->module;
    char detail[768];

    if (LLRDMA_EP_FAILED == ep->state) {
        return;
    }
    ep->state = LLRDMA_EP_FAILED;
    snprintf(detail, sizeof(detail),
             "btl/llrdma: %s with peer rank %u (%s) on host %s, local device %s:%d: %s", what,
             (unsigned)ep->proc->proc_name.vpid, OPAL_NAME_PRINT(ep->proc->proc_name),
             NULL != ep->proc->proc_hostname ? ep->proc->proc_hostname : "?", m->port.dev,
             m->port.port, status);
    /* Report before failing the fragments: ob1 aborts on the first failed one. */
    mca_btl_llrdma_module_fatal(m, ep->proc, detail);
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        opal_list_item_t *item;
        while (NULL != (item = opal_list_remove_first(&ep->pending[p]))) {
            mca_btl_llrdma_frag_complete((mca_btl_llrdma_frag_t *)item, OPAL_ERR_UNREACH);
        }
    }
}

/* ---------------------------------------------------------- post path */

/* Post one fragment.  Returns 1 when it went inline (complete now), 0 when
 * a completion will follow, or an error after failing the endpoint. */
static int post_frag(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn,
                     mca_btl_llrdma_frag_t *frag, int more_queued)
{
    uint32_t wire = (uint32_t)(sizeof(mca_btl_llrdma_hdr_t) + frag->segment.seg_len);
    int inl = wire <= conn->inline_max;
    mca_btl_llrdma_wr_t *e = &conn->ring[conn->ring_head];
    struct ibv_sge sge = {.addr = (uintptr_t)frag->hdr, .length = wire, .lkey = frag->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    int rc;

    frag->hdr->tag = frag->tag;
    frag->hdr->flags = 0;
    frag->hdr->magic = MCA_BTL_LLRDMA_HDR_MAGIC;
    frag->hdr->len = (uint32_t)frag->segment.seg_len;

    memset(&wr, 0, sizeof(wr));
    wr.wr_id = (uintptr_t)e;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = inl ? IBV_SEND_INLINE : 0;
    if (llrdma_sq_post(&conn->sq, !inl, more_queued)) {
        wr.send_flags |= IBV_SEND_SIGNALED;
    }
    e->conn = conn;
    e->frag = inl ? NULL : frag;
    if (!inl) {
        /* A completion will come later: ob1 must hear about it. */
        frag->base.des_flags |= MCA_BTL_DES_SEND_ALWAYS_CALLBACK;
    }
    rc = mca_btl_llrdma_verbs.post_send(conn->qp, &wr, &bad);
    if (0 != rc) {
        e->frag = NULL;
        llrdma_sq_retire(&conn->sq, 1);
        mca_btl_llrdma_endpoint_fail(ep, "ibv_post_send failed", strerror(rc));
        return OPAL_ERR_UNREACH;
    }
    conn->ring_head = (conn->ring_head + 1) % conn->sq.depth;
    return inl ? 1 : 0;
}

static void drain_path(mca_btl_llrdma_endpoint_t *ep, int p)
{
    mca_btl_llrdma_conn_t *conn = ep->conn[p];

    while (NULL != conn && LLRDMA_CONN_ESTABLISHED == conn->state &&
           LLRDMA_EP_FAILED != ep->state && llrdma_sq_free_slots(&conn->sq) > 0) {
        mca_btl_llrdma_frag_t *frag =
            (mca_btl_llrdma_frag_t *)opal_list_remove_first(&ep->pending[p]);
        int more, rc;
        if (NULL == frag) {
            return;
        }
        more = !opal_list_is_empty(&ep->pending[p]) && llrdma_sq_free_slots(&conn->sq) > 1;
        rc = post_frag(ep, conn, frag, more);
        if (0 != rc) {
            /* Inline (done) or failed: either way ob1 hears about it now. */
            mca_btl_llrdma_frag_complete(frag, 1 == rc ? OPAL_SUCCESS : rc);
        }
        conn = ep->conn[p]; /* a callback may have changed the endpoint */
    }
}

void mca_btl_llrdma_endpoint_drain(mca_btl_llrdma_endpoint_t *ep)
{
    /* Low latency first: small messages never wait behind bulk ones. */
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        drain_path(ep, p);
    }
}

int mca_btl_llrdma_endpoint_send(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_frag_t *frag)
{
    mca_btl_llrdma_module_t *m = ep->module;
    int p = llrdma_btl_path_for(&m->lim, frag->segment.seg_len);
    mca_btl_llrdma_conn_t *conn;

    if (LLRDMA_EP_FAILED == ep->state) {
        return OPAL_ERR_UNREACH;
    }
    if (p < 0 || !m->path_used[p]) {
        return OPAL_ERR_BAD_PARAM;
    }
    frag->endpoint = ep;
    conn = ep->conn[p];
    if (NULL != conn && LLRDMA_CONN_ESTABLISHED == conn->state &&
        opal_list_is_empty(&ep->pending[p]) && llrdma_sq_free_slots(&conn->sq) > 0) {
        return post_frag(ep, conn, frag, 0);
    }
    /* Queue full, not connected yet, or older fragments waiting: keep the order. */
    frag->base.des_flags |= MCA_BTL_DES_SEND_ALWAYS_CALLBACK;
    opal_list_append(&ep->pending[p], &frag->base.super.super);
    if (NULL == conn && LLRDMA_EP_IDLE == ep->state) {
        int rc = mca_btl_llrdma_endpoint_connect(ep);
        if (OPAL_SUCCESS != rc) {
            opal_list_remove_item(&ep->pending[p], &frag->base.super.super);
            mca_btl_llrdma_endpoint_fail(ep, "starting a connection failed", "out of resources");
            return rc;
        }
    }
    return OPAL_SUCCESS;
}

void mca_btl_llrdma_conn_send_done(mca_btl_llrdma_wr_t *wr, enum ibv_wc_status status)
{
    mca_btl_llrdma_conn_t *conn = wr->conn;
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;
    uint32_t idx = (uint32_t)(wr - conn->ring), n = 0;
    int ostatus = IBV_WC_SUCCESS == status ? OPAL_SUCCESS : OPAL_ERROR;

    if (IBV_WC_SUCCESS != status) {
        mca_btl_llrdma_endpoint_fail(ep, "a send failed",
                                     mca_btl_llrdma_verbs.wc_status_str(status));
    }
    /* A completion retires its WR and every unsignalled one before it. */
    for (;;) {
        mca_btl_llrdma_wr_t *e = &conn->ring[conn->ring_tail];
        mca_btl_llrdma_frag_t *frag = e->frag;
        int last = conn->ring_tail == idx;
        e->frag = NULL;
        conn->ring_tail = (conn->ring_tail + 1) % conn->sq.depth;
        ++n;
        if (NULL != frag) {
            mca_btl_llrdma_frag_complete(frag, ostatus);
        }
        if (last || n >= conn->sq.depth) {
            break;
        }
    }
    llrdma_sq_retire(&conn->sq, n);
    drain_path(ep, conn->path);
}

/* -------------------------------------------------------- connections */

void mca_btl_llrdma_conn_destroy(mca_btl_llrdma_conn_t *conn)
{
    if (NULL != conn->id) {
        if (LLRDMA_CONN_ESTABLISHED == conn->state) {
            (void)mca_btl_llrdma_verbs.cm_disconnect(conn->id);
        }
        if (NULL != conn->qp) {
            mca_btl_llrdma_verbs.cm_destroy_qp(conn->id);
            conn->qp = NULL;
            mca_btl_llrdma_module_release_cq(conn->endpoint->module, conn->path);
        }
        (void)mca_btl_llrdma_verbs.cm_destroy_id(conn->id);
        conn->id = NULL;
    }
    conn->state = LLRDMA_CONN_CLOSED;
}

/* Create the QP (and its ring) on conn->id with the path's attributes. */
static int conn_setup_qp(mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_module_t *m = conn->endpoint->module;
    struct ibv_qp_init_attr attr, init;
    struct ibv_qp_attr qa;
    uint32_t depth;
    int p = conn->path;

    if (OPAL_SUCCESS != mca_btl_llrdma_module_reserve_cq(m, p)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    mca_btl_llrdma_module_qp_attr(m, p, &attr);
    if (0 != mca_btl_llrdma_verbs.cm_create_qp(conn->id, m->pd, &attr)) {
        goto fail_release_cq;
    }
    conn->qp = conn->id->qp;
    conn->inline_max = m->lim.inline_max[p];
    depth = m->lim.sq_depth[p];
    if (0 == mca_btl_llrdma_verbs.query_qp(conn->qp, &qa, IBV_QP_CAP, &init)) {
        /* The probe QP promised this much; a real one granting less wins. */
        if (init.cap.max_inline_data < conn->inline_max) {
            conn->inline_max = init.cap.max_inline_data;
        }
        if (init.cap.max_send_wr < depth) {
            depth = init.cap.max_send_wr;
        }
    }
    conn->ring = calloc(depth, sizeof(*conn->ring));
    if (NULL == conn->ring) {
        goto fail_destroy_qp;
    }
    llrdma_sq_init(&conn->sq, depth,
                   (LLRDMA_PATH_LL == p ? m->profile->ll : m->profile->bw).signal_interval);
    conn->ring_head = conn->ring_tail = 0;
    return OPAL_SUCCESS;

fail_destroy_qp:
    mca_btl_llrdma_verbs.cm_destroy_qp(conn->id);
    conn->qp = NULL;
fail_release_cq:
    mca_btl_llrdma_module_release_cq(m, p);
    return OPAL_ERR_OUT_OF_RESOURCE;
}

static void fill_conn_param(mca_btl_llrdma_conn_t *conn, mca_btl_llrdma_conn_req_t *req,
                            struct rdma_conn_param *param)
{
    opal_proc_t *me = opal_proc_local_get();

    memset(req, 0, sizeof(*req));
    req->magic = MCA_BTL_LLRDMA_CONN_MAGIC;
    req->version = MCA_BTL_LLRDMA_CONN_VERSION;
    req->path = (uint8_t)conn->path;
    req->jobid = me->proc_name.jobid;
    req->vpid = me->proc_name.vpid;
    req->hint = conn->endpoint->module->profile->hint;
    memset(param, 0, sizeof(*param));
    param->private_data = req;
    param->private_data_len = sizeof(*req);
    param->retry_count = 7;
    /* Receivers repost buffers from progress; an empty SRQ makes the sender
     * wait (RNR retry), never fail. */
    param->rnr_retry_count = 7;
}

static int conn_start_active(mca_btl_llrdma_endpoint_t *ep, int p)
{
    mca_btl_llrdma_module_t *m = ep->module;
    mca_btl_llrdma_conn_t *conn = OBJ_NEW(mca_btl_llrdma_conn_t);
    struct sockaddr_in src, dst;

    if (NULL == conn) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    conn->endpoint = ep;
    conn->path = p;
    conn->active = 1;
    conn->state = LLRDMA_CONN_RESOLVING;
    if (0 != mca_btl_llrdma_verbs.cm_create_id(m->cm_channel, &conn->id, conn, RDMA_PS_TCP)) {
        goto fail_release_conn;
    }
    memset(&src, 0, sizeof(src));
    src.sin_family = AF_INET;
    src.sin_addr = m->port.ipv4;
    memset(&dst, 0, sizeof(dst));
    dst.sin_family = AF_INET;
    dst.sin_addr.s_addr = ep->addr.ipv4;
    dst.sin_port = ep->addr.cm_port;
    if (0 != mca_btl_llrdma_verbs.cm_resolve_addr(conn->id, (struct sockaddr *)&src,
                                                  (struct sockaddr *)&dst,
                                                  mca_btl_llrdma_component.cm_timeout_ms)) {
        goto fail_destroy_id;
    }
    opal_list_append(&m->conns, &conn->super);
    ++m->connecting;
    return OPAL_SUCCESS;

fail_destroy_id:
    (void)mca_btl_llrdma_verbs.cm_destroy_id(conn->id);
    conn->id = NULL;
fail_release_conn:
    OBJ_RELEASE(conn);
    return OPAL_ERR_OUT_OF_RESOURCE;
}

int mca_btl_llrdma_endpoint_connect(mca_btl_llrdma_endpoint_t *ep)
{
    mca_btl_llrdma_module_t *m = ep->module;

    if (LLRDMA_EP_IDLE != ep->state) {
        return OPAL_SUCCESS;
    }
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        if (m->path_used[p] && NULL == ep->conn[p]) {
            int rc = conn_start_active(ep, p);
            if (OPAL_SUCCESS != rc) {
                return rc;
            }
        }
    }
    ep->state = LLRDMA_EP_CONNECTING;
    opal_output_verbose(20, mca_btl_llrdma_component.output, "btl:llrdma: connecting to %s on %s",
                        OPAL_NAME_PRINT(ep->proc->proc_name), ep->addr.dev);
    return OPAL_SUCCESS;
}

/* The set-up of `conn` failed; a connection the peer made to us may still
 * carry the path, else the peer is unreachable. */
static void conn_setup_failed(mca_btl_llrdma_conn_t *conn, const char *what, const char *status)
{
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;
    mca_btl_llrdma_module_t *m = ep->module;

    --m->connecting;
    /* Nothing was posted on it yet, so it can go now. */
    mca_btl_llrdma_conn_destroy(conn);
    if (NULL == ep->conn[conn->path]) {
        mca_btl_llrdma_endpoint_fail(ep, what, status);
    }
}

static void conn_established(mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;
    mca_btl_llrdma_module_t *m = ep->module;
    int ready = 1;

    --m->connecting;
    conn->state = LLRDMA_CONN_ESTABLISHED;
    if (NULL == ep->conn[conn->path]) {
        ep->conn[conn->path] = conn;
    }
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        if (m->path_used[p] && NULL == ep->conn[p]) {
            ready = 0;
        }
    }
    if (ready && LLRDMA_EP_FAILED != ep->state) {
        ep->state = LLRDMA_EP_READY;
    }
    opal_output_verbose(20, mca_btl_llrdma_component.output,
                        "btl:llrdma: %s connection %s %s established (qp %u)",
                        conn->path == LLRDMA_PATH_LL ? "ll" : "bw", conn->active ? "to" : "from",
                        OPAL_NAME_PRINT(ep->proc->proc_name), conn->qp->qp_num);
    drain_path(ep, conn->path);
}

static void conn_disconnected(mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;
    int p = conn->path;

    /* Keep the QP until finalize: flushed WRs still point into its ring. */
    conn->state = LLRDMA_CONN_CLOSED;
    if (ep->conn[p] != conn) {
        return;
    }
    ep->conn[p] = NULL;
    /* WRs the peer never received come back flushed and fail the endpoint;
     * inline ones it did receive leave no trace, so nothing else is judged
     * here. */
    if (LLRDMA_EP_FAILED != ep->state) {
        ep->state = LLRDMA_EP_IDLE;
        /* A peer that finalized does not come back; queued fragments try to
         * reconnect and fail loudly if it is gone. */
        if (!opal_list_is_empty(&ep->pending[p])) {
            (void)mca_btl_llrdma_endpoint_connect(ep);
        }
    }
}

static void handle_connect_request(mca_btl_llrdma_module_t *m, struct rdma_cm_id *id,
                                   const mca_btl_llrdma_conn_req_t *req)
{
    mca_btl_llrdma_endpoint_t *ep;
    mca_btl_llrdma_conn_t *conn;
    mca_btl_llrdma_conn_req_t mine;
    struct rdma_conn_param param;
    opal_process_name_t name;

    if (NULL == req || MCA_BTL_LLRDMA_CONN_MAGIC != req->magic ||
        MCA_BTL_LLRDMA_CONN_VERSION != req->version || req->path >= LLRDMA_NPATHS ||
        !m->path_used[req->path]) {
        opal_output_verbose(10, mca_btl_llrdma_component.output,
                            "btl:llrdma: rejecting a foreign or mismatched connection request");
        goto reject;
    }
    name.jobid = req->jobid;
    name.vpid = req->vpid;
    ep = mca_btl_llrdma_endpoint_lookup(m, &name, 1);
    if (NULL == ep || LLRDMA_EP_FAILED == ep->state) {
        goto reject;
    }
    ep->peer_hint = req->hint;
    if (req->hint != m->profile->hint) {
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: peer %s uses size hint %llu, this rank %llu; each side "
                            "sends with its own profile",
                            OPAL_NAME_PRINT(name), (unsigned long long)req->hint,
                            (unsigned long long)m->profile->hint);
    }
    conn = OBJ_NEW(mca_btl_llrdma_conn_t);
    if (NULL == conn) {
        goto reject;
    }
    conn->endpoint = ep;
    conn->path = req->path;
    conn->active = 0;
    conn->state = LLRDMA_CONN_CONNECTING;
    conn->id = id;
    id->context = conn;
    if (OPAL_SUCCESS != conn_setup_qp(conn)) {
        goto reject_release_conn;
    }
    fill_conn_param(conn, &mine, &param);
    if (0 != mca_btl_llrdma_verbs.cm_accept(id, &param)) {
        goto destroy_qp;
    }
    opal_list_append(&m->conns, &conn->super);
    ++m->connecting;
    return;

destroy_qp:
    mca_btl_llrdma_verbs.cm_destroy_qp(id);
    mca_btl_llrdma_module_release_cq(m, conn->path);
reject_release_conn:
    conn->id = NULL;
    OBJ_RELEASE(conn);
reject:
    (void)mca_btl_llrdma_verbs.cm_reject(id, NULL, 0);
    (void)mca_btl_llrdma_verbs.cm_destroy_id(id);
}

int mca_btl_llrdma_cm_progress(mca_btl_llrdma_module_t *m)
{
    struct rdma_cm_event *ev;
    int count = 0;

    while (0 == mca_btl_llrdma_verbs.cm_get_event(m->cm_channel, &ev)) {
        enum rdma_cm_event_type type = ev->event;
        struct rdma_cm_id *id = ev->id;
        int status = ev->status;
        mca_btl_llrdma_conn_req_t req;
        int have_req = 0;
        mca_btl_llrdma_conn_t *conn;
        char why[160];

        if (RDMA_CM_EVENT_CONNECT_REQUEST == type &&
            ev->param.conn.private_data_len >= sizeof(req)) {
            memcpy(&req, ev->param.conn.private_data, sizeof(req));
            have_req = 1;
        }
        /* Ack first: destroying an id waits for its events to be acked. */
        (void)mca_btl_llrdma_verbs.cm_ack_event(ev);
        ++count;

        if (RDMA_CM_EVENT_CONNECT_REQUEST == type) {
            handle_connect_request(m, id, have_req ? &req : NULL);
            continue;
        }
        if (RDMA_CM_EVENT_DEVICE_REMOVAL == type) {
            mca_btl_llrdma_module_fatal(m, NULL, "btl/llrdma: the RDMA device was removed");
            continue;
        }
        conn = (mca_btl_llrdma_conn_t *)id->context;
        if (NULL == conn || (void *)conn == (void *)m || LLRDMA_CONN_CLOSED == conn->state) {
            continue; /* the listener, or a connection already given up */
        }
        snprintf(why, sizeof(why), "%s (status %d)", mca_btl_llrdma_verbs.cm_event_str(type),
                 status);
        switch (type) {
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            if (0 !=
                mca_btl_llrdma_verbs.cm_resolve_route(id, mca_btl_llrdma_component.cm_timeout_ms)) {
                conn_setup_failed(conn, "rdma_resolve_route failed", strerror(errno));
            }
            break;
        case RDMA_CM_EVENT_ROUTE_RESOLVED: {
            struct rdma_conn_param param;
            mca_btl_llrdma_conn_req_t mine;
            if (OPAL_SUCCESS != conn_setup_qp(conn)) {
                conn_setup_failed(conn, "creating a queue pair failed", "out of resources");
                break;
            }
            conn->state = LLRDMA_CONN_CONNECTING;
            fill_conn_param(conn, &mine, &param);
            if (0 != mca_btl_llrdma_verbs.cm_connect(id, &param)) {
                conn_setup_failed(conn, "rdma_connect failed", strerror(errno));
            }
            break;
        }
        case RDMA_CM_EVENT_ESTABLISHED:
            conn_established(conn);
            break;
        case RDMA_CM_EVENT_ADDR_ERROR:
        case RDMA_CM_EVENT_ROUTE_ERROR:
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_REJECTED:
            if (LLRDMA_CONN_ESTABLISHED != conn->state) {
                conn_setup_failed(conn, "connection set-up failed", why);
            }
            break;
        case RDMA_CM_EVENT_DISCONNECTED:
            if (LLRDMA_CONN_ESTABLISHED == conn->state) {
                conn_disconnected(conn);
            } else {
                conn_setup_failed(conn, "connection set-up failed", why);
            }
            break;
        default:
            break; /* TIMEWAIT_EXIT, ADDR_CHANGE, ...: nothing to do */
        }
    }
    return count;
}
