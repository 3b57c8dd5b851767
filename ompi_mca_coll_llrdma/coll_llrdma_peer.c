/*
 * coll/llrdma MPI_Allreduce on device buffers GPU to GPU (the peer path):
 * ranks of one node read each other's buffers through CUDA IPC, so no byte
 * crosses to the host.  The core (llrdma_core/llrdma_peer.h) decides, from
 * the records every rank publishes in the communicator's arena, whether the
 * call takes this path or the arena path, and orders the rounds; this file
 * fills the record and does the GPU side through libllrdma_cuda.so:
 *   - export: the identity, range and IPC handle of the allocation holding
 *     each buffer (handles cached by allocation identity);
 *   - open: maps other ranks' allocations and events, cached by (rank,
 *     identity); an allocation that replaced a cached one (a new identity
 *     over the same addresses) unmaps the old one;
 *   - reduce: one kernel over this rank's block of the vector, reading every
 *     rank's input and writing every rank's output, then this rank's
 *     interprocess event;
 *   - finish: the stream waits for every other rank's event, then the host
 *     waits for the stream.
 * Why a call or a communicator does not take the path is said once per
 * reason (verbose 1 when it holds for good, 10 when per call).
 */
#include "ompi_config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"
#include "opal/util/output.h"

#include "coll_llrdma.h"
#include "coll_llrdma_cuptr.h"
#include "llrdma_cuda.h"
#include "llrdma_peer.h"

/* Cached mappings per peer: a few allocations each (send and receive
 * buffers of the last calls). */
#define PEER_CACHE_PER_RANK 16

typedef struct {
    mca_coll_llrdma_module_t *m;
    const llrdma_cuda_api_t *api;
    llrdma_cuda_session_t *s;
    struct ompi_communicator_t *comm;
    int me, device, dt, lop;
    size_t esize;
    const void *sbuf; /* NULL in place */
    void *rbuf;
} peer_ctx_t;

static void say(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm, int reason, int who,
                const char *detail)
{
    int sticky = llrdma_peer_reason_sticky(reason);
    char whose[32] = "";

    if (!llrdma_peer_first_time(&m->peer, reason)) {
        return;
    }
    if (who >= 0) {
        snprintf(whose, sizeof(whose), ", rank %d", who);
    }
    opal_output_verbose(sticky ? 1 : 10, mca_coll_llrdma_component.output,
                        "coll:llrdma: %s: device buffers %s the GPU peer path (%s%s%s%s): %s",
                        comm->c_name, sticky ? "never take" : "did not take",
                        llrdma_peer_reason_text(reason), whose,
                        NULL != detail && detail[0] ? ": " : "", NULL != detail ? detail : "",
                        sticky ? "the shared-memory arena carries them on this communicator"
                               : "this call goes through the shared-memory arena");
}

static void close_mapping(void *ctx, int rank, void *value)
{
    const llrdma_cuda_api_t *api = (const llrdma_cuda_api_t *)ctx;
    (void)rank;
    if (NULL != api && NULL != value) {
        api->ipc_close(value);
    }
}

static void destroy_event(void *ctx, int rank, void *value)
{
    const llrdma_cuda_api_t *api = (const llrdma_cuda_api_t *)ctx;
    (void)rank;
    if (NULL != api && NULL != value) {
        api->event_destroy(value);
    }
}

void mca_coll_llrdma_peer_release(mca_coll_llrdma_module_t *m)
{
    const llrdma_cuda_api_t *api = mca_coll_llrdma_gpu_loaded();
    llrdma_peer_cache_free(m->peer_maps, close_mapping, (void *)api);
    llrdma_peer_cache_free(m->peer_events, destroy_event, (void *)api);
    llrdma_peer_cache_free(m->peer_exports, NULL, NULL);
    m->peer_maps = m->peer_events = m->peer_exports = NULL;
    if (NULL != m->peer_event && NULL != api) {
        api->event_destroy(m->peer_event);
    }
    m->peer_event = NULL;
}

