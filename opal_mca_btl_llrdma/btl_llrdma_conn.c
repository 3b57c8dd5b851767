/*
 * btl/llrdma connections as objects: the first step of dialling a peer (an
 * rdma_cm id and address resolution: the rest is btl_llrdma_cm.c's event
 * loop), a connection's queue pair with its ring and credit word, and
 * tearing both down.  Below the send path, which dials a peer it has no
 * connection to, and below connection set-up, which calls back up into the
 * send path when a connection comes up: so the two never call each other
 * in a circle.
 */
#include "opal_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "btl_llrdma.h"

void mca_btl_llrdma_conn_forget_qp(mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_module_t *m = conn->endpoint->module;
    if (NULL != conn->qp) {
        (void)opal_hash_table_remove_value_uint32(&m->by_qp, conn->qp->qp_num);
        if (m->rx_conn == conn) {
            m->rx_conn = NULL; /* its QP number may be given to another */
        }
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
            mca_btl_llrdma_conn_forget_qp(conn);
            mca_btl_llrdma_verbs.cm_destroy_qp(conn->id);
            conn->qp = NULL;
            conn->qpx = NULL;
        }
        (void)mca_btl_llrdma_verbs.cm_destroy_id(conn->id);
        conn->id = NULL;
    }
    /* After the QP: nothing can write returned credits into it any more. */
    if (NULL != conn->credit_mr) {
        (void)mca_btl_llrdma_verbs.dereg_mr(conn->credit_mr);
        conn->credit_mr = NULL;
    }
    mca_btl_llrdma_path_release(m, conn);
    conn->state = LLRDMA_CONN_CLOSED;
}

/* Create the QP (and its ring and credit word) on conn->id with the path's
 * attributes, after reserving receive buffers and CQ room for it. */
int mca_btl_llrdma_conn_setup_qp(mca_btl_llrdma_conn_t *conn, char *why, size_t whylen)
{
    mca_btl_llrdma_module_t *m = conn->endpoint->module;
    struct ibv_qp_init_attr attr, init;
    struct ibv_qp_attr qa;
    uint32_t depth;
    int p = conn->path;

    if (OPAL_SUCCESS != mca_btl_llrdma_path_reserve(m, conn, why, whylen)) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    snprintf(why, whylen, "creating the connection's resources failed");
    if (NULL == conn->credit_buf && NULL == (conn->credit_buf = mca_btl_llrdma_cword_get(m))) {
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
    conn->qpx = NULL;
    if (m->wr_api[p]) {
        /* As the probe QP was; one the device refuses now (resources) is
         * created the classic way, and sendi posts to it by ibv_post_send. */
        struct ibv_qp_init_attr_ex ax;
        mca_btl_llrdma_path_qp_attr_ex(m, p, &ax);
        if (0 == mca_btl_llrdma_verbs.cm_create_qp_ex(conn->id, &ax)) {
            conn->qpx = mca_btl_llrdma_verbs.qp_to_qp_ex(conn->id->qp);
        }
    }
    if (NULL == conn->id->qp) {
        mca_btl_llrdma_path_qp_attr(m, p, &attr);
        if (0 != mca_btl_llrdma_verbs.cm_create_qp(conn->id, m->pd, &attr)) {
            snprintf(why, whylen, "rdma_create_qp failed: %s", strerror(errno));
            goto fail_dereg;
        }
    }
    conn->qp = conn->id->qp;
    __atomic_store_n(&m->path[p].qp_made, 1, __ATOMIC_RELAXED);
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
    conn->sendi_max = conn->inline_max < LLRDMA_SENDI_STACK ? conn->inline_max : LLRDMA_SENDI_STACK;
    conn->ring = calloc(depth, sizeof(*conn->ring));
    if (NULL == conn->ring) {
        goto fail_destroy_qp;
    }
    for (uint32_t i = 0; i < depth; ++i) {
        conn->ring[i].conn = conn; /* sendi's fast lane writes only what varies */
    }
    if (OPAL_SUCCESS != opal_hash_table_set_value_uint32(&m->by_qp, conn->qp->qp_num, conn)) {
        goto fail_free_ring;
    }
    llrdma_sq_init(&conn->sq, depth, mca_btl_llrdma_path_profile(m, p)->signal_interval);
    conn->sq.room = &m->path[p].scq_room;
    conn->ring_head = conn->ring_tail = 0;
    return OPAL_SUCCESS;

fail_free_ring:
    free(conn->ring);
    conn->ring = NULL;
fail_destroy_qp:
    mca_btl_llrdma_verbs.cm_destroy_qp(conn->id);
    conn->qp = NULL;
    conn->qpx = NULL;
fail_dereg:
    (void)mca_btl_llrdma_verbs.dereg_mr(conn->credit_mr);
    conn->credit_mr = NULL;
fail_release:
    mca_btl_llrdma_path_release(m, conn);
    return OPAL_ERR_OUT_OF_RESOURCE;
}

int mca_btl_llrdma_conn_start_active(mca_btl_llrdma_endpoint_t *ep, int p)
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
    if (0 == m->connecting++) {
        mca_btl_llrdma_thread_kick(m); /* it now watches set-up timers */
    }
    ep->conn[p] = conn;
    if (0 == ep->first_try_ms[p]) {
        ep->first_try_ms[p] = mca_btl_llrdma_now_ms();
    }
    if (LLRDMA_EP_IDLE == ep->state) {
        ep->state = LLRDMA_EP_CONNECTING;
    }
    opal_output_verbose(20, mca_btl_llrdma_component.output,
                        "btl:llrdma: connecting %s path to %s on %s (attempt %u)",
                        mca_btl_llrdma_path_name(p), OPAL_NAME_PRINT(ep->proc->proc_name),
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
    return mca_btl_llrdma_conn_start_active(ep, p);
}
