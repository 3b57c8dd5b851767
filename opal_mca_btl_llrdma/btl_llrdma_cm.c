/*
 * btl/llrdma connection set-up over librdmacm: the active side (resolve,
 * route, connect, retry with back-off), the passive side (requests, the
 * tie-break) and the CM event loop; a connection's objects and queue pair
 * are made and unmade in btl_llrdma_conn.c (see btl_llrdma_endpoint.h and docs/btl-design.md
 * "Connections").  Runs under the module lock (docs/btl-design.md
 * "Threads").
 */
#include "opal_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_llrdma.h"

/* -------------------------------------------------------- connections */

static void fill_conn_param(mca_btl_llrdma_conn_t *conn, mca_btl_llrdma_conn_req_t *req,
                            struct rdma_conn_param *param)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    mca_btl_llrdma_module_t *m = conn->endpoint->module;
    memset(req, 0, sizeof(*req));
    req->magic = MCA_BTL_LLRDMA_CONN_MAGIC;
    req->version = MCA_BTL_LLRDMA_CONN_VERSION;
    req->path = (uint8_t)conn->path;
    req->jobid = m->self.jobid;
    req->vpid = m->self.vpid;
    req->hint = m->profile->hint;
    req->credit_addr = (uint64_t)(uintptr_t)&conn->credit_buf[0];
    req->credit_rkey = conn->credit_mr->rkey;
    req->credits = conn->allot;
    req->frag_max = m->lim.frag_max[conn->path];
    req->secret = conn->endpoint->addr.secret;
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

/* btl_llrdma_ack_timeout, when set, on this side's id before connect or
 * accept: rdma_cm puts it on the QP as it moves the QP to RTS (an RTS QP's
 * timeout cannot be changed).  0, or -1 with errno. */
static int conn_set_ack_timeout(struct rdma_cm_id *id)
{
    unsigned t = mca_btl_llrdma_component.ack_timeout; /* validated at init */
    return 0 == t ? 0 : mca_btl_llrdma_verbs.cm_set_ack_timeout(id, (uint8_t)t);
}

/* The receiver-not-ready back-off this side asks of its senders: rdma_cm
 * leaves it at 0 (655 ms on real NICs).  Allowed on an RTS queue pair.  The
 * QP's ACK timeout and retry count, read back here, set the completion
 * watchdog's limit (rdma_cm's 18 and 7 when the query fails). */
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
    conn->qp_timeout = 18;
    conn->qp_retry = 7;
    conn->qp_rnr_retry = 7;
    if (0 == mca_btl_llrdma_verbs.query_qp(conn->qp, &qa,
                                           IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                               IBV_QP_MIN_RNR_TIMER,
                                           &init)) {
        conn->qp_timeout = qa.timeout;
        conn->qp_retry = qa.retry_cnt;
        conn->qp_rnr_retry = qa.rnr_retry;
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
    llrdma_credit_connect(&conn->credit, req->credits, conn->allot);
    /* The modex said the same; the connection's word is the one that counts. */
    if (req->frag_max < conn->endpoint->frag_max[conn->path]) {
        conn->endpoint->frag_max[conn->path] = req->frag_max;
    }
    return 0;
}

