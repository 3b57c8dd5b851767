/*
 * coll/llrdma's message transport over the PML (the core's llrdma_ar_comm_t
 * isend / irecv / waitall / cancel), shared by the host algorithms, the GPU
 * staging transport and the inter-node step of the hierarchical schedule.
 *
 * Dead ranks (docs/allreduce.md, "Failures").  ob1 cannot cancel a send and
 * a receive from a process that died never completes, so a blocking wait
 * would wait forever.  A wait that has not completed for
 * coll_llrdma_shm_liveness_ms asks whether its peer still runs (its pid,
 * published in the modex when the component opens).  Only a gone peer's
 * messages are given up, and a receive given up reads as an empty message:
 * the core carries the failure on through the rest of the schedule, so the
 * messages of live peers are still matched and completed.  Giving those up
 * too would let the PML read a send's buffer after the call returned, and a
 * peer still in the call receive the caller's next input.  A peer on another
 * node cannot be checked: its wait gives up when any rank of this node is
 * gone, as the call fails anyway; the death of a remote rank ends the job
 * through the launcher (or breaks the connection).
 */
#include "ompi_config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"
#include "ompi/request/request.h"
#include "llrdma_ompi_compat.h" /* the PMIx interface of this series */
#include "opal/util/output.h"
#include "opal/util/proc.h"

#include "coll_llrdma.h"

#define LLRDMA_PID_KEY "coll_llrdma.pid"

void mca_coll_llrdma_publish_pid(void)
{
    /* Fails without a runtime (ompi_info); without it ranks are never
     * found gone: the old behaviour.  Only where coll/llrdma can be chosen:
     * the record also says so to the other ranks (check_loaded). */
    if (mca_coll_llrdma_component.priority <= 0) {
        return;
    }
    mca_coll_llrdma_component.published =
        OPAL_SUCCESS == llrdma_modex_put_int64(LLRDMA_PID_KEY, (int64_t)getpid());
}

int mca_coll_llrdma_world_rank_has_coll(int rank)
{
    opal_process_name_t name = OPAL_PROC_MY_NAME;
    int64_t pid = 0;

    name.vpid = (opal_vpid_t)rank;
    return OPAL_SUCCESS == llrdma_modex_get_int64(&name, LLRDMA_PID_KEY, &pid);
}

int mca_coll_llrdma_pid_alive(long pid)
{
    char path[64], buf[512];
    const char *state;
    ssize_t n;
    int fd;

    if (pid <= 0) {
        return 1;
    }
    if (0 != kill((pid_t)pid, 0) && ESRCH == errno) {
        return 0;
    }
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    if ((fd = open(path, O_RDONLY)) < 0) {
        return ENOENT == errno ? 0 : 1;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 1;
    }
    buf[n] = '\0';
    state = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold anything */
    return !(NULL != state && ' ' == state[1] && ('Z' == state[2] || 'X' == state[2]));
}

/* The pid of communicator rank r when it runs on this node, else 0. */
static long local_pid(struct ompi_communicator_t *comm, int r)
{
    ompi_proc_t *proc = ompi_comm_peer_lookup(comm, r);
    int64_t pid = 0;

    if (NULL == proc || proc == ompi_proc_local() ||
        !OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags)) {
        return 0;
    }
    return OPAL_SUCCESS == llrdma_modex_get_int64(&proc->super.proc_name, LLRDMA_PID_KEY, &pid)
               ? (long)pid
               : 0;
}

