/*
 * btl/llrdma endpoints: their objects, the lookup by peer and the pairing of
 * ports, and failing an endpoint (with the port's state in the report).  The
 * post path is btl_llrdma_post.c, connection set-up btl_llrdma_cm.c (see
 * btl_llrdma_endpoint.h and docs/btl-design.md).
 */
#include "opal_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llrdma_ompi_compat.h" /* the PMIx interface of this series */
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
    c->qpx = NULL;
    c->ring = NULL;
    c->ring_head = c->ring_tail = 0;
    c->inline_max = 0;
    c->sendi_max = 0;
    c->superseded = 0;
    c->allot = 0;
    c->credit_buf = NULL;
    c->credit_mr = NULL;
    c->peer_credit_addr = 0;
    c->peer_credit_rkey = 0;
    c->credit_owed = 0;
    c->stall_since = 0;
    c->stall_reported = 0;
    c->rd_atomic = c->dest_rd_atomic = 0;
    c->sends_done = c->wd_seen = c->wd_since = 0;
    c->wd_limit_ms = c->wd_nudge_ms = 0; /* not watched until established */
    c->wd_nudged = 0;
    c->qp_timeout = c->qp_retry = 0;
    c->last_wqe = 0;
    memset(&c->sq, 0, sizeof(c->sq));
    memset(&c->credit, 0, sizeof(c->credit));
    memset(&c->inl_wr, 0, sizeof(c->inl_wr));
    memset(&c->inl_sge, 0, sizeof(c->inl_sge));
    c->inl_wr.sg_list = &c->inl_sge;
    c->inl_wr.num_sge = 1;
    c->inl_wr.opcode = IBV_WR_SEND;
    memset(&c->reasm, 0, sizeof(c->reasm));
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
    llrdma_reasm_free(&c->reasm);
    if (NULL != c->credit_buf && NULL != c->endpoint) {
        mca_btl_llrdma_cword_put(c->endpoint->module, c->credit_buf);
    }
    c->credit_buf = NULL;
}

OBJ_CLASS_INSTANCE(mca_btl_llrdma_conn_t, opal_list_item_t, conn_construct, conn_destruct);

static void endpoint_construct(mca_btl_llrdma_endpoint_t *ep)
{
    ep->module = NULL;
    ep->proc = NULL;
    ep->state = LLRDMA_EP_IDLE;
    ep->peer_hint = 0;
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
    opal_list_item_t *item;

    /* Finalize: queued fragments go back to their pools unsent. */
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        while (NULL != (item = opal_list_remove_first(&ep->pending[p]))) {
            mca_btl_llrdma_pool_put((mca_btl_llrdma_frag_t *)item);
        }
        OBJ_DESTRUCT(&ep->pending[p]);
    }
    while (NULL != (item = opal_list_remove_first(&ep->rdma_pending))) {
        OBJ_RELEASE(item); /* no callback: ob1 is gone */
    }
    OBJ_DESTRUCT(&ep->rdma_pending);
    if (NULL != ep->proc) {
        OBJ_RELEASE(ep->proc);
    }
}

OBJ_CLASS_INSTANCE(mca_btl_llrdma_endpoint_t, opal_list_item_t, endpoint_construct,
                   endpoint_destruct);

/* ----------------------------------------------------------- lookup */

/* The key of m->by_name. */
static uint64_t name_key(const opal_process_name_t *n)
{
    return (uint64_t)n->jobid << 32 | (uint64_t)n->vpid;
}

/* Which of the peer's published ports module m talks to; -1: none.  Both
 * processes compute the same one-to-one pairing (same subnet first, then
 * same link layer), ordered by process name, so both ends agree. */
static int peer_port_for(mca_btl_llrdma_module_t *m, const mca_btl_llrdma_addr_t *addrs, int n,
                         const opal_process_name_t *peer)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    llrdma_reach_addr_t mine[MCA_BTL_LLRDMA_MAX_PORTS], theirs[MCA_BTL_LLRDMA_MAX_PORTS];
    const opal_process_name_t *self = &m->self;
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
    if (OPAL_SUCCESS !=
        opal_hash_table_set_value_uint64(&m->by_name, name_key(&proc->proc_name), ep)) {
        OBJ_RELEASE(ep);
        return NULL;
    }
    opal_list_append(&m->endpoints, &ep->super);
    return ep;
}

static mca_btl_llrdma_endpoint_t *find_locked(mca_btl_llrdma_module_t *m,
                                              const opal_process_name_t *name)
{
    void *ep = NULL;
    if (OPAL_SUCCESS != opal_hash_table_get_value_uint64(&m->by_name, name_key(name), &ep)) {
        return NULL;
    }
    return (mca_btl_llrdma_endpoint_t *)ep;
}