static void update_ready(mca_btl_llrdma_endpoint_t *ep)
{
    int ready = 1;
    if (LLRDMA_EP_FAILED == ep->state) {
        return;
    }
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        if (ep->use_path[p] && !mca_btl_llrdma_conn_up(ep->conn[p])) {
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
    if (0 == ep->retry_at_ms[p] && 0 == ep->module->retrying++) {
        mca_btl_llrdma_thread_kick(ep->module); /* a timer, not an event */
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
    if (was && !conn->active && LLRDMA_EP_FAILED != ep->state &&
        mca_btl_llrdma_endpoint_has_waiting(ep, p)) {
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
                            mca_btl_llrdma_path_name(p), OPAL_NAME_PRINT(ep->proc->proc_name), what,
                            status, wait);
        return;
    }
    if (LLRDMA_CM_RETRY == next) {
        ++ep->attempts[p];
        schedule_retry(ep, p, now + llrdma_cm_retry_delay_ms(ep->attempts[p]));
        opal_output_verbose(10, mca_btl_llrdma_component.output,
                            "btl:llrdma: %s to %s: %s (%s); retrying in %u ms (%llu ms so far)",
                            mca_btl_llrdma_path_name(p), OPAL_NAME_PRINT(ep->proc->proc_name), what,
                            status, llrdma_cm_retry_delay_ms(ep->attempts[p]),
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
    mca_btl_llrdma_endpoint_t *ep = NULL;
    uint64_t now = mca_btl_llrdma_now_ms();
    int count = 0;

    while (NULL != (ep = mca_btl_llrdma_endpoint_next(m, ep))) {
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
            if (!mca_btl_llrdma_endpoint_has_waiting(ep, p)) {
                ep->first_try_ms[p] = 0;
                continue; /* nothing to send: the next send connects */
            }
            if (OPAL_SUCCESS != mca_btl_llrdma_conn_start_active(ep, p)) {
                mca_btl_llrdma_endpoint_fail(ep, "starting a connection failed",
                                             "out of resources");
            }
            ++count;
        }
    }
    return count;
}

/* A BW connection is up: read back the RDMA read depths rdma_cm
 * negotiated (btl_get needs at least one outstanding read). */
static void conn_read_depths(mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_module_t *m = conn->endpoint->module;
    struct ibv_qp_init_attr init;
    struct ibv_qp_attr qa;

    if (LLRDMA_PATH_BW != conn->path) {
        return;
    }
    /* What rdma_cm negotiated; assume the request if the device cannot say. */
    conn->rd_atomic = m->rd_atomic_req;
    conn->dest_rd_atomic = m->dest_rd_atomic_req;
    memset(&qa, 0, sizeof(qa));
    if (0 == mca_btl_llrdma_verbs.query_qp(
                 conn->qp, &qa, IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &init)) {
        conn->rd_atomic = qa.max_rd_atomic;
        conn->dest_rd_atomic = qa.max_dest_rd_atomic;
    }
    if (conn->rd_atomic < m->rd_atomic_granted) {
        m->rd_atomic_granted = conn->rd_atomic;
    }
    if (conn->dest_rd_atomic < m->dest_rd_atomic_granted) {
        m->dest_rd_atomic_granted = conn->dest_rd_atomic;
    }
    if (mca_btl_llrdma_component.nmodules > 0 && mca_btl_llrdma_component.modules[0] == m) {
        /* The record written at finalize shows the connection's grant. */
        mca_btl_llrdma_component.config.device.rd_atomic_granted = m->rd_atomic_granted;
        mca_btl_llrdma_component.config.device.dest_rd_atomic_granted = m->dest_rd_atomic_granted;
    }
    opal_output_verbose(20, mca_btl_llrdma_component.output,
                        "btl:llrdma: bw qp %u: %u reads outstanding, %u answered (asked %u/%u)",
                        conn->qp->qp_num, conn->rd_atomic, conn->dest_rd_atomic, m->rd_atomic_req,
                        m->dest_rd_atomic_req);
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
                            mca_btl_llrdma_path_name(p), OPAL_NAME_PRINT(ep->proc->proc_name));
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
    conn->wd_limit_ms = mca_btl_llrdma_wd_limit_ms(conn->qp_timeout, conn->qp_retry);
    conn->wd_nudge_ms =
        mca_btl_llrdma_wd_nudge_ms(conn->qp_timeout, conn->qp_retry, conn->wd_limit_ms);
    conn_read_depths(conn);
    update_ready(ep);
    opal_output_verbose(20, mca_btl_llrdma_component.output,
                        "btl:llrdma: %s connection %s %s established (qp %u, %u credits each "
                        "way: %u to send, %u allotted)",
                        mca_btl_llrdma_path_name(p), conn->active ? "to" : "from",
                        OPAL_NAME_PRINT(ep->proc->proc_name), conn->qp->qp_num,
                        conn->credit.granted, conn->credit.granted, conn->allot);
    mca_btl_llrdma_endpoint_drain_path(ep, p);
}

static void conn_disconnected(mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_endpoint_t *ep = conn->endpoint;
    int p = conn->path;

    struct ibv_qp_attr qa;

    /* Keep the QP until finalize: flushed WRs still point into its ring.
     * Into the error state now, so what the peer never received comes back
     * flushed at once (not after the retry budget) and the device reports
     * the QP's last receive (IBV_EVENT_QP_LAST_WQE_REACHED). */
    conn->state = LLRDMA_CONN_CLOSED;
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_ERR;
    if (NULL != conn->qp && 0 != mca_btl_llrdma_verbs.modify_qp(conn->qp, &qa, IBV_QP_STATE)) {
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: qp %u of a closed connection did not go to the error "
                            "state",
                            conn->qp->qp_num);
    }
    if (0 != conn->stall_since) {
        conn->stall_since = 0;
        --ep->module->waiting;
    }
    if (ep->conn[p] != conn) {
        return;
    }
    ep->conn[p] = NULL;
    /* Its receive allotment is free for the next connection (its posted WRs
     * keep their send-CQ room until their flushed completions arrive). */
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
        if (mca_btl_llrdma_endpoint_has_waiting(ep, p)) {
            (void)mca_btl_llrdma_conn_start_active(ep, p);
        }
    }
}

