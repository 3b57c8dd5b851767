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
#include <time.h>

#include "opal/mca/pmix/pmix.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_llrdma.h"
#include "btl_llrdma_rdma.h"
#include "llrdma_reach.h"

/* ------------------------------------------------------------ classes */

static void conn_construct(mca_btl_llrdma_conn_t *c)
{
    c->endpoint = NULL;
    c->id = NULL;
    c->qp = NULL;
    c->ring = NULL;
    c->ring_head = c->ring_tail = 0;
    c->inline_max = 0;
    c->superseded = 0;
    c->cq_slab = -1;
    c->cq_need = 0;
    c->allot = 0;
    c->peer_frag_max = 0;
    c->credit_buf = NULL;
    c->credit_mr = NULL;
    c->peer_credit_addr = 0;
    c->peer_credit_rkey = 0;
    c->credit_owed = 0;
    c->stall_since = 0;
    c->stall_reported = 0;
    c->rd_atomic = c->dest_rd_atomic = 0;
    memset(&c->sq, 0, sizeof(c->sq));
    memset(&c->credit, 0, sizeof(c->credit));
}

static void conn_destruct(mca_btl_llrdma_conn_t *c)
{
    /* Puts and gets still posted at finalize are released, not called back. */
    for (uint32_t i = 0; NULL != c->ring && i < c->sq.depth; ++i) {
        if (NULL != c->ring[i].rdma) {
            OBJ_RELEASE(c->ring[i].rdma);
        }
    }
    free(c->ring);
    c->ring = NULL;
    free(c->credit_buf);
    c->credit_buf = NULL;
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
        ep->use_path[p] = 0;
        ep->frag_max[p] = 0;
        ep->first_try_ms[p] = ep->retry_at_ms[p] = 0;
        ep->attempts[p] = ep->peer_waits[p] = 0;
        OBJ_CONSTRUCT(&ep->pending[p], opal_list_t);
    }
    OBJ_CONSTRUCT(&ep->rdma_pending, opal_list_t);
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
    mca_btl_llrdma_rdma_drop_pending(ep);
    OBJ_DESTRUCT(&ep->rdma_pending);
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

/* Which of the peer's published ports module m talks to; -1: none.  Both
 * processes compute the same one-to-one pairing (same subnet first, then
 * same link layer), ordered by process name, so both ends agree. */
static int peer_port_for(mca_btl_llrdma_module_t *m, const mca_btl_llrdma_addr_t *addrs, int n,
                         const opal_process_name_t *peer)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    llrdma_reach_addr_t mine[MCA_BTL_LLRDMA_MAX_PORTS], theirs[MCA_BTL_LLRDMA_MAX_PORTS];
    const opal_process_name_t *self = &opal_proc_local_get()->proc_name;
    uint64_t a = ((uint64_t)self->jobid << 32) | self->vpid;
    uint64_t b = ((uint64_t)peer->jobid << 32) | peer->vpid;
    int nmine = 0, me = -1;

    for (int i = 0; i < c->nmodules && i < MCA_BTL_LLRDMA_MAX_PORTS; ++i) {
        const mca_btl_llrdma_addr_t *x = &c->modules[i]->addr;
        mine[nmine] = (llrdma_reach_addr_t){ntohl(x->ipv4), x->prefix_len, x->link_layer};
        if (c->modules[i] == m) {
            me = nmine;
        }
        ++nmine;
    }
    if (me < 0) { /* a module the component does not list (unit tests): on its own */
        mine[0] =
            (llrdma_reach_addr_t){ntohl(m->addr.ipv4), m->addr.prefix_len, m->addr.link_layer};
        nmine = 1;
        me = 0;
    }
    n = n < MCA_BTL_LLRDMA_MAX_PORTS ? n : MCA_BTL_LLRDMA_MAX_PORTS;
    for (int j = 0; j < n; ++j) {
        theirs[j] =
            (llrdma_reach_addr_t){ntohl(addrs[j].ipv4), addrs[j].prefix_len, addrs[j].link_layer};
    }
    return llrdma_reach_pick(mine, nmine, theirs, n, me, a < b);
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
    n = (int)(size / sizeof(*addrs));
    index = peer_port_for(m, addrs, n, &proc->proc_name);
    if (index < 0) {
        opal_output_verbose(10, c->output, "btl:llrdma: %s:%d pairs with no port of %s",
                            m->port.dev, m->port.port, OPAL_NAME_PRINT(proc->proc_name));
        free(addrs);
        return NULL;
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
    ep->peer_hint = ep->addr.hint;
    /* Each side receives with its own profile: send what the peer takes. */
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        uint32_t mine = m->path_used[p] ? m->lim.frag_max[p] : 0;
        uint32_t theirs = ep->addr.frag_max[p];
        ep->use_path[p] = 0 != mine && 0 != theirs;
        ep->frag_max[p] = ep->use_path[p] ? (mine < theirs ? mine : theirs) : 0;
    }
    if (!ep->use_path[LLRDMA_PATH_BW]) {
        OBJ_RELEASE(ep);
        return NULL; /* a foreign or broken record: not reachable */
    }
    if (ep->peer_hint != m->profile->hint) {
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: %s uses size hint %llu, this rank %llu: low-latency "
                            "path %s, fragments up to %u/%u bytes (ll/bw)",
                            OPAL_NAME_PRINT(proc->proc_name), (unsigned long long)ep->peer_hint,
                            (unsigned long long)m->profile->hint,
                            ep->use_path[LLRDMA_PATH_LL] ? "shared" : "not used with this peer",
                            ep->frag_max[LLRDMA_PATH_LL], ep->frag_max[LLRDMA_PATH_BW]);
    }
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
    mca_btl_llrdma_rdma_fail_pending(ep, OPAL_ERR_UNREACH);
}

/* ---------------------------------------------------------- post path */

uint64_t mca_btl_llrdma_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int mca_btl_llrdma_endpoint_path_for(const mca_btl_llrdma_endpoint_t *ep, uint64_t bytes)
{
    if (ep->use_path[LLRDMA_PATH_LL] && bytes <= ep->frag_max[LLRDMA_PATH_LL]) {
        return LLRDMA_PATH_LL;
    }
    if (ep->use_path[LLRDMA_PATH_BW] && bytes <= ep->frag_max[LLRDMA_PATH_BW]) {
        return LLRDMA_PATH_BW;
    }
    return -1;
}

#define conn_credits mca_btl_llrdma_conn_credits

/* Post one work request in the ring slot at ring_head; `frag` or `rdma`
 * (at most one) waits for its completion. */
static int post_wr_for(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn,
                       struct ibv_send_wr *wr, mca_btl_llrdma_frag_t *frag,
                       struct mca_btl_llrdma_rdma_op_t *rdma, int inl, int more_queued)
{
    mca_btl_llrdma_wr_t *e = &conn->ring[conn->ring_head];
    struct ibv_send_wr *bad = NULL;
    uint32_t unsignalled = conn->sq.unsignalled; /* posted since the last signalled WR */
    int rc;

