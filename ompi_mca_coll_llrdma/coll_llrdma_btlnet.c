/*
 * coll/llrdma: the inter-node step over btl/llrdma's RDMA writes -- the
 * second mca_coll_llrdma_net_t (coll_llrdma_net.c chooses; docs/allreduce.md,
 * "Transport seam").
 *
 * isend / irecv as NCCL's net plugins build them on RDMA writes: the
 * receiver registers its buffer (btl_register_mem, grdma's cache) and sends
 * READY (address, size, registration handle) to the sender; the sender, once
 * its send is posted and READY arrived, registers its source and btl_put()s
 * into the receiver's buffer in pieces of at most btl_put_limit, and when
 * every put's callback ran sends DONE with its status; the receive completes
 * on DONE.  The protocol's state is llrdma_np_* (llrdma_core, unit-tested);
 * this file does the I/O.
 *
 * Control messages (READY, DONE) are small PML messages on the Allreduce tag
 * of the communicator: ob1 sends them eagerly, keeps them in order per pair
 * of ranks, and in a call on this transport no other message uses that tag
 * (the inter-node step is the hierarchical schedule's only message traffic).
 * One tag carries both kinds both ways, so each rank keeps, per peer, one
 * receive posted while a control message from that peer is due and
 * dispatches by type: READY to the oldest send to that peer still waiting
 * for one (a READY for a send not posted yet is kept until it is), DONE to
 * the receive whose READY it answers, by the number READY carried (sends
 * finish out of order: one whose puts went later may finish first).  A receive is posted only when
 * a message is due, so none is left behind when a call ends.  btl_send with an active-message tag
 * is not used: Open MPI 4.1 reserves no tag range for a coll component (MCA_BTL_TAG_USR is one tag
 * shared by every user).
 *
 * Waits progress with opal_progress and check, as the PML transport does,
 * every coll_llrdma_shm_liveness_ms that the ranks of this node still run.
 * Memory an RDMA write may still reach is never deregistered or reused: a
 * cancelled receive whose READY went out waits for DONE, a cancelled send
 * answers READY with a cancelled DONE once its puts' callbacks ran, and on a
 * dead rank requests still waiting are leaked with their registrations.
 */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"
#include "ompi/mca/bml/base/base.h"
#include "ompi/mca/bml/bml.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/base/base.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"
#include "ompi/request/request.h"
#include "opal/mca/btl/btl.h"
#include "opal/runtime/opal_progress.h"
#include "opal/sys/atomic.h"
#include "opal/util/output.h"

#include "coll_llrdma.h"

#define CTL_READY 1
#define CTL_DONE 2
#define HANDLE_MAX 64 /* registration handle bytes carried in READY */
#define EARLY_MAX 64  /* READYs ahead of their sends (the core keeps <= 64 live) */
/* Sources and targets alike: the schedule sends from and receives into the
 * same buffers, and grdma reuses a cached registration only when its access
 * covers the request (narrower flags on sources would register twice). */
#define REG_FLAGS (MCA_BTL_REG_FLAG_LOCAL_WRITE | MCA_BTL_REG_FLAG_REMOTE_WRITE)

typedef struct {
    int32_t type, status; /* CTL_*, LLRDMA_NP_* */
    uint64_t addr, bytes;
    /* READY: the receiver's number for it (per peer, never reused); DONE:
     * the number of the READY it answers.  Sends finish out of order (a
     * later one's puts may go first), so a DONE is matched by number, not
     * taken for the oldest receive. */
    uint64_t seq;
    unsigned char handle[HANDLE_MAX];
} ctl_t;

typedef struct btlnet_req {
    llrdma_np_msg_t np;
    struct mca_coll_llrdma_btlnet *net;
    int slot; /* index of the peer in net->peers */
    void *buf;
    mca_btl_base_registration_handle_t *reg; /* this side's registration */
    uint64_t raddr;                          /* send: the receiver's buffer */
    unsigned char rhandle[HANDLE_MAX];
    volatile int32_t cb_ok, cb_err; /* put callbacks not yet folded into np */
    uint64_t got;                   /* receive: the bytes its DONE said were sent */
    uint64_t seq;                   /* its READY's number (ctl_t.seq) */
    ctl_t out;                      /* READY or DONE being sent */
    ompi_request_t *out_req;
    int done_posted;
    struct btlnet_req *fifo; /* the peer's queue of sends or receives */
    struct btlnet_req *next; /* the live list, or the free list */
} req_t;

