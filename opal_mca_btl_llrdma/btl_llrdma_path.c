/*
 * btl/llrdma paths: each path (LL, BW) of a module has its own send and
 * receive CQs, shared receive queue and fragment pools.  Created at module
 * creation and probed with a throw-away QP for what the device grants;
 * afterwards the receive side is topped up as connections take their
 * allotments (reserve/release), when the SRQ runs low (an async event),
 * and when consumed buffers are reposted (progress).  Calls only the
 * fragment pools and the verbs seam, so every file above may use it.
 */
#include "opal_config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "opal/util/output.h"

#include "btl_llrdma.h"

/* Send fragments a path may hold, in bytes of buffer (grown on demand). */
#define LLRDMA_SEND_POOL_BYTES (32u << 20)
/* Entries per completion queue: large enough that one CQ usually serves every
 * connection of a path (one poll per progress call). */
#define LLRDMA_CQ_ENTRIES 32768u
/* Receive queue capacity asked of the device; buffers are posted as peers
 * connect (an empty capacity costs descriptors, not buffers). */
#define LLRDMA_SRQ_CAPACITY 16384u

/* ------------------------------------------------------------ resources */

static int post_recv(mca_btl_llrdma_module_t *m, int p, mca_btl_llrdma_frag_t *frag)
{
    struct ibv_recv_wr *bad = NULL;
    frag->rwr.next = NULL;
    return mca_btl_llrdma_verbs.post_srq_recv(m->path[p].srq, &frag->rwr, &bad);
}

int mca_btl_llrdma_path_repost(mca_btl_llrdma_module_t *m, int p,
                               mca_btl_llrdma_frag_t *const *frags, int n, int *posted)
{
    struct ibv_recv_wr *bad = NULL;
    int rc = 0, done = 0;

    if (n > 0) {
        /* One chain, one provider call and one doorbell, of the fragments'
         * own work requests (filled when their pool grew). */
        for (int i = 0; i < n - 1; ++i) {
            frags[i]->rwr.next = &frags[i + 1]->rwr;
        }
        frags[n - 1]->rwr.next = NULL;
        rc = mca_btl_llrdma_verbs.post_srq_recv(m->path[p].srq, &frags[0]->rwr, &bad);
        if (0 == rc) {
            done = n;
        } else {
            /* The work requests before the bad one were posted (none when
             * the provider names no bad one, or one not in the chain). */
            while (NULL != bad && done < n && &frags[done]->rwr != bad) {
                ++done;
            }
            done = done < n ? done : 0;
        }
    }
    if (NULL != posted) {
        *posted = done;
    }
    return rc;
}

void mca_btl_llrdma_path_qp_attr(const mca_btl_llrdma_module_t *m, int p,
                                 struct ibv_qp_init_attr *attr)
{
    const llrdma_path_profile_t *pp = mca_btl_llrdma_path_profile(m, p);
    uint32_t depth = pp->sq_depth;

    if (0 != m->port.max_qp_wr && depth > m->port.max_qp_wr) {
        depth = m->port.max_qp_wr;
    }
    memset(attr, 0, sizeof(*attr));
    attr->send_cq = m->path[p].scq;
    attr->recv_cq = m->path[p].rcq;
    attr->srq = m->path[p].srq;
    attr->qp_type = IBV_QPT_RC;
    attr->sq_sig_all = 0; /* selective signalling */
    attr->cap.max_send_wr = depth;
    attr->cap.max_send_sge = 1;
    attr->cap.max_recv_sge = 1;
    attr->cap.max_inline_data = m->inline_req[p];
}

void mca_btl_llrdma_path_qp_attr_ex(const mca_btl_llrdma_module_t *m, int p,
                                    struct ibv_qp_init_attr_ex *ax)
{
    struct ibv_qp_init_attr a;

    mca_btl_llrdma_path_qp_attr(m, p, &a);
    memset(ax, 0, sizeof(*ax));
    ax->send_cq = a.send_cq;
    ax->recv_cq = a.recv_cq;
    ax->srq = a.srq;
    ax->qp_type = a.qp_type;
    ax->sq_sig_all = a.sq_sig_all;
    ax->cap = a.cap;
    ax->pd = m->pd;
    ax->comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ax->send_ops_flags = IBV_QP_EX_WITH_SEND;
}

/* Arm a BW CQ for its next event on the module's channel (the progress
 * thread's); LL CQs are busy-polled and never armed. */
void mca_btl_llrdma_path_arm(mca_btl_llrdma_module_t *m, int p, struct ibv_cq *cq)
{
    if (NULL != m->channel && LLRDMA_PATH_BW == p &&
        0 != mca_btl_llrdma_verbs.req_notify_cq(cq, 0)) {
        /* No event will come for this CQ: the application's polling still
         * takes its completions. */
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: %s:%d: ibv_req_notify_cq failed; the progress thread "
                            "misses this CQ's events",
                            m->port.dev, m->port.port);
    }
}