    wr->wr_id = (uintptr_t)e;
    if (llrdma_sq_post(&conn->sq, !inl, more_queued)) {
        wr->send_flags |= IBV_SEND_SIGNALED;
    }
    e->conn = conn;
    e->frag = inl ? NULL : frag;
    e->rdma = rdma;
    rc = mca_btl_llrdma_verbs.post_send(conn->qp, wr, &bad);
    if (0 != rc) {
        e->frag = NULL;
        e->rdma = NULL;
        llrdma_sq_retire(&conn->sq, 1);
        mca_btl_llrdma_endpoint_fail(ep, "ibv_post_send failed", strerror(rc));
        /* The unsignalled WRs since the last signalled one waited for this
         * WR (or a later one) to be signalled: no completion will retire
         * them, so their fragments complete now. */
        for (uint32_t k = 1; k <= unsignalled && k < conn->sq.depth; ++k) {
            mca_btl_llrdma_wr_t *o =
                &conn->ring[(conn->ring_head + conn->sq.depth - k) % conn->sq.depth];
            mca_btl_llrdma_frag_t *orphan = o->frag;
            struct mca_btl_llrdma_rdma_op_t *orphan_op = o->rdma;
            o->frag = NULL;
            o->rdma = NULL;
            if (NULL != orphan) {
                mca_btl_llrdma_frag_complete(orphan, OPAL_ERR_UNREACH);
            }
            if (NULL != orphan_op) {
                mca_btl_llrdma_rdma_complete(orphan_op, OPAL_ERR_UNREACH);
            }
        }
        return OPAL_ERR_UNREACH;
    }
    conn->ring_head = (conn->ring_head + 1) % conn->sq.depth;
    return OPAL_SUCCESS;
}

static int post_wr(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn,
                   struct ibv_send_wr *wr, mca_btl_llrdma_frag_t *frag, int inl, int more_queued)
{
    return post_wr_for(ep, conn, wr, frag, NULL, inl, more_queued);
}

int mca_btl_llrdma_conn_post_rdma(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn,
                                  struct ibv_send_wr *wr, struct mca_btl_llrdma_rdma_op_t *op,
                                  int more_queued)
{
    return post_wr_for(ep, conn, wr, NULL, op, 0, more_queued);
}

/* Write the count of consumed-and-reposted buffers back to the peer.  It
 * takes a send slot but no peer receive buffer (and so no credit). */
static int post_credit(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn)
{
    struct ibv_sge sge = {.addr = (uintptr_t)&conn->credit_buf[1],
                          .length = sizeof(uint64_t),
                          .lkey = conn->credit_mr->lkey};
    struct ibv_send_wr wr;
    int inl = conn->inline_max >= sizeof(uint64_t);

    conn->credit_buf[1] = llrdma_credit_return(&conn->credit);
    conn->credit_owed = 0;
    memset(&wr, 0, sizeof(wr));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = inl ? IBV_SEND_INLINE : 0;
    wr.wr.rdma.remote_addr = conn->peer_credit_addr;
    wr.wr.rdma.rkey = conn->peer_credit_rkey;
    /* The source word is only ever overwritten with a larger count, which is
     * as true as the one it replaces: no completion needed either way. */
    return post_wr(ep, conn, &wr, NULL, 1, 0);
}

/* Post one fragment.  Returns 1 when it went inline (complete now), 0 when
 * a completion will follow, or an error after failing the endpoint. */
static int post_frag(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *conn,
                     mca_btl_llrdma_frag_t *frag, int more_queued)
{
    uint32_t wire = 0 != frag->wire
                        ? frag->wire
                        : (uint32_t)(sizeof(mca_btl_llrdma_hdr_t) + frag->segment.seg_len);
    int inl = wire <= conn->inline_max;
    struct ibv_sge sge = {.addr = (uintptr_t)frag->hdr, .length = wire, .lkey = frag->lkey};
    struct ibv_send_wr wr;
    int rc;

    frag->hdr->tag = frag->tag;
    frag->hdr->flags = 0 != frag->wire ? MCA_BTL_LLRDMA_HDR_PACKED : 0;
    frag->hdr->magic = MCA_BTL_LLRDMA_HDR_MAGIC;
    frag->hdr->len = (uint32_t)frag->segment.seg_len;

    memset(&wr, 0, sizeof(wr));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = inl ? IBV_SEND_INLINE : 0;
    if (!inl) {
        /* A completion will come later: ob1 must hear about it. */
        frag->base.des_flags |= MCA_BTL_DES_SEND_ALWAYS_CALLBACK;
    }
    rc = post_wr(ep, conn, &wr, frag, inl, more_queued);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    llrdma_credit_take(&conn->credit);
    return inl ? 1 : 0;
}

static int conn_up(const mca_btl_llrdma_conn_t *conn)
{
    return NULL != conn && LLRDMA_CONN_ESTABLISHED == conn->state;
}

/* Fragments, or on the BW path puts and gets, wait for path p. */
static int has_waiting(mca_btl_llrdma_endpoint_t *ep, int p)
{
    return !opal_list_is_empty(&ep->pending[p]) ||
           (LLRDMA_PATH_BW == p && !opal_list_is_empty(&ep->rdma_pending));
}

/* Fragments wait on this endpoint: it is looked at from progress until they
 * can go (connection up and credits). */
static void set_waiting(mca_btl_llrdma_endpoint_t *ep, int p, int waiting)
{
    mca_btl_llrdma_conn_t *conn = ep->conn[p];
    if (NULL == conn) {
        return;
    }
    if (waiting && 0 == conn->stall_since) {
        conn->stall_since = mca_btl_llrdma_now_ms();
        ++ep->module->waiting;
    } else if (!waiting && 0 != conn->stall_since) {
        if (conn->stall_reported) {
            opal_output_verbose(1, mca_btl_llrdma_component.output,
                                "btl:llrdma: %s returned credits after %llu ms; sends resume",
                                OPAL_NAME_PRINT(ep->proc->proc_name),
                                (unsigned long long)(mca_btl_llrdma_now_ms() - conn->stall_since));
        }
        conn->stall_since = 0;
        conn->stall_reported = 0;
        --ep->module->waiting;
    }
}