typedef struct {
    int rank; /* communicator rank */
    mca_bml_base_btl_t *bb;
    ompi_request_t *listen;
    ctl_t in;
    int due;                  /* control messages this side still waits for */
    req_t *sq_head, *sq_tail; /* sends waiting for READY */
    req_t *rq_head, *rq_tail; /* receives waiting for DONE */
    ctl_t *early;             /* READYs without a send yet (ring) */
    uint64_t ready_seq;       /* the number of the next READY to this peer */
    int early_at, early_n;
} peer_t;

struct mca_coll_llrdma_btlnet {
    struct ompi_communicator_t *comm;
    mca_coll_llrdma_pml_ctx_t *pml; /* the call's error and liveness record */
    int npeers;
    peer_t *peers;
    int *slot_of; /* communicator rank -> peers index, -1 */
    req_t *live, *free;
    int broken; /* requests were leaked (a dead rank): never freed */
    /* This call carries a failure without buffers: every receive is
     * answered READY(SUNK), nothing registered (mca_coll_llrdma_btlnet_sink). */
    int sink;
    /* LLRDMA_TEST_BTLNET_FAIL=reg|put:RANK:N (tests only) */
    int fail_kind, fail_rank;
    long fail_at, fail_count;
};

/* --------------------------------------------------------------- finding */

static const char *btl_name(const mca_bml_base_btl_t *b)
{
    return b->btl->btl_component->btl_version.mca_component_name;
}

mca_bml_base_btl_t *mca_coll_llrdma_btlnet_find(struct ompi_communicator_t *comm, int r,
                                                const char **why)
{
    ompi_proc_t *proc;
    mca_bml_base_endpoint_t *ep;

    if (0 != strcmp(mca_pml_base_selected_component.pmlm_version.mca_component_name, "ob1")) {
        *why = "the PML is not ob1 (no BML endpoints)";
        return NULL;
    }
    proc = ompi_comm_peer_lookup(comm, r);
    ep = NULL != proc ? mca_bml_base_get_endpoint(proc) : NULL;
    if (NULL == ep) {
        *why = "no BML endpoint";
        return NULL;
    }
    for (size_t i = 0; i < mca_bml_base_btl_array_get_size(&ep->btl_rdma); ++i) {
        mca_bml_base_btl_t *b = mca_bml_base_btl_array_get_index(&ep->btl_rdma, i);
        if (0 == strcmp(btl_name(b), "llrdma") && (b->btl_flags & MCA_BTL_FLAGS_PUT) &&
            NULL != b->btl->btl_put && NULL != b->btl->btl_register_mem &&
            b->btl->btl_registration_handle_size <= HANDLE_MAX) {
            return b;
        }
    }
    *why = mca_bml_base_btl_array_get_size(&ep->btl_eager) > 0
               ? "its RDMA paths are other BTLs' (vader on the same node?) or none "
                 "(btl_llrdma_rdma off?)"
               : "no BTL reaches it";
    return NULL;
}

/* -------------------------------------------------------------- set-up */

static void test_knob(mca_coll_llrdma_btlnet_t *net)
{
    const char *t = getenv("LLRDMA_TEST_BTLNET_FAIL");
    char kind[8] = "";
    int rank = -1;
    long at = 0;

    net->fail_kind = 0;
    if (NULL != t && 3 == sscanf(t, "%7[a-z]:%d:%ld", kind, &rank, &at) && at > 0) {
        net->fail_kind = 0 == strcmp(kind, "reg") ? 1 : 0 == strcmp(kind, "put") ? 2 : 0;
        net->fail_rank = rank;
        net->fail_at = at;
    }
    net->fail_count = 0;
}

/* 1 when the test knob fails this registration (kind 1) or put (kind 2). */
static int injected(mca_coll_llrdma_btlnet_t *net, int kind)
{
    if (kind != net->fail_kind || ompi_comm_rank(net->comm) != net->fail_rank) {
        return 0;
    }
    if (++net->fail_count != net->fail_at) {
        return 0;
    }
    opal_output(0, "coll:llrdma: %s: injected btl_%s failure (tests)", net->comm->c_name,
                1 == kind ? "register_mem" : "put");
    return 1;
}