/* The lowest rank of comm on this node whose process is gone, or -1. */
int mca_coll_llrdma_first_gone(struct ompi_communicator_t *comm)
{
    int n = ompi_comm_size(comm);
    for (int r = 0; r < n; ++r) {
        long pid = local_pid(comm, r);
        if (pid > 0 && !mca_coll_llrdma_pid_alive(pid)) {
            return r;
        }
    }
    return -1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void mca_coll_llrdma_pml_ctx_init(mca_coll_llrdma_pml_ctx_t *c, struct ompi_communicator_t *comm)
{
    c->comm = comm;
    c->err = OMPI_SUCCESS;
    c->gone = -1;
    c->abandoned = 0;
    c->sink = NULL;
    c->sink_bytes = 0;
    c->ntrack = 0;
}

/* A message to or from a rank already known gone is not posted: this stands
 * for it, complete, and a receive reads as empty. */
static char gone_req_storage;
#define GONE_REQ ((ompi_request_t *)(void *)&gone_req_storage)

static void track(mca_coll_llrdma_pml_ctx_t *c, ompi_request_t *r, int peer)
{
    if (c->ntrack < MCA_COLL_LLRDMA_PML_TRACK) {
        c->track[c->ntrack].req = r;
        c->track[c->ntrack].peer = peer;
        ++c->ntrack;
    }
}

/* The request's peer, or -1 (not in the table: it was full). */
static int untrack(mca_coll_llrdma_pml_ctx_t *c, const ompi_request_t *r)
{
    for (int i = 0; i < c->ntrack; ++i) {
        if (c->track[i].req == r) {
            int peer = c->track[i].peer;
            c->track[i] = c->track[--c->ntrack];
            return peer;
        }
    }
    return -1;
}

static int record(mca_coll_llrdma_pml_ctx_t *c, int rc)
{
    if (OMPI_SUCCESS == c->err) {
        c->err = rc;
    }
    return -1;
}

/* All core tags share MCA_COLL_BASE_TAG_ALLREDUCE: the core keeps, per ordered
 * pair of ranks, the same order of sends and receives, and every message of a
 * call is received within that call. */
int mca_coll_llrdma_pml_isend(void *ctx, const void *buf, size_t bytes, int peer, int tag,
                              void **req)
{
    mca_coll_llrdma_pml_ctx_t *c = (mca_coll_llrdma_pml_ctx_t *)ctx;
    ompi_request_t *r = MPI_REQUEST_NULL;
    int rc;

    (void)tag;
    if (peer == c->gone) {
        *req = GONE_REQ;
        return 0;
    }
    if (0 != mca_coll_llrdma_component.test_die_send &&
        0 == --mca_coll_llrdma_component.test_die_send) {
        raise(SIGKILL); /* tests: a rank that dies between its messages */
    }
    rc = MCA_PML_CALL(isend(buf, bytes, MPI_BYTE, peer, MCA_COLL_BASE_TAG_ALLREDUCE,
                            MCA_PML_BASE_SEND_STANDARD, c->comm, &r));
    if (OMPI_SUCCESS != rc) {
        return record(c, rc);
    }
    track(c, r, peer);
    *req = r;
    return 0;
}

int mca_coll_llrdma_pml_irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req)
{
    mca_coll_llrdma_pml_ctx_t *c = (mca_coll_llrdma_pml_ctx_t *)ctx;
    ompi_request_t *r = MPI_REQUEST_NULL;
    int rc;

    (void)tag;
    if (peer == c->gone) {
        *req = GONE_REQ;
        return 0;
    }
    if (NULL != c->sink) { /* matched and dropped: the call fails anyway */
        if (bytes > c->sink_bytes) {
            return record(c, OMPI_ERR_BUFFER);
        }
        buf = c->sink;
    }
    rc = MCA_PML_CALL(irecv(buf, bytes, MPI_BYTE, peer, MCA_COLL_BASE_TAG_ALLREDUCE, c->comm, &r));
    if (OMPI_SUCCESS != rc) {
        return record(c, rc);
    }
    track(c, r, peer);
    *req = r;
    return 0;
}

/* Give up a request a gone rank keeps from completing: a receive is
 * cancelled (ob1 can while it is unmatched); what still is not complete is
 * freed incomplete (MPI lets it; the PML releases it if it ever completes)
 * and counted, so the caller keeps the memory it points into. */
static void abandon(mca_coll_llrdma_pml_ctx_t *c, ompi_request_t **r)
{
    if (!REQUEST_COMPLETE(*r)) {
        /* Never twice: the core may have cancelled it (drain), and ob1
         * unlinks a receive from its queue on every cancel. */
        (void)ompi_request_cancel(*r);
    }
    for (int k = 0; k < 1000 && !REQUEST_COMPLETE(*r); ++k) {
        opal_progress(); /* a cancelled receive completes here */
    }
    if (!REQUEST_COMPLETE(*r)) {
        ++c->abandoned;
    }
    (void)ompi_request_free(r);
}

/* Whether waiting for `peer` is pointless: the peer itself when it runs on
 * this node and is gone; for a peer elsewhere (or unknown: -1), any gone
 * rank of this node.  -1: wait on. */
static int peer_gone(mca_coll_llrdma_pml_ctx_t *c, int peer)
{
    long pid = peer >= 0 ? local_pid(c->comm, peer) : 0;

    if (pid > 0) {
        return mca_coll_llrdma_pid_alive(pid) ? -1 : peer;
    }
    if (peer >= 0 && peer == ompi_comm_rank(c->comm)) {
        return -1;
    }
    return c->gone >= 0 ? c->gone : mca_coll_llrdma_first_gone(c->comm);
}

/* wait_one's result when it gave up a request of the gone peer itself. */
#define GAVE_UP_PEER 1

/* One request to completion, or until waiting for it is pointless
 * (peer_gone); *st: its status.  OMPI_SUCCESS, GAVE_UP_PEER (the request
 * was the gone peer's: given up) or an error (OMPI_ERR_UNREACH: given up
 * for another gone rank). */