static void drain_path(mca_btl_llrdma_endpoint_t *ep, int p)
{
    mca_btl_llrdma_conn_t *conn = ep->conn[p];

    if (!conn_up(conn) || LLRDMA_EP_FAILED == ep->state) {
        return;
    }
    /* A credit write that found the send queue full goes first: the peer may
     * be waiting for it. */
    if (conn->credit_owed && llrdma_sq_free_slots(&conn->sq) > 0) {
        if (OPAL_SUCCESS != post_credit(ep, conn)) {
            return;
        }
    }
    /* Puts and gets need a send slot but no credit. */
    if (LLRDMA_PATH_BW == p && !opal_list_is_empty(&ep->rdma_pending)) {
        mca_btl_llrdma_rdma_drain(ep, conn);
        conn = ep->conn[p];
        if (!conn_up(conn) || LLRDMA_EP_FAILED == ep->state) {
            return;
        }
    }
    while (conn_up(conn) && LLRDMA_EP_FAILED != ep->state && !opal_list_is_empty(&ep->pending[p])) {
        uint32_t slots = llrdma_sq_free_slots(&conn->sq), credits = conn_credits(conn);
        mca_btl_llrdma_frag_t *frag;
        int more, rc;
        if (0 == slots || 0 == credits) {
            /* Slots come back with completions; credits may need the peer to
             * progress: watch for them from progress. */
            set_waiting(ep, p, 0 == credits);
            return;
        }
        frag = (mca_btl_llrdma_frag_t *)opal_list_remove_first(&ep->pending[p]);
        more = !opal_list_is_empty(&ep->pending[p]) && slots > 1 && credits > 1;
        rc = post_frag(ep, conn, frag, more);
        if (0 != rc) {
            /* Inline (done) or failed: either way ob1 hears about it now. */
            mca_btl_llrdma_frag_complete(frag, 1 == rc ? OPAL_SUCCESS : rc);
        }
        conn = ep->conn[p]; /* a callback may have changed the endpoint */
    }
    if (NULL != ep->conn[p]) {
        set_waiting(ep, p, 0);
    }
}

void mca_btl_llrdma_endpoint_drain(mca_btl_llrdma_endpoint_t *ep)
{
    /* Low latency first: small messages never wait behind bulk ones. */
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        drain_path(ep, p);
    }
}

/* Offset of a record of `bytes` behind the records of `tail`, or 0 when it
 * does not fit the tail's buffer or the peer's receive buffer. */
static uint32_t pack_offset(const mca_btl_llrdma_endpoint_t *ep, int p,
                            const mca_btl_llrdma_frag_t *tail, size_t bytes)
{
    const uint32_t hdr = sizeof(mca_btl_llrdma_hdr_t);
    uint32_t used = 0 != tail->wire ? tail->wire : (uint32_t)(hdr + tail->segment.seg_len);
    uint32_t off = MCA_BTL_LLRDMA_REC_ALIGN(used);
    uint64_t cap = tail->pool->buf_bytes;

    if ((uint64_t)hdr + ep->frag_max[p] < cap) {
        cap = (uint64_t)hdr + ep->frag_max[p];
    }
    return (uint64_t)off + hdr + bytes <= cap ? off : 0;
}

void *mca_btl_llrdma_endpoint_pack_reserve(mca_btl_llrdma_endpoint_t *ep, int p, size_t bytes)
{
    mca_btl_llrdma_frag_t *tail;
    uint32_t off;

    if (!mca_btl_llrdma_component.coalesce || p < 0 || LLRDMA_EP_FAILED == ep->state ||
        !conn_up(ep->conn[p]) || opal_list_is_empty(&ep->pending[p])) {
        return NULL;
    }
    tail = (mca_btl_llrdma_frag_t *)opal_list_get_last(&ep->pending[p]);
    off = pack_offset(ep, p, tail, bytes);
    return 0 == off ? NULL : (char *)tail->hdr + off + sizeof(mca_btl_llrdma_hdr_t);
}

void mca_btl_llrdma_endpoint_pack_commit(mca_btl_llrdma_endpoint_t *ep, int p, uint8_t tag,
                                         size_t bytes)
{
    mca_btl_llrdma_frag_t *tail = (mca_btl_llrdma_frag_t *)opal_list_get_last(&ep->pending[p]);
    uint32_t off = pack_offset(ep, p, tail, bytes);
    mca_btl_llrdma_hdr_t *rec = (mca_btl_llrdma_hdr_t *)((char *)tail->hdr + off);

    rec->tag = tag;
    rec->flags = 0;
    rec->magic = MCA_BTL_LLRDMA_HDR_MAGIC;
    rec->len = (uint32_t)bytes;
    tail->wire = off + (uint32_t)sizeof(*rec) + (uint32_t)bytes;
}

static int frag_path(const mca_btl_llrdma_endpoint_t *ep, const mca_btl_llrdma_frag_t *frag)
{
    return mca_btl_llrdma_endpoint_path_for(ep, frag->segment.seg_len);
}

/* The first small message to wait on a connected path (for credits or a
 * send slot) goes into a fragment of the BTL's own: ob1's completes at once,
 * and later ones pack behind it, as long as the send pool, which bounds what
 * waits, has one; NULL otherwise.  Before a connection is up messages wait
 * as they are, so a connection that cannot be made fails them to ob1. */
static mca_btl_llrdma_frag_t *queue_copy(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_frag_t *frag)
{
    int p = frag_path(ep, frag);
    mca_btl_llrdma_frag_t *c;

    /* Only messages of which at least four share a buffer: for larger ones
     * copying buys little, and ob1 keeps them as before. */
    if (!mca_btl_llrdma_component.coalesce || !conn_up(ep->conn[p]) ||
        frag->segment.seg_len > ep->frag_max[p] / 4) {
        return NULL;
    }
    c = mca_btl_llrdma_pool_get(frag->pool);
    if (NULL == c) {
        return NULL;
    }
    mca_btl_llrdma_frag_init_send(c, ep, frag->segment.seg_len, MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    c->tag = frag->tag;
    memcpy(mca_btl_llrdma_frag_payload(c), mca_btl_llrdma_frag_payload(frag),
           frag->segment.seg_len);
    return c;
}

static int conn_start_active(mca_btl_llrdma_endpoint_t *ep, int p);

int mca_btl_llrdma_endpoint_send(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_frag_t *frag)
{
    int p = mca_btl_llrdma_endpoint_path_for(ep, frag->segment.seg_len);
    mca_btl_llrdma_frag_t *queued;
    mca_btl_llrdma_conn_t *conn;
    uint32_t credits = 0;

    if (LLRDMA_EP_FAILED == ep->state) {
        return OPAL_ERR_UNREACH;
    }
    if (p < 0) {
        return OPAL_ERR_BAD_PARAM; /* larger than the peer receives: ob1 never asks this */
    }
    frag->endpoint = ep;
    llrdma_hist_add(&mca_btl_llrdma_component.hist, p,
                    sizeof(mca_btl_llrdma_hdr_t) + frag->segment.seg_len);
    conn = ep->conn[p];
    if (conn_up(conn)) {
        /* Read once: the peer's write may land at any moment, and a second
         * read could skip set_waiting below for a fragment queued on a first
         * read of 0 (queued, credits back, nothing to post it: a hang). */
        credits = conn_credits(conn);
        if (opal_list_is_empty(&ep->pending[p]) && llrdma_sq_free_slots(&conn->sq) > 0 &&
            credits > 0) {
            return post_frag(ep, conn, frag, 0);
        }
        llrdma_hist_wait(&mca_btl_llrdma_component.hist, p); /* no slot or credit, or behind one */
    }
    /* Queue full, no credit, not connected yet, or older fragments waiting:
     * keep the order, by packing behind the last one when it has room. */
    if (!opal_list_is_empty(&ep->pending[p])) {
        void *dst = mca_btl_llrdma_endpoint_pack_reserve(ep, p, frag->segment.seg_len);
        if (NULL != dst) {
            memcpy(dst, mca_btl_llrdma_frag_payload(frag), frag->segment.seg_len);
            mca_btl_llrdma_endpoint_pack_commit(ep, p, frag->tag, frag->segment.seg_len);
            return 1; /* copied: complete, like an inline send */
        }
    }
    queued = queue_copy(ep, frag);
    if (NULL == queued) {
        queued = frag;
        frag->base.des_flags |= MCA_BTL_DES_SEND_ALWAYS_CALLBACK;
    }
    opal_list_append(&ep->pending[p], &queued->base.super.super);
    if (conn_up(conn)) {
        if (0 == credits) {
            set_waiting(ep, p, 1); /* progress posts it once credits are back */
        }
    } else if (NULL == conn && 0 == ep->retry_at_ms[p]) {
        int rc = conn_start_active(ep, p);
        if (OPAL_SUCCESS != rc) {
            opal_list_remove_item(&ep->pending[p], &queued->base.super.super);
            if (queued != frag) {
                mca_btl_llrdma_pool_put(queued);
            }
            mca_btl_llrdma_endpoint_fail(ep, "starting a connection failed", "out of resources");
            return rc;
        }
    }
    return queued != frag ? 1 : OPAL_SUCCESS;
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
        struct mca_btl_llrdma_rdma_op_t *op = e->rdma;
        int last = conn->ring_tail == idx;
        e->frag = NULL;
        e->rdma = NULL;
        conn->ring_tail = (conn->ring_tail + 1) % conn->sq.depth;
        ++n;
        if (NULL != frag) {
            mca_btl_llrdma_frag_complete(frag, ostatus);
        }
        if (NULL != op) {
            mca_btl_llrdma_rdma_complete(op, ostatus);
        }
        if (last || n >= conn->sq.depth) {
            break;
        }
    }
    llrdma_sq_retire(&conn->sq, n);
    if (ep->conn[conn->path] == conn) {
        drain_path(ep, conn->path);
    }
}