mca_coll_llrdma_btlnet_t *mca_coll_llrdma_btlnet_new(struct ompi_communicator_t *comm,
                                                     const int *ranks, int nranks)
{
    int n = ompi_comm_size(comm);
    mca_coll_llrdma_btlnet_t *net = calloc(1, sizeof(*net));
    const char *why;

    if (NULL == net) {
        return NULL;
    }
    net->comm = comm;
    net->peers = calloc((size_t)(nranks > 0 ? nranks : 1), sizeof(peer_t));
    net->slot_of = malloc((size_t)n * sizeof(int));
    if (NULL == net->peers || NULL == net->slot_of) {
        goto out_free;
    }
    for (int r = 0; r < n; ++r) {
        net->slot_of[r] = -1;
    }
    for (int i = 0; i < nranks; ++i) {
        peer_t *p = &net->peers[i];
        p->rank = ranks[i];
        p->bb = mca_coll_llrdma_btlnet_find(comm, ranks[i], &why);
        p->early = malloc(EARLY_MAX * sizeof(ctl_t));
        net->npeers = i + 1;
        if (NULL == p->bb || NULL == p->early) {
            goto out_free;
        }
        net->slot_of[ranks[i]] = i;
    }
    test_knob(net);
    return net;
out_free:
    mca_coll_llrdma_btlnet_free(net);
    return NULL;
}

void mca_coll_llrdma_btlnet_free(mca_coll_llrdma_btlnet_t *net)
{
    if (NULL == net || net->broken) {
        return; /* leaked requests may still be written to (a dead rank) */
    }
    while (NULL != net->free) {
        req_t *r = net->free;
        net->free = r->next;
        free(r);
    }
    for (int i = 0; i < net->npeers; ++i) {
        free(net->peers[i].early);
    }
    free(net->peers);
    free(net->slot_of);
    free(net);
}

void *mca_coll_llrdma_btlnet_begin(mca_coll_llrdma_btlnet_t *net, mca_coll_llrdma_pml_ctx_t *pml)
{
    net->pml = pml;
    net->sink = 0;
    return net;
}

void mca_coll_llrdma_btlnet_sink(void *ctx)
{
    ((mca_coll_llrdma_btlnet_t *)ctx)->sink = 1;
}

/* ------------------------------------------------------------- requests */

static int record(mca_coll_llrdma_btlnet_t *net, int rc)
{
    if (OMPI_SUCCESS == net->pml->err) {
        net->pml->err = rc;
    }
    return -1;
}

static req_t *req_get(mca_coll_llrdma_btlnet_t *net, int slot, void *buf)
{
    req_t *r = net->free;
    if (NULL != r) {
        net->free = r->next;
    } else if (NULL == (r = malloc(sizeof(*r)))) {
        return NULL;
    }
    memset(r, 0, sizeof(*r));
    r->net = net;
    r->slot = slot;
    r->buf = buf;
    r->out_req = MPI_REQUEST_NULL;
    r->next = net->live;
    net->live = r;
    return r;
}

static void unlink_live(mca_coll_llrdma_btlnet_t *net, req_t *r)
{
    for (req_t **at = &net->live; NULL != *at; at = &(*at)->next) {
        if (*at == r) {
            *at = r->next;
            return;
        }
    }
}

/* A finished request: its memory is no RDMA target or source any more. */
static void req_release(mca_coll_llrdma_btlnet_t *net, req_t *r)
{
    peer_t *p = &net->peers[r->slot];
    unlink_live(net, r);
    if (NULL != r->reg) {
        (void)p->bb->btl->btl_deregister_mem(p->bb->btl, r->reg);
    }
    r->next = net->free;
    net->free = r;
}

static int ctl_send(mca_coll_llrdma_btlnet_t *net, req_t *r)
{
    int rc = MCA_PML_CALL(isend(&r->out, sizeof(r->out), MPI_BYTE, net->peers[r->slot].rank,
                                MCA_COLL_BASE_TAG_ALLREDUCE, MCA_PML_BASE_SEND_STANDARD, net->comm,
                                &r->out_req));
    if (OMPI_SUCCESS != rc) {
        r->out_req = MPI_REQUEST_NULL;
        record(net, rc);
    }
    return rc;
}

