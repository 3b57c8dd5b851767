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
 *
 * The completion watchdog, always on: a live peer's NIC answers every work
 * request (or the QP fails it with retry-exceeded) within the QP's retry
 * budget, whatever the peer process does.  A connection holding work with
 * no completion for btl_llrdma_completion_timeout ms has a device or driver
 * that stopped: the peer is failed (ob1 is told) and the QP is moved to the
 * error state, which flushes its work requests back with an error, instead
 * of a job that hangs without a word.  Before that, once the retry budget
 * has passed, it posts one more work request on the connection (a nudge):
 * Soft-RoCE on Linux 6.1 was seen to leave a read or write unsent and
 * unretried for good until something else was posted on its QP.  See
 * docs/btl-design.md "A queue pair that stops completing".
 */
#include "opal_config.h"

#include <stdio.h>
#include <string.h>

#include "opal/util/output.h"

#include "btl_llrdma.h"

/* Quiet progress calls between two looks at the clock. */
#define LLRDMA_STUCK_POLLS 1024
/* Progress calls between two looks at the clock by the watchdog, and the
 * least time between two of its walks over the connections. */
#define LLRDMA_WD_POLLS 256
#define LLRDMA_WD_PERIOD_MS 100
/* The derived limit: this many times the retry budget, and at least this. */
#define LLRDMA_WD_BUDGETS 4
#define LLRDMA_WD_MIN_MS 60000

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

/* Send WRs whose fragment or put/get waits for a completion: only posted
 * entries carry one (retiring clears them), so only those are looked at,
 * oldest first from ring_tail -- the watchdog's walk stays cheap on deep,
 * mostly idle queues. */
static uint32_t conn_waiting_wrs(const mca_btl_llrdma_conn_t *c)
{
    uint32_t n = 0;
    for (uint32_t k = 0, i = c->ring_tail; NULL != c->ring && k < c->sq.posted;
         ++k, i = (i + 1) % c->sq.depth) {
        n += NULL != c->ring[i].frag || NULL != c->ring[i].rdma;
    }
    return n;
}

/* 1 when a SEND is outstanding and the QP retries RNR for ever: the peer's
 * windows may outnumber its buffers (docs/btl-design.md, "Receive side"),
 * so a send can wait as long as the peer computes outside MPI, and
 * everything behind it in the QP with it.  Silence then proves nothing. */
static int conn_may_wait_rnr(const mca_btl_llrdma_conn_t *c)
{
    if (7 != c->qp_rnr_retry || NULL == c->ring) {
        return 0;
    }
    for (uint32_t k = 0, i = c->ring_tail; k < c->sq.posted; ++k, i = (i + 1) % c->sq.depth) {
        if (c->ring[i].send) {
            return 1;
        }
    }
    return 0;
}

