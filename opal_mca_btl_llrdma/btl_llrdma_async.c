/*
 * btl/llrdma asynchronous events (docs/btl-design.md "Asynchronous events").
 *
 * A device reports what no completion carries: a port that went down, a
 * queue pair the device put in the error state, a completion queue that
 * overran, a shared receive queue error.  Without reading them such faults
 * are noticed only by the completion watchdog (a minute later) or not at
 * all.  Progress reads them every LLRDMA_ASYNC_POLLS calls (one poll()
 * system call); each event is handed to the module it concerns (modules of
 * one device share librdmacm's context, so whichever reads an event
 * forwards it), handled under that module's lock, and acknowledged.
 */
#include "opal_config.h"

#include <errno.h>
#include <stdio.h>

#include "opal/util/output.h"

#include "btl_llrdma.h"
#include "llrdma_mca_common.h"

/* Progress calls between two looks at the device's events. */
#define LLRDMA_ASYNC_POLLS 256

static const char *ev_str(enum ibv_event_type t)
{
    return mca_btl_llrdma_verbs.event_type_str(t);
}

/* The module of this context that the event names: by port for port
 * events, else by the object it names; `m` itself when no other module of
 * the component shares the context (and in unit tests, which list none). */
static mca_btl_llrdma_module_t *target_of(mca_btl_llrdma_module_t *m,
                                          const struct ibv_async_event *ev)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;

    for (int i = 0; i < c->nmodules; ++i) {
        mca_btl_llrdma_module_t *t = c->modules[i];
        if (NULL == t || t->ctx != m->ctx) {
            continue;
        }
        switch (ev->event_type) {
        case IBV_EVENT_PORT_ACTIVE:
        case IBV_EVENT_PORT_ERR:
        case IBV_EVENT_LID_CHANGE:
        case IBV_EVENT_PKEY_CHANGE:
        case IBV_EVENT_SM_CHANGE:
        case IBV_EVENT_CLIENT_REREGISTER:
        case IBV_EVENT_GID_CHANGE:
            if (t->port.port == ev->element.port_num) {
                return t;
            }
            break;
        case IBV_EVENT_CQ_ERR:
            for (int p = 0; p < LLRDMA_NPATHS; ++p) {
                if (t->path[p].rcq == ev->element.cq || t->path[p].scq == ev->element.cq) {
                    return t;
                }
            }
            break;
        case IBV_EVENT_SRQ_ERR:
        case IBV_EVENT_SRQ_LIMIT_REACHED:
            for (int p = 0; p < LLRDMA_NPATHS; ++p) {
                if (t->path[p].srq == ev->element.srq) {
                    return t;
                }
            }
            break;
        case IBV_EVENT_DEVICE_FATAL:
        case IBV_EVENT_WQ_FATAL:
            break; /* every module of the device (mca_btl_llrdma_async_poll); no WQs */
        default:
            if (NULL != ev->element.qp && ev->element.qp->pd == t->pd) {
                return t;
            }
            break;
        }
    }
    return m;
}

/* The connection of t whose QP the event names (NULL: none of ours). */
static mca_btl_llrdma_conn_t *conn_of_qp(mca_btl_llrdma_module_t *t, const struct ibv_qp *qp)
{
    void *conn = NULL;
    if (NULL == qp ||
        OPAL_SUCCESS != opal_hash_table_get_value_uint32(&t->by_qp, qp->qp_num, &conn)) {
        return NULL;
    }
    return ((mca_btl_llrdma_conn_t *)conn)->qp == qp ? (mca_btl_llrdma_conn_t *)conn : NULL;
}

/* Every endpoint of t with a connection (or one being made) fails, naming
 * the port; sends to others are refused from then on (t->failed). */
static void port_down(mca_btl_llrdma_module_t *t, const char *why)
{
    mca_btl_llrdma_endpoint_t *ep = NULL;
    char status[160];

    snprintf(status, sizeof(status), "port %s:%d went down (%s)", t->port.dev, t->port.port, why);
    while (NULL != (ep = mca_btl_llrdma_endpoint_next(t, ep))) {
        if (NULL != ep->conn[LLRDMA_PATH_LL] || NULL != ep->conn[LLRDMA_PATH_BW] ||
            mca_btl_llrdma_endpoint_has_waiting(ep, LLRDMA_PATH_LL) ||
            mca_btl_llrdma_endpoint_has_waiting(ep, LLRDMA_PATH_BW)) {
            mca_btl_llrdma_endpoint_fail(ep, "the local port failed", status);
        }
    }
    t->port_down = 1;
}