void mca_btl_llrdma_conn_recv_done(mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;

    if (!llrdma_credit_consume(&conn->credit)) {
        return;
    }
    if (conn_up(conn) && LLRDMA_EP_FAILED != ep->state && llrdma_sq_free_slots(&conn->sq) > 0) {
        (void)post_credit(ep, conn);
    } else {
        conn->credit_owed = 1; /* posted by the next drain of this path */
    }
}

int mca_btl_llrdma_endpoint_unstall(mca_btl_llrdma_module_t *m)
{
    mca_btl_llrdma_endpoint_t *ep, *next;
    uint64_t now = 0;
    int count = 0;

    OPAL_LIST_FOREACH_SAFE(ep, next, &m->endpoints, mca_btl_llrdma_endpoint_t)
    {
        for (int p = 0; p < LLRDMA_NPATHS; ++p) {
            mca_btl_llrdma_conn_t *conn = ep->conn[p];
            if (NULL == conn || 0 == conn->stall_since) {
                continue;
            }
            if (conn_credits(conn) > 0) {
                drain_path(ep, p);
                ++count;
                continue;
            }
            if (0 == now) {
                now = mca_btl_llrdma_now_ms();
            }
            if (!conn->stall_reported &&
                now - conn->stall_since >= (uint64_t)mca_btl_llrdma_component.stall_warn_ms) {
                conn->stall_reported = 1;
                opal_output_verbose(
                    1, mca_btl_llrdma_component.output,
                    "btl:llrdma: no credits from %s (rank %u on %s) for %llu ms: it has not "
                    "consumed this rank's %s messages (busy outside MPI?); %zu fragments wait "
                    "and go when it progresses",
                    OPAL_NAME_PRINT(ep->proc->proc_name), (unsigned)ep->proc->proc_name.vpid,
                    NULL != ep->proc->proc_hostname ? ep->proc->proc_hostname : "?",
                    (unsigned long long)(now - conn->stall_since),
                    p == LLRDMA_PATH_LL ? "ll" : "bw", opal_list_get_size(&ep->pending[p]));
            }
        }
    }
    return count;
}

/* -------------------------------------------------------- connections */

static void conn_forget_qp(mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_module_t *m = conn->endpoint->module;
    if (NULL != conn->qp) {
        (void)opal_hash_table_remove_value_uint32(&m->by_qp, conn->qp->qp_num);
    }
}

void mca_btl_llrdma_conn_destroy(mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_module_t *m = conn->endpoint->module;

    if (0 != conn->stall_since) {
        conn->stall_since = 0;
        --m->waiting;
    }
    if (NULL != conn->id) {
        if (LLRDMA_CONN_ESTABLISHED == conn->state) {
            (void)mca_btl_llrdma_verbs.cm_disconnect(conn->id);
        }
        if (NULL != conn->qp) {
            conn_forget_qp(conn);
            mca_btl_llrdma_verbs.cm_destroy_qp(conn->id);
            conn->qp = NULL;
        }
        (void)mca_btl_llrdma_verbs.cm_destroy_id(conn->id);
        conn->id = NULL;
    }
    /* After the QP: nothing can write returned credits into it any more. */
    if (NULL != conn->credit_mr) {
        (void)mca_btl_llrdma_verbs.dereg_mr(conn->credit_mr);
        conn->credit_mr = NULL;
    }
    mca_btl_llrdma_module_release(m, conn);
    conn->state = LLRDMA_CONN_CLOSED;
}

/* Create the QP (and its ring and credit word) on conn->id with the path's
 * attributes, after reserving receive buffers and CQ room for it. */