static void fifo_push(req_t **head, req_t **tail, req_t *r)
{
    r->fifo = NULL;
    if (NULL == *tail) {
        *head = r;
    } else {
        (*tail)->fifo = r;
    }
    *tail = r;
}

static req_t *fifo_pop(req_t **head, req_t **tail)
{
    req_t *r = *head;
    if (NULL != r) {
        *head = r->fifo;
        if (NULL == *head) {
            *tail = NULL;
        }
    }
    return r;
}

/* The receive waiting for DONE number seq, out of the peer's list. */
static req_t *fifo_take(req_t **head, req_t **tail, uint64_t seq)
{
    req_t *prev = NULL;
    for (req_t *r = *head; NULL != r; prev = r, r = r->fifo) {
        if (r->seq != seq) {
            continue;
        }
        if (NULL == prev) {
            *head = r->fifo;
        } else {
            prev->fifo = r->fifo;
        }
        if (*tail == r) {
            *tail = prev;
        }
        return r;
    }
    return NULL;
}

static void take_ready(req_t *r, const ctl_t *c)
{
    r->seq = c->seq;
    r->raddr = c->addr;
    memcpy(r->rhandle, c->handle, sizeof(r->rhandle));
    llrdma_np_on_ready(&r->np, (size_t)c->bytes, c->status);
}

static void put_cb(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                   void *local, struct mca_btl_base_registration_handle_t *lh, void *ctx,
                   void *data, int status)
{
    req_t *r = (req_t *)data;
    (void)btl, (void)ep, (void)local, (void)lh, (void)ctx;
    /* May run on another thread's progress: only counted here. */
    if (OPAL_SUCCESS == status) {
        (void)opal_atomic_add_fetch_32(&r->cb_ok, 1);
    } else {
        (void)opal_atomic_add_fetch_32(&r->cb_err, 1);
    }
}

static const char *np_status_text(int status)
{
    switch (status) {
    case LLRDMA_NP_ERR_LOCAL:
        return "a registration or put failed here";
    case LLRDMA_NP_ERR_PEER:
        return "the other side reported a failure";
    case LLRDMA_NP_ERR_SIZE:
        return "the send and the receive differ in size";
    case LLRDMA_NP_CANCELLED:
        return "cancelled";
    default:
        return "failed";
    }
}

/* Moves a send as far as it can go now. */
static void drive_send(mca_coll_llrdma_btlnet_t *net, req_t *r)
{
    peer_t *p = &net->peers[r->slot];
    struct mca_btl_base_module_t *btl = p->bb->btl;
    size_t off, len;
    int32_t ok = r->cb_ok, err = r->cb_err;

    if (ok > 0) {
        (void)opal_atomic_add_fetch_32(&r->cb_ok, -ok);
    }
    if (err > 0) {
        (void)opal_atomic_add_fetch_32(&r->cb_err, -err);
    }
    for (; ok > 0; --ok) {
        llrdma_np_put_done(&r->np, 1);
    }
    for (; err > 0; --err) {
        llrdma_np_put_done(&r->np, 0);
    }
    if (LLRDMA_NP_PUTTING == r->np.state && NULL == r->reg && LLRDMA_NP_OK == r->np.status) {
        r->reg = injected(net, 1) ? NULL
                                  : btl->btl_register_mem(btl, p->bb->btl_endpoint, r->buf,
                                                          r->np.bytes, REG_FLAGS);
        if (NULL == r->reg) {
            opal_output_verbose(1, mca_coll_llrdma_component.output,
                                "coll:llrdma: %s: btl_register_mem of a %lu-byte send buffer "
                                "failed",
                                net->comm->c_name, (unsigned long)r->np.bytes);
            llrdma_np_fail(&r->np, LLRDMA_NP_ERR_LOCAL);
        }
    }
    while (NULL != r->reg &&
           llrdma_np_next_piece(&r->np, btl->btl_put_limit, btl->btl_put_alignment, &off, &len)) {
        int rc = injected(net, 2)
                     ? OPAL_ERROR
                     : btl->btl_put(btl, p->bb->btl_endpoint, (char *)r->buf + off, r->raddr + off,
                                    r->reg, (mca_btl_base_registration_handle_t *)r->rhandle, len,
                                    0, MCA_BTL_NO_ORDER, put_cb, NULL, r);
        if (OPAL_ERR_OUT_OF_RESOURCE == rc) {
            break; /* tried again at the next progress */
        }
        if (OPAL_SUCCESS != rc && 1 != rc) {
            opal_output_verbose(1, mca_coll_llrdma_component.output,
                                "coll:llrdma: %s: btl_put of %lu bytes to rank %d failed: %d",
                                net->comm->c_name, (unsigned long)len, p->rank, rc);
            llrdma_np_fail(&r->np, LLRDMA_NP_ERR_LOCAL);
            break;
        }
        llrdma_np_put_started(&r->np, len);
        if (1 == rc) {
            llrdma_np_put_done(&r->np, 1); /* completed in the call: no callback */
        }
    }
    if (LLRDMA_NP_SEND_DONE == r->np.state && !r->done_posted) {
        r->done_posted = 1;
        memset(&r->out, 0, sizeof(r->out));
        r->out.type = CTL_DONE;
        r->out.status = r->np.status;
        r->out.bytes = r->np.bytes; /* 0: a failure carried (waitall_sizes) */
        r->out.seq = r->seq;
        (void)ctl_send(net, r); /* a failure leaves the receiver waiting: recorded */
        llrdma_np_done_sent(&r->np);
    }
}