int mca_coll_llrdma_peer_wanted(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm)
{
    return mca_coll_llrdma_gpu_possible() &&
           llrdma_peer_attempt(&m->peer, &m->shm, ompi_comm_size(comm), m->shm.call);
}

/* This rank's buffer as published: identity, range, IPC handle (cached). */
static int export_buf(peer_ctx_t *g, const void *p, llrdma_peer_buf_t *b, char *err, size_t len)
{
    unsigned long long id = 0;
    void *base = NULL;
    size_t size = 0;

    if (0 != g->api->mem_range(p, &id, &base, &size, err, len)) {
        return -1;
    }
    b->id = id;
    b->base = (uint64_t)(uintptr_t)base;
    b->size = size;
    b->offset = (uint64_t)((const char *)p - (const char *)base);
    if (llrdma_peer_cache_find(g->m->peer_exports, g->me, id, NULL, b->handle)) {
        return 0;
    }
    if (0 != g->api->ipc_export(base, b->handle, err, len)) {
        return -1;
    }
    return llrdma_peer_cache_add(g->m->peer_exports, g->me, id, b->base, b->size, NULL, b->handle,
                                 NULL, NULL);
}

/* Fills *rec; LLRDMA_PEER_OK (with a session begun) or why not. */
static int describe(peer_ctx_t *g, int skind, int rkind, llrdma_peer_record_t *rec)
{
    mca_coll_llrdma_module_t *m = g->m;
    char err[512] = "";
    static unsigned long long serial;

    if (LLRDMA_MEM_DEVICE != rkind) {
        return LLRDMA_MEM_MANAGED == rkind ? LLRDMA_PEER_MANAGED : LLRDMA_PEER_HOST_RECV;
    }
    if (NULL != g->sbuf && LLRDMA_MEM_DEVICE != skind) {
        return LLRDMA_MEM_MANAGED == skind ? LLRDMA_PEER_MANAGED : LLRDMA_PEER_HOST_SEND;
    }
    if (NULL == (g->api = mca_coll_llrdma_gpu_api(g->comm))) {
        return LLRDMA_PEER_NO_LIBRARY;
    }
    if (NULL == m->peer_maps &&
        NULL == (m->peer_maps = llrdma_peer_cache_new(PEER_CACHE_PER_RANK))) {
        return LLRDMA_PEER_DEVICE;
    }
    if (NULL == m->peer_events && NULL == (m->peer_events = llrdma_peer_cache_new(1))) {
        return LLRDMA_PEER_DEVICE;
    }
    if (NULL == m->peer_exports &&
        NULL == (m->peer_exports = llrdma_peer_cache_new(PEER_CACHE_PER_RANK))) {
        return LLRDMA_PEER_DEVICE;
    }
    if (0 != g->api->begin(g->device, &g->s, err, sizeof(err))) {
        say(m, g->comm, LLRDMA_PEER_DEVICE, -1, err);
        return LLRDMA_PEER_DEVICE;
    }
    /* The GPU's facts, once per device; the event on the first device used. */
    if (m->peer_dev != g->device || 0 == m->peer_key) {
        if (0 != g->api->device_info(g->device, m->peer_bus_id, sizeof(m->peer_bus_id),
                                     m->peer_uuid, err, sizeof(err)) ||
            0 != g->api->device_key(g->device, &m->peer_key, err, sizeof(err))) {
            m->peer_key = 0;
            say(m, g->comm, LLRDMA_PEER_DEVICE, -1, err);
            return LLRDMA_PEER_DEVICE;
        }
        m->peer_dev = g->device;
    }
    if (NULL == m->peer_event) {
        if (0 != g->api->event_create(&m->peer_event, m->peer_event_handle, err, sizeof(err))) {
            m->peer_event = NULL;
            say(m, g->comm, LLRDMA_PEER_DEVICE, -1, err);
            return LLRDMA_PEER_DEVICE;
        }
        m->peer_event_id = ((unsigned long long)getpid() << 20) + ++serial;
    }
    rec->device_key = m->peer_key;
    memcpy(rec->uuid, m->peer_uuid, sizeof(rec->uuid));
    memcpy(rec->bus_id, m->peer_bus_id, sizeof(rec->bus_id));
    rec->bus_id[sizeof(rec->bus_id) - 1] = '\0';
    rec->event_id = m->peer_event_id;
    memcpy(rec->event_handle, m->peer_event_handle, sizeof(rec->event_handle));
    if (0 != export_buf(g, g->rbuf, &rec->out, err, sizeof(err)) ||
        (NULL != g->sbuf && 0 != export_buf(g, g->sbuf, &rec->in, err, sizeof(err)))) {
        say(m, g->comm, LLRDMA_PEER_EXPORT, -1, err);
        return LLRDMA_PEER_EXPORT;
    }
    if (NULL == g->sbuf) {
        rec->in = rec->out;
    }
    return LLRDMA_PEER_OK;
}