/* One event, t's lock held. */
static void async_handle(mca_btl_llrdma_module_t *t, const struct ibv_async_event *ev)
{
    mca_btl_llrdma_conn_t *conn;
    char detail[256];

    ++t->async_events;
    switch (ev->event_type) {
    case IBV_EVENT_PORT_ERR:
        port_down(t, ev_str(ev->event_type));
        break;
    case IBV_EVENT_PORT_ACTIVE:
        opal_output_verbose(1, mca_btl_llrdma_component.output,
                            "btl:llrdma: port %s:%d is active again (connections that failed "
                            "while it was down stay failed)",
                            t->port.dev, t->port.port);
        break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
        conn = conn_of_qp(t, ev->element.qp);
        snprintf(detail, sizeof(detail), "%s on qp %u (%s path)", ev_str(ev->event_type),
                 NULL != ev->element.qp ? ev->element.qp->qp_num : 0u,
                 mca_btl_llrdma_path_name(NULL != conn ? conn->path : LLRDMA_PATH_BW));
        if (NULL != conn && LLRDMA_CONN_CLOSED != conn->state) {
            mca_btl_llrdma_endpoint_fail(conn->endpoint, "the queue pair failed", detail);
        } else {
            opal_output_verbose(1, mca_btl_llrdma_component.output,
                                "btl:llrdma: %s:%d: %s (a connection already closed)", t->port.dev,
                                t->port.port, detail);
        }
        break;
    case IBV_EVENT_QP_LAST_WQE_REACHED:
        if (NULL != (conn = conn_of_qp(t, ev->element.qp))) {
            conn->last_wqe = 1; /* its last receive from the SRQ has completed */
        }
        break;
    case IBV_EVENT_CQ_ERR:
        snprintf(detail, sizeof(detail),
                 "btl/llrdma: completion queue error on %s:%d (%s): completions were lost",
                 t->port.dev, t->port.port, ev_str(ev->event_type));
        mca_btl_llrdma_module_fatal(t, NULL, detail);
        break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_DEVICE_FATAL:
    case IBV_EVENT_WQ_FATAL:
        snprintf(detail, sizeof(detail), "btl/llrdma: %s:%d: %s", t->port.dev, t->port.port,
                 ev_str(ev->event_type));
        mca_btl_llrdma_module_fatal(t, NULL, detail);
        break;
    case IBV_EVENT_SRQ_LIMIT_REACHED:
        mca_btl_llrdma_path_srq_low(t, ev->element.srq);
        break;
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE:
        opal_output_verbose(1, mca_btl_llrdma_component.output, "btl:llrdma: %s:%d: %s",
                            t->port.dev, t->port.port, ev_str(ev->event_type));
        break;
    default: /* COMM_EST, SQ_DRAINED, PATH_MIG: nothing to do */
        opal_output_verbose(10, mca_btl_llrdma_component.output, "btl:llrdma: %s:%d: %s",
                            t->port.dev, t->port.port, ev_str(ev->event_type));
        break;
    }
}

int mca_btl_llrdma_async_poll(mca_btl_llrdma_module_t *m)
{
    struct ibv_async_event ev;
    int n = 0;

    if (++m->async_polls < LLRDMA_ASYNC_POLLS) {
        return 0;
    }
    m->async_polls = 0;
    while (0 == mca_btl_llrdma_verbs.get_async_event(m->ctx, &ev)) {
        mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
        mca_btl_llrdma_module_t *t = target_of(m, &ev);
        if (IBV_EVENT_DEVICE_FATAL == ev.event_type && c->nmodules > 0) {
            for (int i = 0; i < c->nmodules; ++i) {
                if (NULL != c->modules[i] && c->modules[i]->ctx == m->ctx) {
                    MCA_BTL_LLRDMA_LOCK(c->modules[i]);
                    async_handle(c->modules[i], &ev);
                    MCA_BTL_LLRDMA_UNLOCK(c->modules[i]);
                    mca_btl_llrdma_done_kick(c->modules[i]);
                }
            }
        } else {
            /* One module's lock at a time: none is held here. */
            MCA_BTL_LLRDMA_LOCK(t);
            async_handle(t, &ev);
            MCA_BTL_LLRDMA_UNLOCK(t);
            if (t != m) {
                mca_btl_llrdma_done_kick(t);
            }
        }
        /* After handling: the QP or CQ it names may be destroyed only once
         * its events are acknowledged. */
        mca_btl_llrdma_verbs.ack_async_event(&ev);
        ++n;
    }
    return n;
}