static int conn_setup_qp(mca_btl_llrdma_conn_t *conn, char *why, size_t whylen)
{
    mca_btl_llrdma_module_t *m = conn->endpoint->module;
    struct ibv_qp_init_attr attr, init;
    struct ibv_qp_attr qa;
    uint32_t depth;
    int p = conn->path;

    if (OPAL_SUCCESS != mca_btl_llrdma_module_reserve(m, conn, why, whylen)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    snprintf(why, whylen, "creating the connection's resources failed");
    if (NULL == conn->credit_buf &&
        0 != posix_memalign((void **)&conn->credit_buf, 64, 2 * sizeof(uint64_t))) {
        conn->credit_buf = NULL;
        goto fail_release;
    }
    conn->credit_buf[0] = conn->credit_buf[1] = 0;
    conn->credit_mr = mca_btl_llrdma_verbs.reg_mr(m->pd, conn->credit_buf, 2 * sizeof(uint64_t),
                                                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (NULL == conn->credit_mr) {
        snprintf(why, whylen, "registering the credit word failed (ibv_reg_mr: %s)",
                 strerror(errno));
        goto fail_release;
    }
    mca_btl_llrdma_module_qp_attr(m, p, m->path[p].cqs[conn->cq_slab].cq, &attr);
    if (0 != mca_btl_llrdma_verbs.cm_create_qp(conn->id, m->pd, &attr)) {
        snprintf(why, whylen, "rdma_create_qp failed: %s", strerror(errno));
        goto fail_dereg;
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
    if (OPAL_SUCCESS != opal_hash_table_set_value_uint32(&m->by_qp, conn->qp->qp_num, conn)) {
        goto fail_free_ring;
    }
    llrdma_sq_init(&conn->sq, depth,
                   (LLRDMA_PATH_LL == p ? m->profile->ll : m->profile->bw).signal_interval);
    conn->ring_head = conn->ring_tail = 0;
    return OPAL_SUCCESS;

fail_free_ring:
    free(conn->ring);
    conn->ring = NULL;
fail_destroy_qp:
    mca_btl_llrdma_verbs.cm_destroy_qp(conn->id);
    conn->qp = NULL;
fail_dereg:
    (void)mca_btl_llrdma_verbs.dereg_mr(conn->credit_mr);
    conn->credit_mr = NULL;
fail_release:
    mca_btl_llrdma_module_release(m, conn);
    return OPAL_ERR_OUT_OF_RESOURCE;
}

static void fill_conn_param(mca_btl_llrdma_conn_t *conn, mca_btl_llrdma_conn_req_t *req,
                            struct rdma_conn_param *param)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    mca_btl_llrdma_module_t *m = conn->endpoint->module;
    opal_proc_t *me = opal_proc_local_get();

    memset(req, 0, sizeof(*req));
    req->magic = MCA_BTL_LLRDMA_CONN_MAGIC;
    req->version = MCA_BTL_LLRDMA_CONN_VERSION;
    req->path = (uint8_t)conn->path;
    req->jobid = me->proc_name.jobid;
    req->vpid = me->proc_name.vpid;
    req->hint = m->profile->hint;
    req->credit_addr = (uint64_t)(uintptr_t)&conn->credit_buf[0];
    req->credit_rkey = conn->credit_mr->rkey;
    req->credits = conn->allot;
    req->frag_max = m->lim.frag_max[conn->path];
    memset(param, 0, sizeof(*param));
    param->private_data = req;
    param->private_data_len = sizeof(*req);
    param->retry_count = (uint8_t)c->retry_count; /* validated at init */
    /* Credits keep receive queues from running dry; RNR retry is the last
     * resort if they ever did. */
    param->rnr_retry_count = (uint8_t)c->rnr_retry;
    /* RDMA reads (btl_get) travel on the BW QP only. */
    if (LLRDMA_PATH_BW == conn->path) {
        param->initiator_depth = (uint8_t)m->rd_atomic_req;
        param->responder_resources = (uint8_t)m->dest_rd_atomic_req;
    }
}

/* The receiver-not-ready back-off this side asks of its senders: rdma_cm
 * leaves it at 0 (655 ms on real NICs).  Allowed on an RTS queue pair. */
static void conn_set_rnr_timer(mca_btl_llrdma_conn_t *conn)
{
    struct ibv_qp_init_attr init;
    struct ibv_qp_attr qa;

    memset(&qa, 0, sizeof(qa));
    qa.min_rnr_timer = (uint8_t)mca_btl_llrdma_component.min_rnr_timer;
    if (0 != mca_btl_llrdma_verbs.modify_qp(conn->qp, &qa, IBV_QP_MIN_RNR_TIMER)) {
        opal_output_verbose(10, mca_btl_llrdma_component.output,
                            "btl:llrdma: the device did not take min_rnr_timer %u on qp %u",
                            mca_btl_llrdma_component.min_rnr_timer, conn->qp->qp_num);
    }
    memset(&qa, 0, sizeof(qa));
    if (0 == mca_btl_llrdma_verbs.query_qp(conn->qp, &qa,
                                           IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                               IBV_QP_MIN_RNR_TIMER,
                                           &init)) {
        opal_output_verbose(10, mca_btl_llrdma_component.output,
                            "btl:llrdma: qp %u: ack timeout %u, retry %u, rnr_retry %u, "
                            "min_rnr_timer %u",
                            conn->qp->qp_num, qa.timeout, qa.retry_cnt, qa.rnr_retry,
                            qa.min_rnr_timer);
    }
}

/* What the peer said in its private data; 0 when it is usable. */
static int take_peer_param(mca_btl_llrdma_conn_t *conn, const mca_btl_llrdma_conn_req_t *req)
{
    if (NULL == req || MCA_BTL_LLRDMA_CONN_MAGIC != req->magic ||
        MCA_BTL_LLRDMA_CONN_VERSION != req->version || req->path != conn->path ||
        0 == req->credits || 0 == req->frag_max) {
        return -1;
    }
    conn->peer_credit_addr = req->credit_addr;
    conn->peer_credit_rkey = req->credit_rkey;
    conn->peer_frag_max = req->frag_max;
    llrdma_credit_init(&conn->credit, req->credits, conn->allot);
    /* The modex said the same; the connection's word is the one that counts. */
    if (req->frag_max < conn->endpoint->frag_max[conn->path]) {
        conn->endpoint->frag_max[conn->path] = req->frag_max;
    }
    return 0;
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
    ep->conn[p] = conn;
    if (0 == ep->first_try_ms[p]) {
        ep->first_try_ms[p] = mca_btl_llrdma_now_ms();
    }
    if (LLRDMA_EP_IDLE == ep->state) {
        ep->state = LLRDMA_EP_CONNECTING;
    }
    opal_output_verbose(20, mca_btl_llrdma_component.output,
                        "btl:llrdma: connecting %s path to %s on %s (attempt %u)",
                        LLRDMA_PATH_LL == p ? "ll" : "bw", OPAL_NAME_PRINT(ep->proc->proc_name),
                        ep->addr.dev, ep->attempts[p] + 1);
    return OPAL_SUCCESS;

fail_destroy_id:
    (void)mca_btl_llrdma_verbs.cm_destroy_id(conn->id);
    conn->id = NULL;
fail_release_conn:
    OBJ_RELEASE(conn);
    return OPAL_ERR_OUT_OF_RESOURCE;
}

int mca_btl_llrdma_endpoint_connect(mca_btl_llrdma_endpoint_t *ep, int p)
{
    if (NULL != ep->conn[p] || 0 != ep->retry_at_ms[p]) {
        return OPAL_SUCCESS; /* under way, up, or a retry is scheduled */
    }
    return conn_start_active(ep, p);
}

static void update_ready(mca_btl_llrdma_endpoint_t *ep)
{
    int ready = 1;
    if (LLRDMA_EP_FAILED == ep->state) {
        return;
    }
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        if (ep->use_path[p] && !conn_up(ep->conn[p])) {
            ready = 0;
        }
    }
    ep->state = ready ? LLRDMA_EP_READY : LLRDMA_EP_CONNECTING;
}

/* The connection is out of the set-up phase (up or given up). */
static void conn_setup_over(mca_btl_llrdma_conn_t *conn)
{
    if (LLRDMA_CONN_RESOLVING == conn->state || LLRDMA_CONN_CONNECTING == conn->state) {
        --conn->endpoint->module->connecting;
    }
}

static void schedule_retry(mca_btl_llrdma_endpoint_t *ep, int p, uint64_t at)
{
    if (0 == ep->retry_at_ms[p]) {
        ++ep->module->retrying;
    }
    ep->retry_at_ms[p] = at;
}

/* Drop a connection that never carried traffic. */
static void conn_drop(mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;
    int p = conn->path, was = ep->conn[p] == conn;

    conn_setup_over(conn);
    if (was) {
        ep->conn[p] = NULL;
    }
    mca_btl_llrdma_conn_destroy(conn);
    /* A passive attempt the initiator gave up on: if fragments of ours wait
     * for the path, connect ourselves (the initiator retries too; the
     * tie-break keeps one). */
    if (was && !conn->active && LLRDMA_EP_FAILED != ep->state && has_waiting(ep, p)) {
        schedule_retry(ep, p, mca_btl_llrdma_now_ms() + llrdma_cm_retry_delay_ms(1));
    }
}

/* An active attempt ended without a connection: drop it quietly, retry
 * after a back-off, or report the peer unreachable. */
static void active_failed(mca_btl_llrdma_conn_t *conn, llrdma_cm_err_t err, const char *what,
                          const char *status)
{
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;
    int p = conn->path, mine = ep->conn[p] == conn && !conn->superseded;
    uint64_t now = mca_btl_llrdma_now_ms(), elapsed;
    llrdma_cm_next_t next;

    conn_drop(conn);
    if (!mine) {
        return; /* a superseded attempt: the peer's connection serves the path */
    }
    elapsed = now - ep->first_try_ms[p];
    next = llrdma_cm_on_active_error(err, elapsed,
                                     (uint64_t)mca_btl_llrdma_component.connect_timeout_s * 1000u);
    if (LLRDMA_CM_DROP == next) {
        /* The peer's own attempt carries the path: wait for it, polling the
         * CM channel meanwhile, but not forever: its attempt can die on the
         * way, and then ours has to go again. */
        uint32_t wait = llrdma_cm_peer_wait_ms(++ep->peer_waits[p]);
        ep->first_try_ms[p] = 0;
        ep->attempts[p] = 0;
        schedule_retry(ep, p, now + wait);
        opal_output_verbose(20, mca_btl_llrdma_component.output,
                            "btl:llrdma: %s to %s: %s (%s); waiting %u ms for its attempt",
                            LLRDMA_PATH_LL == p ? "ll" : "bw", OPAL_NAME_PRINT(ep->proc->proc_name),
                            what, status, wait);
        return;
    }
    if (LLRDMA_CM_RETRY == next) {
        ++ep->attempts[p];
        schedule_retry(ep, p, now + llrdma_cm_retry_delay_ms(ep->attempts[p]));
        opal_output_verbose(10, mca_btl_llrdma_component.output,
                            "btl:llrdma: %s to %s: %s (%s); retrying in %u ms (%llu ms so far)",
                            LLRDMA_PATH_LL == p ? "ll" : "bw", OPAL_NAME_PRINT(ep->proc->proc_name),
                            what, status, llrdma_cm_retry_delay_ms(ep->attempts[p]),
                            (unsigned long long)elapsed);
        return;
    }
    {
        char detail[256];
        snprintf(detail, sizeof(detail), "%s after %llu ms and %u attempts", status,
                 (unsigned long long)elapsed, ep->attempts[p] + 1);
        mca_btl_llrdma_endpoint_fail(ep, what, detail);
    }
}

int mca_btl_llrdma_endpoint_retries(mca_btl_llrdma_module_t *m)
{
    mca_btl_llrdma_endpoint_t *ep;
    uint64_t now = mca_btl_llrdma_now_ms();
    int count = 0;

    OPAL_LIST_FOREACH(ep, &m->endpoints, mca_btl_llrdma_endpoint_t)
    {
        for (int p = 0; p < LLRDMA_NPATHS; ++p) {
            if (0 == ep->retry_at_ms[p]) {
                continue;
            }
            if (NULL != ep->conn[p] || LLRDMA_EP_FAILED == ep->state) {
                /* The peer connected to us meanwhile, or it is over. */
                ep->retry_at_ms[p] = 0;
                --m->retrying;
                continue;
            }
            if (now < ep->retry_at_ms[p]) {
                continue;
            }
            ep->retry_at_ms[p] = 0;
            --m->retrying;
            if (0 == ep->first_try_ms[p]) {
                /* Waited for the peer's attempt in vain: try ours again. */
                ep->first_try_ms[p] = now;
            }
            if (!has_waiting(ep, p)) {
                ep->first_try_ms[p] = 0;
                continue; /* nothing to send: the next send connects */
            }
            if (OPAL_SUCCESS != conn_start_active(ep, p)) {
                mca_btl_llrdma_endpoint_fail(ep, "starting a connection failed",
                                             "out of resources");
            }
            ++count;
        }
    }
    return count;
}

static void conn_established(mca_btl_llrdma_conn_t *conn, const mca_btl_llrdma_conn_req_t *rep)
{
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;
    int p = conn->path;

    if (conn->superseded || ep->conn[p] != conn) {
        /* Cannot happen with the tie-break (the peer rejects the loser), but
         * a second QP on the path must not carry traffic. */
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: a second %s connection with %s came up; closing it",
                            LLRDMA_PATH_LL == p ? "ll" : "bw",
                            OPAL_NAME_PRINT(ep->proc->proc_name));
        conn_setup_over(conn);
        conn->state = LLRDMA_CONN_ESTABLISHED;
        mca_btl_llrdma_conn_destroy(conn);
        return;
    }
    if (conn->active && 0 != take_peer_param(conn, rep)) {
        conn_setup_over(conn);
        conn->state = LLRDMA_CONN_ESTABLISHED;
        mca_btl_llrdma_endpoint_fail(ep, "connection set-up failed",
                                     "the peer's accept carried no usable parameters (a "
                                     "different llrdma version?)");
        return;
    }
    conn_setup_over(conn);
    conn->state = LLRDMA_CONN_ESTABLISHED;
    ep->first_try_ms[p] = 0;
    ep->attempts[p] = 0;
    ep->peer_waits[p] = 0;
    conn_set_rnr_timer(conn);
    mca_btl_llrdma_rdma_conn_up(conn);
    update_ready(ep);
    opal_output_verbose(20, mca_btl_llrdma_component.output,
                        "btl:llrdma: %s connection %s %s established (qp %u, %u credits each "
                        "way: %u to send, %u allotted)",
                        LLRDMA_PATH_LL == p ? "ll" : "bw", conn->active ? "to" : "from",
                        OPAL_NAME_PRINT(ep->proc->proc_name), conn->qp->qp_num,
                        conn->credit.granted, conn->credit.granted, conn->allot);
    drain_path(ep, p);
}