static int finished(const req_t *r)
{
    return LLRDMA_NP_COMPLETE == r->np.state &&
           (MPI_REQUEST_NULL == r->out_req || REQUEST_COMPLETE(r->out_req));
}

/* Posts the peer's control receive while a message from it is due. */
static void listen_peer(mca_coll_llrdma_btlnet_t *net, peer_t *p)
{
    int rc;
    if (NULL != p->listen || p->due <= 0) {
        return;
    }
    rc = MCA_PML_CALL(irecv(&p->in, sizeof(p->in), MPI_BYTE, p->rank, MCA_COLL_BASE_TAG_ALLREDUCE,
                            net->comm, &p->listen));
    if (OMPI_SUCCESS != rc) {
        p->listen = NULL;
        record(net, rc);
    }
}

/* A control message from p: to the request it answers. */
static int dispatch(mca_coll_llrdma_btlnet_t *net, peer_t *p, const ctl_t *c)
{
    req_t *r;
    if (CTL_READY == c->type) {
        r = fifo_pop(&p->sq_head, &p->sq_tail);
        if (NULL != r) {
            --p->due;
            take_ready(r, c);
            return OMPI_SUCCESS;
        }
        if (p->early_n == EARLY_MAX) {
            return OMPI_ERR_OUT_OF_RESOURCE; /* cannot happen: the core caps live requests */
        }
        p->early[(p->early_at + p->early_n++) % EARLY_MAX] = *c;
        return OMPI_SUCCESS;
    }
    if (CTL_DONE == c->type && NULL != (r = fifo_take(&p->rq_head, &p->rq_tail, c->seq))) {
        --p->due;
        r->got = c->bytes;
        llrdma_np_on_done(&r->np, c->status);
        return OMPI_SUCCESS;
    }
    return OMPI_ERR_BAD_PARAM;
}

static void progress(mca_coll_llrdma_btlnet_t *net)
{
    for (int i = 0; i < net->npeers; ++i) {
        peer_t *p = &net->peers[i];
        if (NULL != p->listen && REQUEST_COMPLETE(p->listen)) {
            int rc = p->listen->req_status.MPI_ERROR;
            (void)ompi_request_free(&p->listen);
            p->listen = NULL;
            if (OMPI_SUCCESS == rc) {
                rc = dispatch(net, p, &p->in);
            }
            if (OMPI_SUCCESS != rc) {
                opal_output(0, "coll:llrdma: %s: a control message from rank %d is %s (%d)",
                            net->comm->c_name, p->rank,
                            OMPI_ERR_BAD_PARAM == rc ? "out of protocol" : "lost", rc);
                record(net, OMPI_ERROR);
                p->due = 0; /* nothing more is listened for: the call fails */
            }
        }
        listen_peer(net, p);
    }
    for (req_t *r = net->live; NULL != r; r = r->next) {
        if (r->np.send) {
            drive_send(net, r);
        }
    }
}