/* A CQ of at most `cqe` entries for path `p`, with the path's moderation;
 * BW CQs report events on the module's channel when it has one (the
 * progress thread), LL CQs never: they are busy-polled. */
static struct ibv_cq *cq_create(mca_btl_llrdma_module_t *m, int p, uint32_t cqe, uint32_t *got)
{
    mca_btl_llrdma_path_t *path = &m->path[p];
    const llrdma_path_profile_t *pp = mca_btl_llrdma_path_profile(m, p);
    struct ibv_cq *cq;

    if (0 != m->port.max_cqe && cqe > m->port.max_cqe) {
        cqe = m->port.max_cqe;
    }
    cq = mca_btl_llrdma_verbs.create_cq(m->ctx, (int)cqe, NULL,
                                        LLRDMA_PATH_BW == p ? m->channel : NULL, 0);
    if (NULL == cq) {
        return NULL;
    }
    *got = (uint32_t)cq->cqe < cqe ? (uint32_t)cq->cqe : cqe;
    if (0 != pp->cq_mod_count || 0 != pp->cq_mod_usec) {
        struct ibv_modify_cq_attr ma = {.attr_mask = IBV_CQ_ATTR_MODERATE,
                                        .moderate = {.cq_count = (uint16_t)pp->cq_mod_count,
                                                     .cq_period = (uint16_t)pp->cq_mod_usec}};
        path->cq_moderation = 0 == mca_btl_llrdma_verbs.modify_cq(cq, &ma) ? 1 : 0;
    }
    mca_btl_llrdma_path_arm(m, p, cq);
    return cq;
}

/* Post `n` more receive buffers to the path's SRQ. */
static int post_more(mca_btl_llrdma_module_t *m, int p, uint32_t n, uint32_t *done)
{
    *done = 0;
    while (*done < n) {
        mca_btl_llrdma_frag_t *f = mca_btl_llrdma_pool_get(&m->path[p].recv_pool);
        if (NULL == f) {
            return OPAL_ERR_OUT_OF_RESOURCE;
        }
        if (0 != post_recv(m, p, f)) {
            mca_btl_llrdma_pool_put(f);
            return OPAL_ERROR;
        }
        ++*done;
    }
    return OPAL_SUCCESS;
}

/* Arm the SRQ limit where the pool says windows outnumber buffers; a device
 * that cannot (rxe can, some cannot) leaves the pool at what connections
 * posted, which is still a bounded, working receive side. */
static void rq_arm(mca_btl_llrdma_module_t *m, int p)
{
    mca_btl_llrdma_path_t *path = &m->path[p];
    struct ibv_srq_attr a;
    uint32_t limit = llrdma_rq_limit(&path->rq);

    if (0 == limit || limit == path->srq_armed) {
        return;
    }
    memset(&a, 0, sizeof(a));
    a.srq_limit = limit;
    if (0 != mca_btl_llrdma_verbs.modify_srq(path->srq, &a, IBV_SRQ_LIMIT)) {
        opal_output_verbose(5, mca_btl_llrdma_component.output,
                            "btl:llrdma: %s:%d: the %s SRQ limit (%u) could not be armed",
                            m->port.dev, m->port.port, mca_btl_llrdma_path_name(p), limit);
        return;
    }
    path->srq_armed = limit;
}

void mca_btl_llrdma_path_srq_low(mca_btl_llrdma_module_t *m, struct ibv_srq *srq)
{
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        mca_btl_llrdma_path_t *path = &m->path[p];
        uint32_t n, done = 0;
        if (path->srq != srq) {
            continue;
        }
        path->srq_armed = 0; /* the device disarmed it */
        n = llrdma_rq_grow(&path->rq);
        if (n > 0 && OPAL_SUCCESS != post_more(m, p, n, &done)) {
            llrdma_rq_unpost(&path->rq, n - done);
        }
        opal_output_verbose(5, mca_btl_llrdma_component.output,
                            "btl:llrdma: %s:%d: %s SRQ ran low: %u more buffers posted (%u now, "
                            "budget %u, windows %u)",
                            m->port.dev, m->port.port, mca_btl_llrdma_path_name(p), done,
                            path->rq.posted, path->rq.budget, path->rq.reserved);
        if (n == done) {
            rq_arm(m, p);
        }
    }
}