static void conn_disconnected(mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;
    int p = conn->path;

    /* Keep the QP until finalize: flushed WRs still point into its ring. */
    conn->state = LLRDMA_CONN_CLOSED;
    if (0 != conn->stall_since) {
        conn->stall_since = 0;
        --ep->module->waiting;
    }
    if (ep->conn[p] != conn) {
        return;
    }
    ep->conn[p] = NULL;
    /* Its receive allotment is free for the next connection (its CQ room
     * stays reserved while flushed completions may still arrive). */
    llrdma_rq_release(&ep->module->path[p].rq, conn->allot);
    conn->allot = 0;
    /* WRs the peer never received come back flushed and fail the endpoint;
     * inline ones it did receive leave no trace, so nothing else is judged
     * here. */
    if (LLRDMA_EP_FAILED != ep->state) {
        int other = NULL != ep->conn[1 - p];
        /* Not ready any more; idle only when no other path has a connection. */
        ep->state = other ? LLRDMA_EP_CONNECTING : LLRDMA_EP_IDLE;
        /* A peer that finalized does not come back; queued fragments try to
         * reconnect and fail loudly if it is gone. */
        if (has_waiting(ep, p)) {
            (void)conn_start_active(ep, p);
        }
    }
}

static void reject(struct rdma_cm_id *id, int reason)
{
    mca_btl_llrdma_conn_req_t rej;
    opal_proc_t *me = opal_proc_local_get();

    memset(&rej, 0, sizeof(rej));
    rej.magic = MCA_BTL_LLRDMA_CONN_MAGIC;
    rej.version = MCA_BTL_LLRDMA_CONN_VERSION;
    rej.reason = (uint8_t)reason;
    rej.jobid = me->proc_name.jobid;
    rej.vpid = me->proc_name.vpid;
    (void)mca_btl_llrdma_verbs.cm_reject(id, &rej, (uint8_t)sizeof(rej));
    (void)mca_btl_llrdma_verbs.cm_destroy_id(id);
}