/* -------------------------------------------------- the transport's calls */

int mca_coll_llrdma_btlnet_isend(void *ctx, const void *buf, size_t bytes, int peer, int tag,
                                 void **req)
{
    mca_coll_llrdma_btlnet_t *net = (mca_coll_llrdma_btlnet_t *)ctx;
    int slot = peer >= 0 && peer < ompi_comm_size(net->comm) ? net->slot_of[peer] : -1;
    peer_t *p;
    req_t *r;

    (void)tag; /* per pair, sends and receives match in order (as over the PML) */
    if (slot < 0 || NULL == (r = req_get(net, slot, (void *)buf))) {
        return record(net, slot < 0 ? OMPI_ERR_BAD_PARAM : OMPI_ERR_OUT_OF_RESOURCE);
    }
    p = &net->peers[slot];
    llrdma_np_send_init(&r->np, bytes);
    if (p->early_n > 0) {
        take_ready(r, &p->early[p->early_at]);
        p->early_at = (p->early_at + 1) % EARLY_MAX;
        --p->early_n;
    } else {
        fifo_push(&p->sq_head, &p->sq_tail, r);
        ++p->due;
        listen_peer(net, p);
    }
    drive_send(net, r);
    *req = r;
    return 0;
}

int mca_coll_llrdma_btlnet_irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req)
{
    mca_coll_llrdma_btlnet_t *net = (mca_coll_llrdma_btlnet_t *)ctx;
    int slot = peer >= 0 && peer < ompi_comm_size(net->comm) ? net->slot_of[peer] : -1;
    struct mca_btl_base_module_t *btl;
    peer_t *p;
    req_t *r;

    (void)tag;
    if (slot < 0 || NULL == (r = req_get(net, slot, buf))) {
        return record(net, slot < 0 ? OMPI_ERR_BAD_PARAM : OMPI_ERR_OUT_OF_RESOURCE);
    }
    p = &net->peers[slot];
    btl = p->bb->btl;
    r->reg = net->sink || injected(net, 1)
                 ? NULL
                 : btl->btl_register_mem(btl, p->bb->btl_endpoint, buf, bytes, REG_FLAGS);
    memset(&r->out, 0, sizeof(r->out));
    r->out.type = CTL_READY;
    r->out.addr = (uint64_t)(uintptr_t)buf;
    r->out.bytes = bytes;
    r->out.seq = r->seq = p->ready_seq++;
    if (net->sink) {
        /* No buffer behind it: the sender puts nothing, sends no DONE, and
         * learns of the failure from this rank's own (empty) sends. */
        r->out.status = LLRDMA_NP_SUNK;
    } else if (NULL != r->reg) {
        memcpy(r->out.handle, r->reg, btl->btl_registration_handle_size);
    } else {
        /* The sender is told, sends no DONE, and both requests fail. */
        opal_output_verbose(1, mca_coll_llrdma_component.output,
                            "coll:llrdma: %s: btl_register_mem of a %lu-byte receive buffer "
                            "failed",
                            net->comm->c_name, (unsigned long)bytes);
        r->out.status = LLRDMA_NP_ERR_LOCAL;
    }
    if (OMPI_SUCCESS != ctl_send(net, r)) {
        r->out.status = LLRDMA_NP_ERR_LOCAL; /* no READY went out: nothing can come */
    }
    llrdma_np_recv_init(&r->np, bytes, r->out.status);
    if (LLRDMA_NP_WAIT_DONE == r->np.state) {
        fifo_push(&p->rq_head, &p->rq_tail, r);
        ++p->due;
    }
    listen_peer(net, p);
    *req = r;
    return 0;
}

