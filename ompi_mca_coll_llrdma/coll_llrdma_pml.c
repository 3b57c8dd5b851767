/*
 * coll/llrdma's message transport over the PML (the core's llrdma_ar_comm_t
 * isend / irecv / waitall / cancel), shared by the host algorithms, the GPU
 * staging transport and the inter-node step of the hierarchical schedule.
 *
 * Dead ranks (docs/allreduce.md, "Failures").  ob1 cannot cancel a send and
 * a receive from a process that died never completes, so a blocking wait
 * would wait forever.  A wait that has not completed for
 * coll_llrdma_shm_liveness_ms asks whether every rank of the communicator
 * on this node still runs (its pid, published in the modex when the
 * component opens); on the first that does not, the call stops waiting and
 * fails naming it.  Ranks of other nodes are not checked: their death ends
 * the job through the launcher (or breaks the connection).
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
    rc = MCA_PML_CALL(isend(buf, bytes, MPI_BYTE, peer, MCA_COLL_BASE_TAG_ALLREDUCE,
                            MCA_PML_BASE_SEND_STANDARD, c->comm, &r));
    if (OMPI_SUCCESS != rc) {
        return record(c, rc);
    }
    *req = r;
    return 0;
}

int mca_coll_llrdma_pml_irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req)
{
    mca_coll_llrdma_pml_ctx_t *c = (mca_coll_llrdma_pml_ctx_t *)ctx;
    ompi_request_t *r = MPI_REQUEST_NULL;
    int rc;

    (void)tag;
    rc = MCA_PML_CALL(irecv(buf, bytes, MPI_BYTE, peer, MCA_COLL_BASE_TAG_ALLREDUCE, c->comm, &r));
    if (OMPI_SUCCESS != rc) {
        return record(c, rc);
    }
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

/* One request to completion, or until a rank of this node is found gone;
 * *st: its status. */
static int wait_one(mca_coll_llrdma_pml_ctx_t *c, ompi_request_t **r, ompi_status_public_t *st)
{
    const uint64_t every = (uint64_t)mca_coll_llrdma_component.shm_liveness_ms * 1000000u;
    llrdma_ar_wait_t ws;
    uint64_t next;

    if (c->gone >= 0) {
        abandon(c, r);
        return OMPI_ERR_UNREACH;
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
            c->gone = mca_coll_llrdma_first_gone(c->comm);
            if (c->gone >= 0) {
                abandon(c, r);
                return OMPI_ERR_UNREACH;
            }
            next = now_ns() + every;
        }
    }
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
        memset(&st, 0, sizeof(st));
        rc = wait_one(c, &r, &st);
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
    return ompi_request_cancel((ompi_request_t *)req);
}

int mca_coll_llrdma_pml_gone(mca_coll_llrdma_module_t *m, const mca_coll_llrdma_pml_ctx_t *c)
{
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