static uint64_t name_key(const opal_process_name_t *n)
{
    return ((uint64_t)n->jobid << 32) | n->vpid;
}

static llrdma_conn_have_t conn_have(const mca_btl_llrdma_endpoint_t *ep, int p)
{
    const mca_btl_llrdma_conn_t *c = ep->conn[p];
    if (NULL == c || LLRDMA_CONN_CLOSED == c->state) {
        return LLRDMA_CONN_NONE;
    }
    if (LLRDMA_CONN_ESTABLISHED == c->state) {
        return LLRDMA_CONN_UP;
    }
    return c->active ? LLRDMA_CONN_ACTIVE_PENDING : LLRDMA_CONN_PASSIVE_PENDING;
}

/* A connection request this side could not set up was rejected: the peer
 * fails (no resources).  Fragments of ours waiting for the path have no
 * connection coming either (our own attempt may just have been superseded
 * by the rejected one): fail them rather than let them wait forever. */
static void accept_failed(mca_btl_llrdma_endpoint_t *ep, int p, const char *why)
{
    if (NULL == ep->conn[p] && has_waiting(ep, p)) {
        mca_btl_llrdma_endpoint_fail(ep, "accepting the peer's connection failed", why);
    }
}

static void handle_connect_request(mca_btl_llrdma_module_t *m, struct rdma_cm_id *id,
                                   const mca_btl_llrdma_conn_req_t *req,
                                   const struct rdma_conn_param *asked)
{
    mca_btl_llrdma_endpoint_t *ep;
    mca_btl_llrdma_conn_t *conn;
    mca_btl_llrdma_conn_req_t mine;
    struct rdma_conn_param param;
    opal_process_name_t name;
    llrdma_cm_request_t decision;
    char why[256];

    if (NULL == req || MCA_BTL_LLRDMA_CONN_MAGIC != req->magic ||
        MCA_BTL_LLRDMA_CONN_VERSION != req->version || req->path >= LLRDMA_NPATHS) {
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: rejecting a foreign connection request (another "
                            "program, or another llrdma version)");
        reject(id, MCA_BTL_LLRDMA_REJ_BAD);
        return;
    }
    name.jobid = req->jobid;
    name.vpid = req->vpid;
    ep = mca_btl_llrdma_endpoint_lookup(m, &name, 1);
    if (NULL == ep || LLRDMA_EP_FAILED == ep->state) {
        reject(id, MCA_BTL_LLRDMA_REJ_BAD);
        return;
    }
    if (!ep->use_path[req->path]) {
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: %s asked for a %s connection that one side has no "
                            "path for",
                            OPAL_NAME_PRINT(name), LLRDMA_PATH_LL == req->path ? "ll" : "bw");
        reject(id, MCA_BTL_LLRDMA_REJ_NOPATH);
        return;
    }
    decision = llrdma_cm_on_request(conn_have(ep, req->path),
                                    name_key(&opal_proc_local_get()->proc_name), name_key(&name));
    if (LLRDMA_CM_REJECT_TIE == decision || LLRDMA_CM_REJECT_DUP == decision) {
        opal_output_verbose(20, mca_btl_llrdma_component.output,
                            "btl:llrdma: %s connection request from %s rejected: %s",
                            LLRDMA_PATH_LL == req->path ? "ll" : "bw", OPAL_NAME_PRINT(name),
                            LLRDMA_CM_REJECT_TIE == decision ? "our attempt wins the tie-break"
                                                             : "the path is connected");
        reject(id,
               LLRDMA_CM_REJECT_TIE == decision ? MCA_BTL_LLRDMA_REJ_TIE : MCA_BTL_LLRDMA_REJ_DUP);
        return;
    }
    if (LLRDMA_CM_ACCEPT_SUPERSEDE == decision) {
        /* Ours loses: the peer rejects it; forget it now. */
        ep->conn[req->path]->superseded = 1;
        ep->conn[req->path] = NULL;
    } else if (LLRDMA_CM_ACCEPT_REPLACE == decision) {
        /* The peer gave up the attempt we were accepting: close ours. */
        mca_btl_llrdma_conn_t *stale = ep->conn[req->path];
        opal_output_verbose(20, mca_btl_llrdma_component.output,
                            "btl:llrdma: %s connection request from %s replaces its earlier "
                            "attempt",
                            LLRDMA_PATH_LL == req->path ? "ll" : "bw", OPAL_NAME_PRINT(name));
        ep->conn[req->path] = NULL;
        conn_drop(stale);
    }
    conn = OBJ_NEW(mca_btl_llrdma_conn_t);
    if (NULL == conn) {
        reject(id, MCA_BTL_LLRDMA_REJ_NORES);
        accept_failed(ep, req->path, "out of memory");
        return;
    }
    conn->endpoint = ep;
    conn->path = req->path;
    conn->active = 0;
    conn->state = LLRDMA_CONN_CONNECTING;
    conn->id = id;
    id->context = conn;
    if (OPAL_SUCCESS != conn_setup_qp(conn, why, sizeof(why))) {
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: cannot accept %s's %s connection: %s",
                            OPAL_NAME_PRINT(name), LLRDMA_PATH_LL == req->path ? "ll" : "bw", why);
        goto reject_release_conn;
    }
    if (0 != take_peer_param(conn, req)) {
        snprintf(why, sizeof(why), "the request carried no usable parameters");
        goto destroy_qp;
    }
    fill_conn_param(conn, &mine, &param);
    /* The request's read depths (seen from this side) bound what we accept. */
    if (param.initiator_depth > asked->initiator_depth) {
        param.initiator_depth = asked->initiator_depth;
    }
    if (param.responder_resources > asked->responder_resources) {
        param.responder_resources = asked->responder_resources;
    }
    if (0 != mca_btl_llrdma_verbs.cm_accept(id, &param)) {
        snprintf(why, sizeof(why), "rdma_accept failed: %s", strerror(errno));
        goto destroy_qp;
    }
    opal_list_append(&m->conns, &conn->super);
    ++m->connecting;
    ep->conn[req->path] = conn;
    if (LLRDMA_EP_IDLE == ep->state) {
        ep->state = LLRDMA_EP_CONNECTING;
    }
    return;