int mca_coll_llrdma_btlnet_cancel(void *ctx, void *req)
{
    (void)ctx;
    llrdma_np_cancel(&((req_t *)req)->np);
    return 0;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A rank of this node is gone: nothing will answer.  Control receives are
 * cancelled (ob1 can while unmatched); requests not finished are leaked with
 * their registrations and buffers (pml->abandoned: the caller keeps the
 * scratch), and so is this transport's state. */
static void abandon(mca_coll_llrdma_btlnet_t *net, int n, void **reqs)
{
    for (int i = 0; i < net->npeers; ++i) {
        peer_t *p = &net->peers[i];
        if (NULL != p->listen) {
            (void)ompi_request_cancel(p->listen);
            for (int k = 0; k < 1000 && !REQUEST_COMPLETE(p->listen); ++k) {
                opal_progress();
            }
            if (!REQUEST_COMPLETE(p->listen)) {
                net->broken = 1; /* its buffer, p->in, must stay */
            }
            (void)ompi_request_free(&p->listen);
            p->listen = NULL;
        }
        p->due = 0;
    }
    for (int i = 0; i < n; ++i) {
        req_t *r = (req_t *)reqs[i];
        if (NULL == r) {
            continue;
        }
        if (finished(r)) {
            if (MPI_REQUEST_NULL != r->out_req) {
                (void)ompi_request_free(&r->out_req);
            }
            req_release(net, r);
        } else {
            unlink_live(net, r);
            ++net->pml->abandoned;
            net->broken = 1;
        }
        reqs[i] = NULL;
    }
}

int mca_coll_llrdma_btlnet_waitall(void *ctx, int n, void **reqs)
{
    return mca_coll_llrdma_btlnet_waitall_sizes(ctx, n, reqs, NULL);
}

/* The received bytes of each request too (bytes NULL: not wanted), from its
 * DONE: 0 is a rank's failure carried to this one (llrdma_ar_comm_t). */
int mca_coll_llrdma_btlnet_waitall_sizes(void *ctx, int n, void **reqs, size_t *bytes)
{
    mca_coll_llrdma_btlnet_t *net = (mca_coll_llrdma_btlnet_t *)ctx;
    mca_coll_llrdma_pml_ctx_t *c = net->pml;
    const uint64_t every = (uint64_t)mca_coll_llrdma_component.shm_liveness_ms * 1000000u;
    uint64_t next = now_ns() + every;
    int first = OMPI_SUCCESS;
    llrdma_ar_wait_t ws;

    memset(&ws, 0, sizeof(ws));
    for (unsigned k = 1;; ++k) {
        int left = 0;
        if (c->gone >= 0) {
            abandon(net, n, reqs);
            return record(net, OMPI_ERR_UNREACH);
        }
        progress(net);
        for (int i = 0; i < n; ++i) {
            left += NULL != reqs[i] && !finished((req_t *)reqs[i]);
        }
        if (0 == left) {
            break;
        }
        opal_progress();
        /* The one wait primitive (arena, PML, here): yield when the node is
         * oversubscribed, sleep when the wait is long. */
        llrdma_ar_wait_idle(&mca_coll_llrdma_component.wait, &ws, NULL, NULL);
        if (0 != every && 0 == (k & 255) && now_ns() >= next) {
            c->gone = mca_coll_llrdma_first_gone(net->comm);
            next = now_ns() + every;
        }
    }
    for (int i = 0; i < n; ++i) {
        req_t *r = (req_t *)reqs[i];
        if (NULL == r) {
            continue;
        }
        if (MPI_REQUEST_NULL != r->out_req) {
            if (OMPI_SUCCESS != r->out_req->req_status.MPI_ERROR && OMPI_SUCCESS == first) {
                first = r->out_req->req_status.MPI_ERROR;
            }
            (void)ompi_request_free(&r->out_req);
        }
        if (LLRDMA_NP_OK != r->np.status && OMPI_SUCCESS == first) {
            first = LLRDMA_NP_ERR_PEER == r->np.status ? OMPI_ERR_UNREACH : OMPI_ERROR;
            /* The first failed message of the call, said at verbose 1. */
            opal_output_verbose(1, mca_coll_llrdma_component.output,
                                "coll:llrdma: %s: a %lu-byte %s rank %d failed: %s",
                                net->comm->c_name, (unsigned long)r->np.bytes,
                                r->np.send ? "send to" : "receive from", net->peers[r->slot].rank,
                                np_status_text(r->np.status));
        }
        if (NULL != bytes) {
            bytes[i] = !r->np.send && LLRDMA_NP_OK == r->np.status ? (size_t)r->got : 0;
        }
        req_release(net, r);
        reqs[i] = NULL;
    }
    if (OMPI_SUCCESS != first || OMPI_SUCCESS != c->err) {
        return record(net, OMPI_SUCCESS != first ? first : c->err);
    }
    return 0;
}
