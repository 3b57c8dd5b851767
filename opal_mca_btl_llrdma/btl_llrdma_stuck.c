/*
 * btl/llrdma: what a module that has stopped moving is waiting for.
 *
 * Progress calls mca_btl_llrdma_stuck_check on every pass.  When the module
 * has work of its own outstanding (fragments or puts/gets queued, sends
 * waiting for a completion, a credit write owed, a connection being set up)
 * and nothing has moved (no completion, no CM event, no credit that let a
 * queued fragment go) for btl_llrdma_stall_warn ms, it prints at verbose
 * level 1 one line for the module and one per endpoint with anything in
 * flight: connection state per path, send-queue slots, credits both ways,
 * queued fragments.  Again after 2, 4, 8, ... times that while it stays so.
 * At verbose level 20 a module with nothing outstanding is dumped as well
 * (a rank waiting for a message that never comes).  See docs/btl-design.md
 * "A receiver that stops progressing".
 */
#include "opal_config.h"

#include <stdio.h>

#include "opal/util/output.h"

#include "btl_llrdma.h"

/* Quiet progress calls between two looks at the clock. */
#define LLRDMA_STUCK_POLLS 1024

static const char *conn_state_str(const mca_btl_llrdma_conn_t *c)
{
    if (NULL == c) {
        return "none";
    }
    switch (c->state) {
    case LLRDMA_CONN_RESOLVING:
        return "resolving";
    case LLRDMA_CONN_CONNECTING:
        return c->active ? "connecting" : "accepting";
    case LLRDMA_CONN_ESTABLISHED:
        return "up";
    default:
        return "closed";
    }
}

/* Send WRs whose fragment or put/get waits for a completion. */
static uint32_t conn_waiting_wrs(const mca_btl_llrdma_conn_t *c)
{
    uint32_t n = 0;
    for (uint32_t i = 0; NULL != c->ring && i < c->sq.depth; ++i) {
        n += NULL != c->ring[i].frag || NULL != c->ring[i].rdma;
    }
    return n;
}

static void describe_path(mca_btl_llrdma_endpoint_t *ep, int p, char *buf, size_t len)
{
    mca_btl_llrdma_conn_t *c = ep->conn[p];
    const llrdma_credit_t *cr;
    size_t queued = opal_list_get_size(&ep->pending[p]) +
                    (LLRDMA_PATH_BW == p ? opal_list_get_size(&ep->rdma_pending) : 0);

    if (NULL == c) {
        snprintf(buf, len, "%s: none%s, %zu queued", LLRDMA_PATH_LL == p ? "ll" : "bw",
                 0 != ep->retry_at_ms[p] ? " (retry scheduled)" : "", queued);
        return;
    }
    cr = &c->credit;
    snprintf(buf, len,
             "%s: %s qp %u, sq %u/%u posted (%u await completion), credits %u of %u (sent %llu, "
             "peer returned %llu), peer's sends consumed %llu returned %llu%s, %zu queued%s",
             LLRDMA_PATH_LL == p ? "ll" : "bw", conn_state_str(c),
             NULL != c->qp ? c->qp->qp_num : 0, c->sq.posted, c->sq.depth, conn_waiting_wrs(c),
             LLRDMA_CONN_ESTABLISHED == c->state ? mca_btl_llrdma_conn_credits(c) : 0, cr->granted,
             (unsigned long long)cr->sent, (unsigned long long)cr->seen,
             (unsigned long long)cr->consumed, (unsigned long long)cr->returned,
             c->credit_owed ? " (write owed)" : "", queued,
             0 != c->stall_since ? ", waiting for credits" : "");
}