int mca_btl_llrdma_path_reserve(mca_btl_llrdma_module_t *m, mca_btl_llrdma_conn_t *conn, char *why,
                                size_t whylen)
{
    int p = conn->path;
    mca_btl_llrdma_path_t *path = &m->path[p];
    uint32_t allot, post, done;

    if (LLRDMA_OK != llrdma_rq_allot(&path->rq, &allot, &post)) {
        snprintf(why, whylen,
                 "the %s receive queue of %s:%d is full (%u buffers for %u allotted; device "
                 "capacity %u)",
                 mca_btl_llrdma_path_name(p), m->port.dev, m->port.port, path->rq.posted,
                 path->rq.reserved, path->rq.cap);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    if (OPAL_SUCCESS != post_more(m, p, post, &done)) {
        llrdma_rq_unpost(&path->rq, post - done);
        llrdma_rq_release(&path->rq, allot);
        snprintf(why, whylen, "posting %u receive buffers on %s:%d failed", post, m->port.dev,
                 m->port.port);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    rq_arm(m, p);
    conn->allot = allot;
    return OPAL_SUCCESS;
}

void mca_btl_llrdma_path_release(mca_btl_llrdma_module_t *m, mca_btl_llrdma_conn_t *conn)
{
    mca_btl_llrdma_path_t *path = &m->path[conn->path];

    if (0 != conn->allot) {
        /* The buffers stay posted for the next connection. */
        llrdma_rq_release(&path->rq, conn->allot);
        conn->allot = 0;
    }
}

void mca_btl_llrdma_path_destroy(mca_btl_llrdma_module_t *m, int p)
{
    mca_btl_llrdma_path_t *path = &m->path[p];
    /* Destroying the SRQ first releases the receive buffers from the NIC. */
    if (NULL != path->srq) {
        (void)mca_btl_llrdma_verbs.destroy_srq(path->srq);
        path->srq = NULL;
    }
    mca_btl_llrdma_pool_destruct(&path->send_pool);
    mca_btl_llrdma_pool_destruct(&path->recv_pool);
    if (NULL != path->rcq) {
        (void)mca_btl_llrdma_verbs.destroy_cq(path->rcq);
        path->rcq = NULL;
    }
    if (NULL != path->scq) {
        (void)mca_btl_llrdma_verbs.destroy_cq(path->scq);
        path->scq = NULL;
    }
}

int mca_btl_llrdma_path_create(mca_btl_llrdma_module_t *m, int p)
{
    const llrdma_path_profile_t *pp = mca_btl_llrdma_path_profile(m, p);
    mca_btl_llrdma_path_t *path = &m->path[p];
    struct ibv_srq_init_attr sattr;
    struct ibv_srq_attr sq;
    uint32_t cap = LLRDMA_SRQ_CAPACITY, send_frags, rcqe = 0;
    int overcommit;

    if (0 != m->port.max_srq_wr && cap > m->port.max_srq_wr) {
        cap = m->port.max_srq_wr;
    }
    send_frags = LLRDMA_SEND_POOL_BYTES / pp->recv_buf_bytes;
    mca_btl_llrdma_pool_construct(&path->recv_pool, m, p, pp->recv_buf_bytes,
                                  pp->rq_depth > 0 ? pp->rq_depth : 1, cap);
    mca_btl_llrdma_pool_construct(&path->send_pool, m, p, pp->recv_buf_bytes,
                                  pp->sq_depth < 64 ? pp->sq_depth : 64,
                                  send_frags > 16 ? send_frags : 16);
    path->cq_moderation = -1;
    path->scq = cq_create(m, p, LLRDMA_CQ_ENTRIES, &path->scq_cqe);
    if (NULL == path->scq) {
        goto fail_pools;
    }
    path->scq_room = path->scq_cqe;
    path->scq_starved = 0;

    memset(&sattr, 0, sizeof(sattr));
    sattr.attr.max_wr = cap;
    sattr.attr.max_sge = 1;
    path->srq = mca_btl_llrdma_verbs.create_srq(m->pd, &sattr);
    if (NULL == path->srq) {
        goto fail_cq;
    }
    path->srq_depth = cap;
    if (0 == mca_btl_llrdma_verbs.query_srq(path->srq, &sq) && sq.max_wr < cap) {
        path->srq_depth = sq.max_wr;
    }
    path->rcq = cq_create(m, p, path->srq_depth, &rcqe);
    if (NULL == path->rcq) {
        goto fail_srq;
    }
    /* Never more buffers posted than the receive CQ holds completions. */
    if (rcqe < path->srq_depth) {
        path->srq_depth = rcqe;
    }
    path->recv_pool.max_frags = path->srq_depth;
    /* Windows may outnumber buffers only where a send that finds none is
     * retried by the NIC for ever (docs/btl-design.md, "Receive side"). */
    overcommit = 7 == mca_btl_llrdma_component.rnr_retry;
    llrdma_rq_pool_init(&path->rq, path->srq_depth,
                        llrdma_rq_window(pp->rq_depth, pp->recv_buf_bytes,
                                         mca_btl_llrdma_component.recv_mem_max, path->srq_depth,
                                         overcommit),
                        pp->recv_buf_bytes, mca_btl_llrdma_component.recv_mem_max, overcommit);
    path->srq_armed = 0;
    return OPAL_SUCCESS;

    /* Each label undoes what was created before its goto. */
fail_srq:
    (void)mca_btl_llrdma_verbs.destroy_srq(path->srq);
    path->srq = NULL;
fail_cq:
    (void)mca_btl_llrdma_verbs.destroy_cq(path->scq);
    path->scq = NULL;
fail_pools:
    mca_btl_llrdma_pool_destruct(&path->send_pool);
    mca_btl_llrdma_pool_destruct(&path->recv_pool);
    return OPAL_ERR_OUT_OF_RESOURCE;
}

/* The probe QP for the work-request API, created as connections will
 * (rdma_create_qp_ex), asking half the inline size after each refusal;
 * NULL, with the reason in wr_api_why, when the knob is off or the device
 * creates none that way (then the classic probe decides the grants). */
/* A QP create refused with this errno may accept a smaller inline size:
 * only EINVAL and ENOMEM can mean "too much inline"; any other refusal (no
 * API: EOPNOTSUPP, ENOSYS; EPERM, ...) is the same at every size. */
static int probe_may_halve(int err)
{
    return EINVAL == err || ENOMEM == err;
}

static struct ibv_qp *probe_qp_ex(mca_btl_llrdma_module_t *m, int p, struct ibv_qp_init_attr *got)
{
    struct ibv_qp_init_attr_ex ax;
    struct ibv_qp *qp;

    if (!mca_btl_llrdma_component.wr_api) {
        snprintf(m->wr_api_why[p], sizeof(m->wr_api_why[p]), "btl_llrdma_wr_api=0");
        return NULL;
    }
    for (;;) {
        mca_btl_llrdma_path_qp_attr_ex(m, p, &ax);
        qp = mca_btl_llrdma_verbs.create_qp_ex(m->pd->context, &ax);
        if (NULL != qp) {
            break;
        }
        /* Any other refusal: the classic probe is asked at once. */
        if (!probe_may_halve(errno) || 0 == m->inline_req[p]) {
            snprintf(m->wr_api_why[p], sizeof(m->wr_api_why[p]), "ibv_create_qp_ex: %s",
                     strerror(errno));
            return NULL;
        }
        m->inline_req[p] /= 2;
    }
    if (NULL == mca_btl_llrdma_verbs.qp_to_qp_ex(qp)) {
        snprintf(m->wr_api_why[p], sizeof(m->wr_api_why[p]), "no ibv_qp_ex for the QP");
    } else {
        m->wr_api[p] = 1;
        m->wr_api_why[p][0] = '\0';
    }
    got->cap = ax.cap;
    return qp;
}

/* Create a QP as connections will, read back what the device granted, and
 * destroy it.  A device that rejects the inline size is asked for half as
 * much until it accepts (0 = no inline): that is what "granted" means.
 * One QP: for the work-request API when the knob allows it (which also
 * says whether sendi may post through it), else the classic way. */
int mca_btl_llrdma_path_probe(mca_btl_llrdma_module_t *m, int p)
{
    struct ibv_qp_init_attr attr, init;
    struct ibv_qp_attr qa;
    struct ibv_qp *qp;

    m->wr_api[p] = 0;
    m->inline_req[p] = mca_btl_llrdma_path_profile(m, p)->inline_bytes;
    qp = probe_qp_ex(m, p, &attr);
    if (NULL == qp) {
        m->inline_req[p] = mca_btl_llrdma_path_profile(m, p)->inline_bytes;
        for (;;) {
            mca_btl_llrdma_path_qp_attr(m, p, &attr);
            qp = mca_btl_llrdma_verbs.create_qp(m->pd, &attr);
            if (NULL != qp || 0 == m->inline_req[p] || !probe_may_halve(errno)) {
                break;
            }
            m->inline_req[p] /= 2;
        }
    }
    if (NULL == qp) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    m->granted.inline_bytes[p] = attr.cap.max_inline_data;
    m->granted.sq_depth[p] = attr.cap.max_send_wr;
    if (0 == mca_btl_llrdma_verbs.query_qp(qp, &qa, IBV_QP_CAP, &init)) {
        m->granted.inline_bytes[p] = init.cap.max_inline_data;
        m->granted.sq_depth[p] = init.cap.max_send_wr;
    }
    (void)mca_btl_llrdma_verbs.destroy_qp(qp);
    return OPAL_SUCCESS;
}