static void describe_path(mca_btl_llrdma_endpoint_t *ep, int p, char *buf, size_t len)
{
    mca_btl_llrdma_conn_t *c = ep->conn[p];
    const llrdma_credit_t *cr;
    size_t queued = opal_list_get_size(&ep->pending[p]) +
                    (LLRDMA_PATH_BW == p ? opal_list_get_size(&ep->rdma_pending) : 0);

    if (NULL == c) {
        snprintf(buf, len, "%s: none%s, %zu queued", mca_btl_llrdma_path_name(p),
                 0 != ep->retry_at_ms[p] ? " (retry scheduled)" : "", queued);
        return;
    }
    cr = &c->credit;
    snprintf(buf, len,
             "%s: %s qp %u, sq %u/%u posted (%u await completion), credits %u of %u (sent %llu, "
             "peer returned %llu), peer's sends consumed %llu returned %llu%s, %zu queued%s",
             mca_btl_llrdma_path_name(p), conn_state_str(c), NULL != c->qp ? c->qp->qp_num : 0,
             c->sq.posted, c->sq.depth, conn_waiting_wrs(c),
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
                "posted/windows)",
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

/* IB: each try waits 4.096 us x 2^timeout (0: forever, never seen on RC
 * from rdma_cm); retry_cnt tries follow the first. */
static uint64_t budget_ns(unsigned qp_timeout, unsigned qp_retry)
{
    return (4096ull << (qp_timeout > 0 && qp_timeout < 32 ? qp_timeout : 31)) * (qp_retry + 1u);
}

uint64_t mca_btl_llrdma_wd_limit_ms(unsigned qp_timeout, unsigned qp_retry)
{
    int knob = mca_btl_llrdma_component.completion_timeout_ms;
    uint64_t limit;

    if (knob != 0) {
        return knob < 0 ? 0 : (uint64_t)knob;
    }
    limit = LLRDMA_WD_BUDGETS * budget_ns(qp_timeout, qp_retry) / 1000000u;
    return limit > LLRDMA_WD_MIN_MS ? limit : LLRDMA_WD_MIN_MS;
}

uint64_t mca_btl_llrdma_wd_nudge_ms(unsigned qp_timeout, unsigned qp_retry, uint64_t limit_ms)
{
    uint64_t b = budget_ns(qp_timeout, qp_retry) / 1000000u;
    return b < limit_ms / 2 ? b : limit_ms / 2;
}

static void wd_nudge(mca_btl_llrdma_module_t *m, mca_btl_llrdma_endpoint_t *ep,
                     mca_btl_llrdma_conn_t *c, uint64_t quiet, uint32_t waiting)
{
    int rc = mca_btl_llrdma_conn_nudge(c);
    /* Said for everyone the first time in this process: a stall this long
     * is worth knowing about even when the work then moves on. */
    int level = 0 == m->wd_nudges++ ? 0 : 1;
    char host[256];

    opal_output_verbose(level, mca_btl_llrdma_component.output,
                        "btl:llrdma: %s:%d: qp %u (%s path to rank %u on %s): no work request "
                        "completed for %llu ms while %u waited, past the queue pair's retry "
                        "budget; %s (btl_llrdma_completion_timeout)",
                        m->port.dev, m->port.port, c->qp->qp_num, mca_btl_llrdma_path_name(c->path),
                        (unsigned)ep->proc->proc_name.vpid,
                        llrdma_proc_hostname(ep->proc, host, sizeof(host)),
                        (unsigned long long)quiet, waiting,
                        0 == rc ? "posted one more work request to restart it"
                                : "no send slot free to post one more work request in");
}

static void wd_fail(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_conn_t *c, uint64_t quiet,
                    uint32_t waiting)
{
    struct ibv_qp_attr qa;
    char status[320];
    double budget_s = (double)budget_ns(c->qp_timeout, c->qp_retry) / 1e9;
    double try_s = budget_s / (c->qp_retry + 1);

    snprintf(status, sizeof(status),
             "no work request completed for %llu ms while %u waited on the %s path (qp %u; a "
             "live peer's NIC answers or fails them within %.1f s: ACK timeout %u = %.2f s, %u "
             "retries); the queue pair is moved to the error state "
             "(btl_llrdma_completion_timeout)",
             (unsigned long long)quiet, waiting, mca_btl_llrdma_path_name(c->path), c->qp->qp_num,
             budget_s, c->qp_timeout, try_s, c->qp_retry);
    /* Report first (ob1 aborts there); otherwise the flush below hands every
     * waiting fragment and put/get back with an error at the next poll. */
    mca_btl_llrdma_endpoint_fail(ep, "the connection stopped completing work", status);
    memset(&qa, 0, sizeof(qa));
    qa.qp_state = IBV_QPS_ERR;
    if (0 != mca_btl_llrdma_verbs.modify_qp(c->qp, &qa, IBV_QP_STATE)) {
        opal_output(mca_btl_llrdma_component.output,
                    "btl:llrdma: qp %u did not go to the error state: its work stays posted",
                    c->qp->qp_num);
    }
}

/* One walk: a connection whose completions moved, or that waits for none,
 * starts its clock again. */
static void wd_look(mca_btl_llrdma_module_t *m, uint64_t now)
{
    mca_btl_llrdma_endpoint_t *ep = NULL;

    while (NULL != (ep = mca_btl_llrdma_endpoint_next(m, ep))) {
        for (int p = 0; p < LLRDMA_NPATHS && LLRDMA_EP_FAILED != ep->state; ++p) {
            mca_btl_llrdma_conn_t *c = ep->conn[p];
            uint32_t waiting;
            if (NULL == c || LLRDMA_CONN_ESTABLISHED != c->state || 0 == c->wd_limit_ms) {
                continue;
            }
            waiting = c->sends_done == c->wd_seen && 0 != c->sq.posted ? conn_waiting_wrs(c) : 0;
            if (0 == waiting || 0 == c->wd_since) {
                c->wd_seen = c->sends_done;
                c->wd_since = 0 == waiting ? 0 : now;
                c->wd_nudged = 0;
                continue;
            }
            if (now - c->wd_since >= c->wd_limit_ms && conn_may_wait_rnr(c)) {
                /* A busy receiver, not a stopped device, as far as anyone can
                 * tell: said, and the clock starts again. */
                opal_output_verbose(1, mca_btl_llrdma_component.output,
                                    "btl:llrdma: %s:%d: qp %u (%s path to rank %u): no work "
                                    "request completed for %llu ms while %u waited; a send is "
                                    "outstanding and the peer may have no receive buffer for it "
                                    "(receiver not ready, retried for ever): waiting on",
                                    m->port.dev, m->port.port, c->qp->qp_num,
                                    mca_btl_llrdma_path_name(c->path),
                                    (unsigned)ep->proc->proc_name.vpid,
                                    (unsigned long long)(now - c->wd_since), waiting);
                c->wd_since = now;
                c->wd_nudged = 0;
                ++m->wd_rnr_waits;
            } else if (now - c->wd_since >= c->wd_limit_ms) {
                wd_fail(ep, c, now - c->wd_since, waiting);
            } else if (!c->wd_nudged && now - c->wd_since >= c->wd_nudge_ms) {
                c->wd_nudged = 1;
                wd_nudge(m, ep, c, now - c->wd_since, waiting);
            }
        }
    }
}

void mca_btl_llrdma_wd_check(mca_btl_llrdma_module_t *m)
{
    uint64_t now;

    if (++m->wd_polls < LLRDMA_WD_POLLS) {
        return;
    }
    m->wd_polls = 0;
    now = mca_btl_llrdma_now_ms();
    if (now - m->wd_look_ms < LLRDMA_WD_PERIOD_MS) {
        return;
    }
    m->wd_look_ms = now;
    wd_look(m, now);
}