/* Work of this module's own that should finish without the application. */
static int module_busy(mca_btl_llrdma_module_t *m)
{
    mca_btl_llrdma_endpoint_t *ep = NULL;

    if (m->connecting > 0 || m->retrying > 0 || m->waiting > 0 || m->rdma_outstanding > 0) {
        return 1;
    }
    /* Under the module lock; the list itself has its own (see endpoint_next). */
    while (NULL != (ep = mca_btl_llrdma_endpoint_next(m, ep))) {
        for (int p = 0; p < LLRDMA_NPATHS; ++p) {
            mca_btl_llrdma_conn_t *c = ep->conn[p];
            if (!opal_list_is_empty(&ep->pending[p]) ||
                (NULL != c && (c->credit_owed || conn_waiting_wrs(c) > 0))) {
                return 1;
            }
        }
        if (!opal_list_is_empty(&ep->rdma_pending)) {
            return 1;
        }
    }
    return 0;
}

void mca_btl_llrdma_stuck_dump(mca_btl_llrdma_module_t *m, uint64_t quiet_ms, int busy)
{
    int out = mca_btl_llrdma_component.output;
    mca_btl_llrdma_endpoint_t *ep = NULL;

    opal_output(out,
                "btl:llrdma: %s:%d: nothing moved for %llu ms%s (%d set-ups, %d retries, %d "
                "paths waiting for credits, %llu puts/gets; receive buffers ll %u/%u bw %u/%u "
                "posted/allotted)",
                m->port.dev, m->port.port, (unsigned long long)quiet_ms,
                busy ? " with work outstanding" : "", m->connecting, m->retrying, m->waiting,
                (unsigned long long)m->rdma_outstanding, m->path[LLRDMA_PATH_LL].rq.posted,
                m->path[LLRDMA_PATH_LL].rq.reserved, m->path[LLRDMA_PATH_BW].rq.posted,
                m->path[LLRDMA_PATH_BW].rq.reserved);
    while (NULL != (ep = mca_btl_llrdma_endpoint_next(m, ep))) {
        char path[LLRDMA_NPATHS][320];
        if (NULL == ep->conn[LLRDMA_PATH_LL] && NULL == ep->conn[LLRDMA_PATH_BW] &&
            opal_list_is_empty(&ep->pending[LLRDMA_PATH_LL]) &&
            opal_list_is_empty(&ep->pending[LLRDMA_PATH_BW])) {
            continue; /* never talked to */
        }
        for (int p = 0; p < LLRDMA_NPATHS; ++p) {
            describe_path(ep, p, path[p], sizeof(path[p]));
        }
        opal_output(out, "btl:llrdma:   rank %u (%s): %s; %s", (unsigned)ep->proc->proc_name.vpid,
                    OPAL_NAME_PRINT(ep->proc->proc_name), path[LLRDMA_PATH_LL],
                    path[LLRDMA_PATH_BW]);
    }
}

void mca_btl_llrdma_stuck_check(mca_btl_llrdma_module_t *m, int moved)
{
    int verbose = mca_btl_llrdma_component.verbose;
    uint64_t now, quiet, period;
    int busy;

    if (verbose < 1 || mca_btl_llrdma_component.stall_warn_ms <= 0) {
        return;
    }
    /* Completions the progress thread polled count as movement too. */
    if (m->completions[0] + m->completions[1] != m->stuck_completions) {
        m->stuck_completions = m->completions[0] + m->completions[1];
        moved = 1;
    }
    if (moved) {
        m->quiet_polls = 0;
        m->moved_ms = 0; /* read the clock at the next quiet look */
        return;
    }
    if (++m->quiet_polls < LLRDMA_STUCK_POLLS) {
        return;
    }
    m->quiet_polls = 0;
    now = mca_btl_llrdma_now_ms();
    if (0 == m->moved_ms) {
        m->moved_ms = now;
        m->stuck_dumps = 0;
        return;
    }
    quiet = now - m->moved_ms;
    period = (uint64_t)mca_btl_llrdma_component.stall_warn_ms
             << (m->stuck_dumps < 16 ? m->stuck_dumps : 16);
    if (quiet < period) {
        return;
    }
    busy = module_busy(m);
    if (busy || verbose >= 20) {
        mca_btl_llrdma_stuck_dump(m, quiet, busy);
        ++m->stuck_dumps;
    }
}