destroy_qp:
    conn_forget_qp(conn);
    mca_btl_llrdma_verbs.cm_destroy_qp(id);
    conn->qp = NULL;
    (void)mca_btl_llrdma_verbs.dereg_mr(conn->credit_mr);
    conn->credit_mr = NULL;
    mca_btl_llrdma_module_release(m, conn);
reject_release_conn:
    conn->id = NULL;
    OBJ_RELEASE(conn);
    reject(id, MCA_BTL_LLRDMA_REJ_NORES);
    accept_failed(ep, req->path, why);
}

static llrdma_cm_err_t reject_kind(const mca_btl_llrdma_conn_req_t *rej, int have)
{
    if (!have || MCA_BTL_LLRDMA_CONN_MAGIC != rej->magic) {
        return LLRDMA_CM_ERR_REJECTED; /* no llrdma listener answered (yet) */
    }
    switch (rej->reason) {
    case MCA_BTL_LLRDMA_REJ_TIE:
        return LLRDMA_CM_ERR_TIE;
    case MCA_BTL_LLRDMA_REJ_DUP:
        return LLRDMA_CM_ERR_DUP;
    case MCA_BTL_LLRDMA_REJ_NORES:
        return LLRDMA_CM_ERR_NORES;
    default:
        return LLRDMA_CM_ERR_LOCAL; /* NOPATH / BAD: retrying cannot help */
    }
}

static const char *reject_text(const mca_btl_llrdma_conn_req_t *rej, int have)
{
    if (!have || MCA_BTL_LLRDMA_CONN_MAGIC != rej->magic) {
        return "rejected by the peer's connection manager (no llrdma listener)";
    }
    switch (rej->reason) {
    case MCA_BTL_LLRDMA_REJ_NORES:
        return "the peer has no receive buffers or completion queue room left for this "
               "connection (see btl_llrdma_recv_mem_max and its verbose output)";
    case MCA_BTL_LLRDMA_REJ_NOPATH:
        return "the peer has no such path (inconsistent modex records)";
    case MCA_BTL_LLRDMA_REJ_BAD:
        return "the peer could not parse the request (a different llrdma version?)";
    default:
        return "rejected";
    }
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
        struct rdma_conn_param asked = ev->param.conn;
        int have_req = 0;
        mca_btl_llrdma_conn_t *conn;
        char why[160];

        /* Private data lives in the event: copy it before the ack. */
        memset(&req, 0, sizeof(req));
        if ((RDMA_CM_EVENT_CONNECT_REQUEST == type || RDMA_CM_EVENT_ESTABLISHED == type ||
             RDMA_CM_EVENT_REJECTED == type) &&
            NULL != ev->param.conn.private_data && ev->param.conn.private_data_len >= sizeof(req)) {
            memcpy(&req, ev->param.conn.private_data, sizeof(req));
            have_req = 1;
        }
        /* Ack first: destroying an id waits for its events to be acked. */
        (void)mca_btl_llrdma_verbs.cm_ack_event(ev);
        ++count;

        if (RDMA_CM_EVENT_CONNECT_REQUEST == type) {
            handle_connect_request(m, id, have_req ? &req : NULL, &asked);
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
        if (conn->superseded && RDMA_CM_EVENT_ESTABLISHED != type) {
            conn_drop(conn); /* lost the tie-break: whatever happens to it now */
            continue;
        }
        snprintf(why, sizeof(why), "%s (status %d)", mca_btl_llrdma_verbs.cm_event_str(type),
                 status);
        switch (type) {
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            if (0 !=
                mca_btl_llrdma_verbs.cm_resolve_route(id, mca_btl_llrdma_component.cm_timeout_ms)) {
                active_failed(conn, LLRDMA_CM_ERR_RESOLVE, "rdma_resolve_route failed",
                              strerror(errno));
            }
            break;
        case RDMA_CM_EVENT_ROUTE_RESOLVED: {
            struct rdma_conn_param param;
            mca_btl_llrdma_conn_req_t mine;
            char qwhy[256];
            if (OPAL_SUCCESS != conn_setup_qp(conn, qwhy, sizeof(qwhy))) {
                active_failed(conn, LLRDMA_CM_ERR_LOCAL, "creating a queue pair failed", qwhy);
                break;
            }
            conn->state = LLRDMA_CONN_CONNECTING;
            fill_conn_param(conn, &mine, &param);
            if (0 != mca_btl_llrdma_verbs.cm_connect(id, &param)) {
                active_failed(conn, LLRDMA_CM_ERR_TIMEOUT, "rdma_connect failed", strerror(errno));
            }
            break;
        }
        case RDMA_CM_EVENT_ESTABLISHED:
            conn_established(conn, have_req ? &req : NULL);
            break;
        case RDMA_CM_EVENT_REJECTED:
            if (!conn->active) {
                conn_drop(conn); /* the initiator gave up on this attempt */
            } else {
                active_failed(conn, reject_kind(&req, have_req), "connection set-up failed",
                              reject_text(&req, have_req));
            }
            break;
        case RDMA_CM_EVENT_ADDR_ERROR:
        case RDMA_CM_EVENT_ROUTE_ERROR:
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
            if (LLRDMA_CONN_ESTABLISHED == conn->state) {
                break;
            }
            if (!conn->active) {
                conn_drop(conn);
            } else {
                active_failed(conn,
                              RDMA_CM_EVENT_ADDR_ERROR == type || RDMA_CM_EVENT_ROUTE_ERROR == type
                                  ? LLRDMA_CM_ERR_RESOLVE
                                  : LLRDMA_CM_ERR_TIMEOUT,
                              "connection set-up failed", why);
            }
            break;
        case RDMA_CM_EVENT_DISCONNECTED:
            if (LLRDMA_CONN_ESTABLISHED == conn->state) {
                conn_disconnected(conn);
            } else if (!conn->active) {
                conn_drop(conn);
            } else {
                active_failed(conn, LLRDMA_CM_ERR_TIMEOUT, "connection set-up failed", why);
            }
            break;
        default:
            break; /* TIMEWAIT_EXIT, ADDR_CHANGE, ...: nothing to do */
        }
    }
    return count;
}