static void reject(mca_btl_llrdma_module_t *m, struct rdma_cm_id *id, int reason)
{
    mca_btl_llrdma_conn_req_t rej;

    memset(&rej, 0, sizeof(rej));
    rej.magic = MCA_BTL_LLRDMA_CONN_MAGIC;
    rej.version = MCA_BTL_LLRDMA_CONN_VERSION;
    rej.reason = (uint8_t)reason;
    rej.jobid = m->self.jobid;
    rej.vpid = m->self.vpid;
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
    if (NULL == ep->conn[p] && mca_btl_llrdma_endpoint_has_waiting(ep, p)) {
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
        MCA_BTL_LLRDMA_CONN_VERSION != req->version || req->path >= LLRDMA_NPATHS ||
        req->secret != m->addr.secret) {
        /* Before any QP or buffer: someone outside the job (or another
         * llrdma version) gets nothing but the reject.  Said once, counted
         * (the count at finalize). */
        if (0 == m->foreign_rejects++) {
            opal_output_verbose(
                1, mca_btl_llrdma_component.output,
                "btl:llrdma: %s:%d rejected a connection request from outside "
                "this job (%s); later ones are only counted",
                m->port.dev, m->port.port,
                NULL == req || MCA_BTL_LLRDMA_CONN_MAGIC != req->magic ? "not llrdma's"
                : MCA_BTL_LLRDMA_CONN_VERSION != req->version          ? "another llrdma version"
                : req->path >= LLRDMA_NPATHS                           ? "malformed"
                : 0 == req->secret ? "without this listener's secret"
                                   : "with a wrong secret");
        }
        reject(m, id, MCA_BTL_LLRDMA_REJ_BAD);
        return;
    }
    name.jobid = req->jobid;
    name.vpid = req->vpid;
    ep = mca_btl_llrdma_endpoint_lookup(m, &name, 1);
    if (NULL == ep || LLRDMA_EP_FAILED == ep->state) {
        reject(m, id, MCA_BTL_LLRDMA_REJ_BAD);
        return;
    }
    if (!ep->use_path[req->path]) {
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: %s asked for a %s connection that one side has no "
                            "path for",
                            OPAL_NAME_PRINT(name), mca_btl_llrdma_path_name(req->path));
        reject(m, id, MCA_BTL_LLRDMA_REJ_NOPATH);
        return;
    }
    decision = llrdma_cm_on_request(conn_have(ep, req->path), name_key(&m->self), name_key(&name));
    if (LLRDMA_CM_REJECT_TIE == decision || LLRDMA_CM_REJECT_DUP == decision) {
        opal_output_verbose(20, mca_btl_llrdma_component.output,
                            "btl:llrdma: %s connection request from %s rejected: %s",
                            mca_btl_llrdma_path_name(req->path), OPAL_NAME_PRINT(name),
                            LLRDMA_CM_REJECT_TIE == decision ? "our attempt wins the tie-break"
                                                             : "the path is connected");
        reject(m, id,
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
                            mca_btl_llrdma_path_name(req->path), OPAL_NAME_PRINT(name));
        ep->conn[req->path] = NULL;
        conn_drop(stale);
    }
    conn = OBJ_NEW(mca_btl_llrdma_conn_t);
    if (NULL == conn) {
        reject(m, id, MCA_BTL_LLRDMA_REJ_NORES);
        accept_failed(ep, req->path, "out of memory");
        return;
    }
    conn->endpoint = ep;
    conn->path = req->path;
    conn->active = 0;
    conn->state = LLRDMA_CONN_CONNECTING;
    conn->id = id;
    id->context = conn;
    if (OPAL_SUCCESS != mca_btl_llrdma_conn_setup_qp(conn, why, sizeof(why))) {
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: cannot accept %s's %s connection: %s",
                            OPAL_NAME_PRINT(name), mca_btl_llrdma_path_name(req->path), why);
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
    if (0 != conn_set_ack_timeout(id)) {
        snprintf(why, sizeof(why), "setting btl_llrdma_ack_timeout %u failed: %s",
                 mca_btl_llrdma_component.ack_timeout, strerror(errno));
        goto destroy_qp;
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
    mca_btl_llrdma_conn_forget_qp(conn);
    mca_btl_llrdma_verbs.cm_destroy_qp(id);
    conn->qp = NULL;
    conn->qpx = NULL;
    (void)mca_btl_llrdma_verbs.dereg_mr(conn->credit_mr);
    conn->credit_mr = NULL;
    mca_btl_llrdma_path_release(m, conn);
reject_release_conn:
    conn->id = NULL;
    OBJ_RELEASE(conn);
    reject(m, id, MCA_BTL_LLRDMA_REJ_NORES);
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
        return "the peer has no receive buffers, memory or queue pair left for this "
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
            if (OPAL_SUCCESS != mca_btl_llrdma_conn_setup_qp(conn, qwhy, sizeof(qwhy))) {
                active_failed(conn, LLRDMA_CM_ERR_LOCAL, "creating a queue pair failed", qwhy);
                break;
            }
            conn->state = LLRDMA_CONN_CONNECTING;
            fill_conn_param(conn, &mine, &param);
            if (0 != conn_set_ack_timeout(id)) {
                snprintf(qwhy, sizeof(qwhy), "btl_llrdma_ack_timeout %u: %s",
                         mca_btl_llrdma_component.ack_timeout, strerror(errno));
                active_failed(conn, LLRDMA_CM_ERR_LOCAL, "setting the ACK timeout failed", qwhy);
            } else if (0 != mca_btl_llrdma_verbs.cm_connect(id, &param)) {
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