mca_btl_llrdma_endpoint_t *mca_btl_llrdma_endpoint_lookup(mca_btl_llrdma_module_t *m,
                                                          const opal_process_name_t *name,
                                                          int create)
{
    mca_btl_llrdma_endpoint_t *ep;
    opal_proc_t *proc;

    OPAL_THREAD_LOCK(&m->ep_lock);
    ep = find_locked(m, name);
    OPAL_THREAD_UNLOCK(&m->ep_lock);
    if (NULL != ep || !create || NULL == opal_proc_for_name) {
        return ep;
    }
    /* Outside the list lock: Open MPI takes its proc lock here, and holds it
     * when it calls add_procs, which takes the list lock. */
    proc = opal_proc_for_name(*name);
    if (NULL == proc) {
        return NULL;
    }
    OPAL_THREAD_LOCK(&m->ep_lock);
    ep = find_locked(m, name); /* another thread may have created it meanwhile */
    if (NULL == ep) {
        ep = endpoint_create(m, proc);
    }
    OPAL_THREAD_UNLOCK(&m->ep_lock);
    return ep;
}

mca_btl_llrdma_endpoint_t *mca_btl_llrdma_endpoint_next(mca_btl_llrdma_module_t *m,
                                                        mca_btl_llrdma_endpoint_t *prev)
{
    opal_list_item_t *item;

    OPAL_THREAD_LOCK(&m->ep_lock);
    item = NULL == prev ? opal_list_get_first(&m->endpoints) : opal_list_get_next(&prev->super);
    if (item == opal_list_get_end(&m->endpoints)) {
        item = NULL;
    }
    OPAL_THREAD_UNLOCK(&m->ep_lock);
    return (mca_btl_llrdma_endpoint_t *)item;
}

/* ------------------------------------------------------------ errors */

void mca_btl_llrdma_frag_complete(mca_btl_llrdma_frag_t *frag, int status)
{
    mca_btl_llrdma_done_frag(frag->pool->module, frag, status);
}

static const char *port_state_name(enum ibv_port_state s)
{
    switch (s) {
    case IBV_PORT_DOWN:
        return "DOWN";
    case IBV_PORT_INIT:
        return "INIT";
    case IBV_PORT_ARMED:
        return "ARMED";
    case IBV_PORT_ACTIVE_DEFER:
        return "ACTIVE_DEFER";
    default:
        return "not active";
    }
}

/* A port that went down fails the work on it with a local error (rxe: "local
 * QP operation error") before its asynchronous event is read: ask the port,
 * so that the report names the cause.  Error paths only. */
static void port_note(mca_btl_llrdma_module_t *m, char *buf, size_t len)
{
    struct ibv_port_attr pa;

    buf[0] = '\0';
    if (m->port_down) {
        snprintf(buf, len, "; port %s:%d went down", m->port.dev, m->port.port);
    } else if (0 == mca_btl_llrdma_verbs.query_port(m->ctx, (uint8_t)m->port.port, &pa) &&
               IBV_PORT_ACTIVE != pa.state) {
        snprintf(buf, len, "; port %s:%d went down (state %s)", m->port.dev, m->port.port,
                 port_state_name(pa.state));
        m->port_down = 1;
    }
}

/* How long a local QP error may wait for its port to leave ACTIVE. */
#define LLRDMA_PORT_SETTLE_MS 200

void mca_btl_llrdma_port_settle(mca_btl_llrdma_module_t *m, enum ibv_wc_status status)
{
    struct ibv_port_attr pa;

    if (IBV_WC_LOC_QP_OP_ERR != status || m->port_down) {
        return;
    }
    /* rxe can fail the work of a netdev taken down before the port's state
     * says so (a two-port run, 2026-12-04): give the port a moment, on this
     * error path only, so that the report names the cause. */
    for (int ms = 0; ms < LLRDMA_PORT_SETTLE_MS; ms += 10) {
        if (0 != mca_btl_llrdma_verbs.query_port(m->ctx, (uint8_t)m->port.port, &pa) ||
            IBV_PORT_ACTIVE != pa.state) {
            return; /* port_note reads it again and says so */
        }
        usleep(10000);
    }
}

void mca_btl_llrdma_endpoint_fail(mca_btl_llrdma_endpoint_t *ep, const char *what,
                                  const char *status)
{
    mca_btl_llrdma_module_t *m = ep->module;
    char detail[768], note[160], host[256];
    opal_list_item_t *item;

    if (LLRDMA_EP_FAILED == ep->state) {
        return;
    }
    ep->state = LLRDMA_EP_FAILED;
    port_note(m, note, sizeof(note));
    snprintf(detail, sizeof(detail),
             "btl/llrdma: %s with peer rank %u (%s) on host %s, local device %s:%d: %s%s", what,
             (unsigned)ep->proc->proc_name.vpid, OPAL_NAME_PRINT(ep->proc->proc_name),
             llrdma_proc_hostname(ep->proc, host, sizeof(host)), m->port.dev, m->port.port, status,
             note);
    /* Report before failing the fragments: ob1 aborts on the first failed one. */
    mca_btl_llrdma_module_fatal(m, ep->proc, detail);
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        while (NULL != (item = opal_list_remove_first(&ep->pending[p]))) {
            mca_btl_llrdma_frag_complete((mca_btl_llrdma_frag_t *)item, OPAL_ERR_UNREACH);
        }
    }
    while (NULL != (item = opal_list_remove_first(&ep->rdma_pending))) {
        mca_btl_llrdma_done_rdma(m, (mca_btl_llrdma_rdma_op_t *)item, OPAL_ERR_UNREACH);
    }
}