static int wait_one(mca_coll_llrdma_pml_ctx_t *c, ompi_request_t **r, ompi_status_public_t *st,
                    int peer)
{
    const uint64_t every = (uint64_t)mca_coll_llrdma_component.shm_liveness_ms * 1000000u;
    llrdma_ar_wait_t ws;
    uint64_t next;
    int g;

    if (c->gone >= 0 && (peer == c->gone || peer < 0 || local_pid(c->comm, peer) <= 0)) {
        g = c->gone; /* known already: no waiting at all */
        goto give_up;
    }
    memset(&ws, 0, sizeof(ws));
    next = 0 != every ? now_ns() + every : 0;
    for (unsigned k = 1;; ++k) {
        int flag = 0, rc = ompi_request_test(r, &flag, st); /* progresses */
        if (OMPI_SUCCESS != rc || flag) {
            return rc;
        }
        /* The arena's wait policy: yield (oversubscribed), sleep (long). */
        llrdma_ar_wait_idle(&mca_coll_llrdma_component.wait, &ws, NULL, NULL);
        if (0 != every && 0 == (k & 255) && now_ns() >= next) {
            if ((g = peer_gone(c, peer)) >= 0) {
                goto give_up;
            }
            next = now_ns() + every;
        }
    }
give_up:
    if (c->gone < 0) {
        c->gone = g;
    }
    abandon(c, r);
    return peer == g ? GAVE_UP_PEER : OMPI_ERR_UNREACH;
}

/* The core's contract: every request completes and is released, even on error.
 * ompi_request_wait_all may leave requests pending after a failure
 * (MPI_ERR_PENDING), so wait them one by one; a request that failed is not
 * freed by the wait and is freed here. */
int mca_coll_llrdma_pml_waitall(void *ctx, int n, void **reqs)
{
    return mca_coll_llrdma_pml_waitall_sizes(ctx, n, reqs, NULL);
}

/* The received bytes of each request too (bytes NULL: not wanted): an empty
 * message is a rank's failure carried to this one (llrdma_ar_comm_t). */
int mca_coll_llrdma_pml_waitall_sizes(void *ctx, int n, void **reqs, size_t *bytes)
{
    mca_coll_llrdma_pml_ctx_t *c = (mca_coll_llrdma_pml_ctx_t *)ctx;
    int i, rc, first = OMPI_SUCCESS;

    for (i = 0; i < n; ++i) {
        ompi_request_t *r = (ompi_request_t *)reqs[i];
        ompi_status_public_t st;
        memset(&st, 0, sizeof(st)); /* _ucount 0: a receive given up reads empty */
        if (GONE_REQ == r) {
            rc = NULL != bytes ? OMPI_SUCCESS : OMPI_ERR_UNREACH;
            r = MPI_REQUEST_NULL;
        } else {
            rc = wait_one(c, &r, &st, untrack(c, r));
        }
        if (GAVE_UP_PEER == rc) {
            /* An empty message where the core can see it (it carries the
             * failure on); an error where it cannot. */
            rc = NULL != bytes ? OMPI_SUCCESS : OMPI_ERR_UNREACH;
        }
        if (NULL != bytes) {
            bytes[i] = OMPI_SUCCESS == rc ? st._ucount : 0;
        }
        if (MPI_REQUEST_NULL != r) {
            (void)ompi_request_free(&r);
        }
        reqs[i] = NULL;
        if (OMPI_SUCCESS != rc && OMPI_SUCCESS == first) {
            first = rc;
        }
    }
    if (OMPI_SUCCESS != first) {
        return record(c, first);
    }
    return 0;
}

int mca_coll_llrdma_pml_cancel(void *ctx, void *req)
{
    (void)ctx;
    return GONE_REQ == req ? OMPI_SUCCESS : ompi_request_cancel((ompi_request_t *)req);
}

int mca_coll_llrdma_pml_gone(mca_coll_llrdma_module_t *m, mca_coll_llrdma_pml_ctx_t *c, int rc)
{
    /* A failure carried in from another rank may have come from a death this
     * rank's own messages did not see: it looks. */
    if (LLRDMA_AR_ERR_PEER_FAILED == rc && c->gone < 0 &&
        0 != mca_coll_llrdma_component.shm_liveness_ms) {
        c->gone = mca_coll_llrdma_first_gone(c->comm);
    }
    if (c->gone < 0) {
        return 0;
    }
    m->msg_gone = c->gone;
    mca_coll_llrdma_say_gone(m, c->comm, c->gone, "a message");
    return 1;
}

void mca_coll_llrdma_say_gone(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                              int gone, const char *what)
{
    if (!m->gone_said) {
        m->gone_said = 1;
        opal_output(0,
                    "coll:llrdma: MPI_Allreduce on %s: rank %d is gone (its process exited) "
                    "while rank %d waited for %s; this and every later Allreduce on %s fails",
                    comm->c_name, gone, ompi_comm_rank(comm), what, comm->c_name);
    }
}