static int map_buf(peer_ctx_t *g, int q, const llrdma_peer_buf_t *b, char *err, size_t len)
{
    void *mapped = NULL;
    if (llrdma_peer_cache_find(g->m->peer_maps, q, b->id, NULL, NULL)) {
        return 0;
    }
    if (0 != g->api->ipc_open(b->handle, &mapped, err, len)) {
        return -1;
    }
    if (0 != llrdma_peer_cache_add(g->m->peer_maps, q, b->id, b->base, b->size, mapped, NULL,
                                   close_mapping, (void *)g->api)) {
        g->api->ipc_close(mapped);
        snprintf(err, len, "out of memory for the IPC handle cache");
        return -1;
    }
    return 0;
}

static int peer_open(void *ctx, const llrdma_peer_record_t *const *recs, int n)
{
    peer_ctx_t *g = (peer_ctx_t *)ctx;
    char err[512] = "";
    void *ev = NULL;

    for (int q = 0; q < n; ++q) {
        if (q == g->me) {
            continue;
        }
        int access = g->api->peer_access(g->device, recs[q]->bus_id, err, sizeof(err));
        if (0 == access) {
            return LLRDMA_PEER_NO_ACCESS;
        }
        if (access < 0) {
            say(g->m, g->comm, LLRDMA_PEER_DEVICE, q, err);
            return LLRDMA_PEER_DEVICE;
        }
        if (0 != map_buf(g, q, &recs[q]->in, err, sizeof(err)) ||
            0 != map_buf(g, q, &recs[q]->out, err, sizeof(err))) {
            say(g->m, g->comm, LLRDMA_PEER_OPEN, q, err);
            return LLRDMA_PEER_OPEN;
        }
        if (!llrdma_peer_cache_find(g->m->peer_events, q, recs[q]->event_id, NULL, NULL)) {
            /* One event per rank: a new one (same "address") replaces the old. */
            if (0 != g->api->event_open(recs[q]->event_handle, &ev, err, sizeof(err))) {
                say(g->m, g->comm, LLRDMA_PEER_OPEN, q, err);
                return LLRDMA_PEER_OPEN;
            }
            if (0 != llrdma_peer_cache_add(g->m->peer_events, q, recs[q]->event_id, 1, 1, ev, NULL,
                                           destroy_event, (void *)g->api)) {
                g->api->event_destroy(ev);
                return LLRDMA_PEER_OPEN;
            }
        }
    }
    return LLRDMA_PEER_OK;
}

/* Where rank q's buffer is, here. */
static void *at(peer_ctx_t *g, int q, const llrdma_peer_buf_t *b, void *local)
{
    void *mapped = NULL;
    if (q == g->me) {
        return local;
    }
    if (!llrdma_peer_cache_find(g->m->peer_maps, q, b->id, &mapped, NULL)) {
        return NULL; /* cannot happen: the confirm round mapped it */
    }
    return (char *)mapped + b->offset;
}

