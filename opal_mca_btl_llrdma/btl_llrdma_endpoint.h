/*
 * btl/llrdma endpoints (one per peer process and module) and connections
 * (one RC queue pair each, set up over librdmacm on first use).
 *
 * An endpoint sends on at most one connection per path (LL, BW).  When both
 * processes connect at the same moment, both attempts succeed: each side keeps
 * sending on whichever connection of a path was established first and only
 * receives on the other one (receives arrive through the module's shared
 * receive queues, so a second connection costs a QP, not receive buffers).
 * This avoids the tie-break protocols of classic connection managers.
 */
#ifndef MCA_BTL_LLRDMA_ENDPOINT_H
#define MCA_BTL_LLRDMA_ENDPOINT_H

#include "opal_config.h"

#include "opal/class/opal_list.h"
#include "opal/util/proc.h"

#include "btl_llrdma_frag.h"
#include "btl_llrdma_hdr.h"
#include "btl_llrdma_verbs.h"
#include "llrdma_btl_plan.h"

struct mca_btl_llrdma_module_t;

typedef enum {
    LLRDMA_CONN_RESOLVING, /* active: address, then route */
    LLRDMA_CONN_CONNECTING,
    LLRDMA_CONN_ESTABLISHED,
    LLRDMA_CONN_CLOSED, /* disconnected or failed: nothing more is posted */
} mca_btl_llrdma_conn_state_t;

struct mca_btl_llrdma_conn_t;

/* One posted send WR; wr_id points here, so a completion finds its QP. */
typedef struct mca_btl_llrdma_wr_t {
    struct mca_btl_llrdma_conn_t *conn;
    mca_btl_llrdma_frag_t *frag; /* NULL: nothing waits for this WR (inline) */
} mca_btl_llrdma_wr_t;

typedef struct mca_btl_llrdma_conn_t {
    opal_list_item_t super; /* in module->conns */
    struct mca_btl_base_endpoint_t *endpoint;
    struct rdma_cm_id *id;
    struct ibv_qp *qp;
    int path;
    int active; /* this process initiated it */
    mca_btl_llrdma_conn_state_t state;
    llrdma_sq_t sq;
    uint32_t inline_max;       /* wire bytes sent inline on this QP */
    mca_btl_llrdma_wr_t *ring; /* sq.depth entries, in post order */
    uint32_t ring_head, ring_tail;
} mca_btl_llrdma_conn_t;
OBJ_CLASS_DECLARATION(mca_btl_llrdma_conn_t);

typedef enum {
    LLRDMA_EP_IDLE,       /* no connection attempt of ours yet */
    LLRDMA_EP_CONNECTING, /* our attempt is under way */
    LLRDMA_EP_READY,      /* every path has a connection to send on */
    LLRDMA_EP_FAILED,     /* an error was reported; sends are refused */
} mca_btl_llrdma_ep_state_t;

typedef struct mca_btl_base_endpoint_t {
    opal_list_item_t super; /* in module->endpoints */
    struct mca_btl_llrdma_module_t *module;
    opal_proc_t *proc;
    mca_btl_llrdma_addr_t addr; /* the peer module we talk to */
    mca_btl_llrdma_ep_state_t state;
    mca_btl_llrdma_conn_t *conn[LLRDMA_NPATHS]; /* sending connection per path */
    opal_list_t pending[LLRDMA_NPATHS];         /* fragments waiting, in order */
    uint64_t peer_hint;                         /* from the peer's connection request */
    int in_add_procs;                           /* returned to ob1 by add_procs */
} mca_btl_llrdma_endpoint_t;
OBJ_CLASS_DECLARATION(mca_btl_llrdma_endpoint_t);

/* Queue or post a fragment (its hdr filled).  OPAL_SUCCESS when queued or
 * posted, 1 when it completed on the spot (inline, callback already run as
 * the descriptor flags ask), an error when the endpoint has failed. */
int mca_btl_llrdma_endpoint_send(mca_btl_llrdma_endpoint_t *ep, mca_btl_llrdma_frag_t *frag);
/* Post queued fragments of every path while slots are free. */
void mca_btl_llrdma_endpoint_drain(mca_btl_llrdma_endpoint_t *ep);
/* Start our connections (no-op unless IDLE). */
int mca_btl_llrdma_endpoint_connect(mca_btl_llrdma_endpoint_t *ep);
/* Report a fatal error with this peer once, fail every queued and posted
 * fragment, and mark the endpoint FAILED. */
void mca_btl_llrdma_endpoint_fail(mca_btl_llrdma_endpoint_t *ep, const char *what,
                                  const char *status);

/* A send completion (success or error) for the WR at `wr`. */
void mca_btl_llrdma_conn_send_done(mca_btl_llrdma_wr_t *wr, enum ibv_wc_status status);
/* Tear down one connection's QP and id (module->conns membership stays). */
void mca_btl_llrdma_conn_destroy(mca_btl_llrdma_conn_t *conn);

/* Run the CM events that are waiting; returns how many. */
int mca_btl_llrdma_cm_progress(struct mca_btl_llrdma_module_t *m);

/* Complete a send fragment towards ob1 (callback and ownership as its flags say). */
void mca_btl_llrdma_frag_complete(mca_btl_llrdma_frag_t *frag, int status);

#endif