static int peer_reduce(void *ctx, const llrdma_peer_record_t *const *recs, int n, size_t first,
                       size_t count)
{
    peer_ctx_t *g = (peer_ctx_t *)ctx;
    const void *in[LLRDMA_PEER_MAX_RANKS];
    void *out[LLRDMA_PEER_MAX_RANKS];
    size_t off = first * g->esize;

    if (count > 0) {
        for (int q = 0; q < n; ++q) {
            char *i = (char *)at(g, q, &recs[q]->in, NULL != g->sbuf ? (void *)g->sbuf : g->rbuf);
            char *o = (char *)at(g, q, &recs[q]->out, g->rbuf);
            if (NULL == i || NULL == o) {
                return -1;
            }
            in[q] = i + off;
            out[q] = o + off;
        }
        if (0 != g->api->peer_reduce(g->s, g->lop, g->dt, in, out, n, count)) {
            return -1;
        }
    }
    return g->api->event_record(g->s, g->m->peer_event);
}

static int peer_finish(void *ctx, const llrdma_peer_record_t *const *recs, int n)
{
    peer_ctx_t *g = (peer_ctx_t *)ctx;
    void *ev = NULL;
    for (int q = 0; q < n; ++q) {
        if (q == g->me) {
            continue;
        }
        if (!llrdma_peer_cache_find(g->m->peer_events, q, recs[q]->event_id, &ev, NULL) ||
            0 != g->api->stream_wait(g->s, ev)) {
            return -1;
        }
    }
    return g->api->sync(g->s);
}

int mca_coll_llrdma_gpu_peer(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                             const void *sbuf, void *rbuf, size_t count, int dt, int lop,
                             size_t esize, int skind, int rkind, int device)
{
    const mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    llrdma_peer_record_t rec;
    llrdma_peer_ops_t ops = {NULL, peer_open, peer_reduce, peer_finish};
    peer_ctx_t g;
    char err[512];
    int rc, why = LLRDMA_PEER_OK, who = -1, n = ompi_comm_size(comm);

    memset(&g, 0, sizeof(g));
    memset(&rec, 0, sizeof(rec));
    g.m = m;
    g.comm = comm;
    g.me = ompi_comm_rank(comm);
    g.device = device;
    g.dt = dt;
    g.lop = lop;
    g.esize = esize;
    g.sbuf = sbuf;
    g.rbuf = rbuf;
    ops.ctx = &g;
    rec.reason = describe(&g, skind, rkind, &rec);
    rc = llrdma_peer_run(&m->shm, g.me, n, &m->peer, &rec, &ops, count,
                         LLRDMA_GPU_PEER_FORCE == c->gpu_peer, &why, &who);
    if (NULL != g.s && 0 != g.api->end(g.s, err, sizeof(err))) {
        opal_output(0, "coll:llrdma: MPI_Allreduce on %s (GPU peer path) failed: %s", comm->c_name,
                    err);
        return OMPI_ERROR;
    }
    if (LLRDMA_PEER_FALLBACK == rc) {
        say(m, comm, why, who, "");
        return MCA_COLL_LLRDMA_PEER_FALLBACK;
    }
    if (LLRDMA_PEER_ERR_SYNC == rc) {
        opal_output(0,
                    "coll:llrdma: MPI_Allreduce on %s (GPU peer path, call %llu) failed: rank "
                    "%d's arena slot held no peer record of this call, so the ranks disagree on "
                    "which calls try the GPU peer path (a bug; coll_llrdma_gpu_peer off avoids "
                    "it); the next call sets up a fresh arena",
                    comm->c_name, (unsigned long long)m->shm.call, who);
        return OMPI_ERROR;
    }
    if (LLRDMA_AR_OK == rc && c->verbose >= 10) {
        opal_output_verbose(10, c->output,
                            "coll:llrdma: allreduce %lu bytes (%s %s) on %s, %d ranks: GPU peer "
                            "path (CUDA IPC), block %d of %d",
                            (unsigned long)(count * esize), llrdma_ar_dtype_name(dt),
                            llrdma_ar_op_name(lop), comm->c_name, n, g.me, n);
    }
    return mca_coll_llrdma_ar_status(rc, OMPI_SUCCESS, comm);
}
