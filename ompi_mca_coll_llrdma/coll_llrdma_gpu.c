/*
 * coll/llrdma MPI_Allreduce on GPU buffers, for Open MPI builds that are not
 * CUDA-aware: no device pointer ever reaches the PML.
 *
 * The core runs the very schedule of the host path (so ranks with host and
 * ranks with device buffers still match, and the bits agree: the GPU kernels
 * reduce in the same order with the same IEEE operations).  Only the memory
 * hooks differ: copies and reductions are enqueued on one CUDA stream, and
 * the transport below stages every message through pinned bounce buffers:
 *   isend: device -> bounce (waits for that copy only), PML send of the bounce;
 *   irecv: PML receive into a bounce; once it completed (waitall), the
 *          bounce -> device copy is enqueued on the stream, ahead of the
 *          kernel that reduces it, with no host wait.
 * With the ring's several segments in flight, one segment's copy and
 * reduction overlap the next ones' transfers.  The stream is drained before
 * the call returns.
 *
 * The CUDA part lives in libllrdma_cuda.so (llrdma_core/cuda/), dlopen()ed the first
 * time a device buffer shows up, so the component itself has no CUDA
 * dependency.  Buffers are classified per call through libcuda
 * (coll_llrdma_cuptr.c), which never initialises CUDA.
 */
#include "ompi_config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"
#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

#include "coll_llrdma.h"
#include "coll_llrdma_cuptr.h"
#include "llrdma_allreduce.h"
#include "llrdma_cuda.h"

static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static llrdma_cuptr_t detector;

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static const llrdma_cuda_api_t *cuda_api;
static char lib_error[512];

/* 1 once the detector is set up without a CUDA driver: every pointer is
 * host memory, said without a call (the hot path of small host calls). */
static int no_driver;

static void detect_init(void)
{
    llrdma_cuptr_open(&detector, NULL);
    __atomic_store_n(&no_driver, NULL == detector.getattrs, __ATOMIC_RELEASE);
}

int mca_coll_llrdma_gpu_kind(const void *p, int *device)
{
    if (__atomic_load_n(&no_driver, __ATOMIC_ACQUIRE)) {
        *device = -1;
        return LLRDMA_MEM_HOST;
    }
    pthread_once(&detect_once, detect_init);
    return (int)llrdma_cuptr_kind(&detector, p, device);
}

int mca_coll_llrdma_gpu_driver(void)
{
    if (!mca_coll_llrdma_gpu_possible()) {
        return 0;
    }
    pthread_once(&detect_once, detect_init);
    return NULL != detector.getattrs;
}

/* LLRDMA_CUDA_LIB (build tree, tests) overrides the installed path. */
static void lib_init(void)
{
    const char *path = getenv("LLRDMA_CUDA_LIB");
    const llrdma_cuda_api_t *(*get)(int);
    void *h;

#ifdef LLRDMA_CUDA_LIBPATH
    if (NULL == path || '\0' == path[0]) {
        path = LLRDMA_CUDA_LIBPATH;
    }
#endif
    if (NULL == path || '\0' == path[0]) {
        snprintf(lib_error, sizeof(lib_error),
                 "llrdma was built without CUDA (configure found no CUDA Toolkit), and "
                 "LLRDMA_CUDA_LIB names no " LLRDMA_CUDA_LIB_NAME);
        return;
    }
    /* Never unloaded: it holds the CUDA runtime, whose teardown at dlclose is
     * not safe while the application still uses CUDA. */
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (NULL == h) {
        snprintf(lib_error, sizeof(lib_error), "cannot load %s: %s", path, dlerror());
        return;
    }
    *(void **)&get = dlsym(h, "llrdma_cuda_api");
    if (NULL == get || NULL == (cuda_api = get(LLRDMA_CUDA_API_VERSION))) {
        snprintf(lib_error, sizeof(lib_error), "%s does not provide API version %d", path,
                 LLRDMA_CUDA_API_VERSION);
        cuda_api = NULL;
    }
}

/* The library, or NULL with the reason logged.  (CUDA-aware Open MPI builds
 * never get here with device buffers: coll/cuda, above us, stages them.) */
static const llrdma_cuda_api_t *load_api(struct ompi_communicator_t *comm)
{
    pthread_once(&lib_once, lib_init);
    if (NULL == cuda_api) {
        opal_output(0,
                    "coll:llrdma: MPI_Allreduce on %s got GPU buffers, but the GPU path is "
                    "unavailable: %s",
                    comm->c_name, lib_error);
    }
    return cuda_api;
}

const llrdma_cuda_api_t *mca_coll_llrdma_gpu_api(struct ompi_communicator_t *comm)
{
    return load_api(comm);
}

const llrdma_cuda_api_t *mca_coll_llrdma_gpu_loaded(void)
{
    return cuda_api;
}

int mca_coll_llrdma_gpu_possible(void)
{
#ifdef LLRDMA_CUDA_LIBPATH
    return 1;
#else
    const char *path = getenv("LLRDMA_CUDA_LIB");
    return NULL != path && '\0' != path[0];
#endif
}

void mca_coll_llrdma_gpu_unregister(mca_coll_llrdma_module_t *m)
{
    if (m->shm_pinned > 0 && NULL != cuda_api) {
        cuda_api->host_unregister(m->shm.base);
    }
    m->shm_pinned = 0;
}

/* Pins and maps the arena once per communicator: copies between device
 * buffers and the arena are then asynchronous DMA, and the reduction kernels
 * read it in place (device fold).  Pinned but not mapped: copies only, the
 * CPU folds.  Not pinned: it still works (CUDA stages pageable copies),
 * slower.  Either shortfall is said once at verbose 1. */
static void pin_arena(mca_coll_llrdma_module_t *m, const llrdma_cuda_api_t *api,
                      struct ompi_communicator_t *comm)
{
    char err[512];
    int rc;
    if (0 != m->shm_pinned || NULL == m->shm.base) {
        return;
    }
    rc = api->host_register(m->shm.base, m->shm_bytes, err, sizeof(err));
    m->shm_pinned = (0 == rc) ? 1 : (1 == rc) ? 2 : -1;
    if (0 != rc) {
        opal_output_verbose(1, mca_coll_llrdma_component.output,
                            "coll:llrdma: %s: shared-memory arena %s (%s); GPU-buffer "
                            "Allreduces fold it on the CPU",
                            comm->c_name, 1 == rc ? "pinned for copies only" : "not pinned", err);
    }
}

void mca_coll_llrdma_gpu_finalize(void)
{
    /* Only if it was loaded: never load CUDA just to clean up. */
    if (NULL != cuda_api) {
        cuda_api->finalize();
    }
}

/* --------------------------------------------------- staging transport */

typedef struct {
    mca_coll_llrdma_pml_ctx_t pml;
    const llrdma_cuda_api_t *api;
    llrdma_cuda_session_t *s;
    int cuda_failed; /* the session holds the message */
    int cancelling;  /* after an error: receives are not copied in */
    /* GPU-direct: the inter-node step's transport (btl put) and its call state. */
    const mca_coll_llrdma_net_t *net;
    void *net_ctx;
} gpu_ctx_t;

typedef struct {
    void *r;      /* PML request */
    void *bounce; /* pinned host buffer the PML reads or writes */
    void *dst;    /* receives: device destination */
    size_t bytes;
} gpu_req_t;

static int no_memory(gpu_ctx_t *g)
{
    if (OMPI_SUCCESS == g->pml.err) {
        g->pml.err = OMPI_ERR_OUT_OF_RESOURCE;
    }
    return -1;
}

static int gpu_isend(void *ctx, const void *buf, size_t bytes, int peer, int tag, void **req)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    gpu_req_t *q = calloc(1, sizeof(*q));

    if (NULL == q) {
        return no_memory(g);
    }
    /* After a CUDA failure (this one or an earlier one) the message goes
     * empty: the peer learns the call failed (llrdma_ar_comm_t.waitall_sizes)
     * and the schedule's messages stay matched. */
    if (0 == bytes || g->cuda_failed || 0 != g->api->stage_out(g->s, buf, bytes, &q->bounce)) {
        static char none;
        g->cuda_failed |= 0 != bytes;
        q->bounce = NULL;
        if (0 != mca_coll_llrdma_pml_isend(&g->pml, &none, 0, peer, tag, &q->r)) {
            goto free_req;
        }
        *req = q;
        return 0;
    }
    if (0 != mca_coll_llrdma_pml_isend(&g->pml, q->bounce, bytes, peer, tag, &q->r)) {
        goto put_bounce;
    }
    *req = q;
    return 0;

put_bounce:
    g->api->bounce_put(g->s, q->bounce);
free_req:
    free(q);
    return -1;
}

static int gpu_irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    gpu_req_t *q = calloc(1, sizeof(*q));

    if (NULL == q) {
        return no_memory(g);
    }
    if (0 != g->api->bounce_get(g->s, bytes, &q->bounce)) {
        g->cuda_failed = 1;
        goto free_req;
    }
    if (0 != mca_coll_llrdma_pml_irecv(&g->pml, q->bounce, bytes, peer, tag, &q->r)) {
        goto put_bounce;
    }
    q->dst = buf;
    q->bytes = bytes;
    *req = q;
    return 0;

put_bounce:
    g->api->bounce_put(g->s, q->bounce);
free_req:
    free(q);
    return -1;
}

/* Completes and releases every request (the core's contract), copying in the
 * receives that completed while nothing has failed.  bytes (non-NULL): each
 * receive's bytes as far as the core may use them: 0 when it came empty or
 * could not be copied in (a CUDA failure here or earlier), so the core
 * carries the failure on (llrdma_ar_comm_t.waitall_sizes). */
static int gpu_waitall_sizes(void *ctx, int n, void **reqs, size_t *bytes)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    int i, failed = 0;

    for (i = 0; i < n; ++i) {
        gpu_req_t *q = (gpu_req_t *)reqs[i];
        size_t got = 0;
        if (NULL == q) {
            continue;
        }
        int abandoned = g->pml.abandoned;
        if (0 != mca_coll_llrdma_pml_waitall_sizes(&g->pml, 1, &q->r, &got)) {
            failed = 1;
            if (g->pml.abandoned != abandoned) {
                q->bounce = NULL; /* the PML may still use it: leaked on purpose */
            }
        } else if (g->pml.abandoned != abandoned) {
            q->bounce = NULL; /* given up (a gone peer's, read as empty): leaked too */
            got = 0;
        } else if (NULL != q->dst && !g->cancelling && !g->cuda_failed &&
                   OMPI_SUCCESS == g->pml.err && got == q->bytes) {
            if (0 != g->api->stage_in(g->s, q->dst, q->bounce, q->bytes)) {
                g->cuda_failed = 1;
                got = 0;
            }
            q->bounce = NULL; /* stage_in took it, also on failure */
        } else if (NULL != q->dst) {
            got = 0; /* not copied in */
        }
        if (NULL != bytes) {
            bytes[i] = got;
        } else if (NULL != q->dst && got != q->bytes) {
            failed = 1;
        }
        if (NULL != q->bounce) {
            g->api->bounce_put(g->s, q->bounce);
        }
        free(q);
        reqs[i] = NULL;
    }
    return failed ? -1 : 0;
}

static int gpu_waitall(void *ctx, int n, void **reqs)
{
    return gpu_waitall_sizes(ctx, n, reqs, NULL);
}

static int gpu_cancel(void *ctx, void *req)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    g->cancelling = 1;
    return mca_coll_llrdma_pml_cancel(&g->pml, ((gpu_req_t *)req)->r);
}

static int gpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    if (0 != g->api->copy(g->s, dst, src, bytes)) {
        g->cuda_failed = 1;
        return -1;
    }
    return 0;
}

static int gpu_reduce(void *ctx, int op, int dtype, const void *a, const void *b, void *out,
                      size_t count)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    if (0 != g->api->reduce(g->s, op, dtype, a, b, out, count)) {
        g->cuda_failed = 1;
        return -1;
    }
    return 0;
}

static int gpu_sync(void *ctx)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    if (0 != g->api->sync(g->s)) {
        g->cuda_failed = 1;
        return -1;
    }
    return 0;
}

static void *gpu_alloc(void *ctx, size_t bytes)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    void *p = g->api->alloc(g->s, bytes);
    if (NULL == p) {
        g->cuda_failed = 1;
    }
    return p;
}

static void gpu_free(void *ctx, void *p)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    g->api->free(g->s, p);
}

/* ------------------------------------------- GPU-direct transport
 * The hierarchical schedule's inter-node messages on device memory, handed
 * as they are to btl/llrdma's put transport, which registers them with the
 * NIC (dma-buf or peermem, through the BTL's registration cache).  The NIC
 * does not see the stream's order: before a buffer goes to it, as a source
 * or as a target, everything enqueued so far must have run (a copy or
 * reduction that wrote the source, a kernel still reading the target). */
static int direct_sync(gpu_ctx_t *g)
{
    if (!g->cuda_failed && 0 != g->api->sync(g->s)) {
        g->cuda_failed = 1;
    }
    return g->cuda_failed;
}

static int direct_isend(void *ctx, const void *buf, size_t bytes, int peer, int tag, void **req)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    /* After a CUDA failure the message goes empty: the peer learns the call
     * failed (llrdma_ar_comm_t.waitall_sizes), the messages stay matched. */
    if (0 != bytes && direct_sync(g)) {
        bytes = 0;
    }
    return g->net->isend(g->net_ctx, buf, bytes, peer, tag, req);
}

static int direct_irecv(void *ctx, void *buf, size_t bytes, int peer, int tag, void **req)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    (void)direct_sync(g); /* a failure is the session's: the call fails at end */
    return g->net->irecv(g->net_ctx, buf, bytes, peer, tag, req);
}

static int direct_waitall_sizes(void *ctx, int n, void **reqs, size_t *bytes)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    return g->net->waitall_sizes(g->net_ctx, n, reqs, bytes);
}

static int direct_waitall(void *ctx, int n, void **reqs)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    return g->net->waitall(g->net_ctx, n, reqs);
}

static int direct_cancel(void *ctx, void *req)
{
    gpu_ctx_t *g = (gpu_ctx_t *)ctx;
    return g->net->cancel(g->net_ctx, req);
}

/* The step's device scratch, kept across calls (and so its registration);
 * NULL with the reason said when it cannot be had. */
static void *direct_scratch(mca_coll_llrdma_module_t *m, gpu_ctx_t *g, size_t need, int device,
                            struct ompi_communicator_t *comm)
{
    char err[256] = "";
    if (0 == need) {
        return NULL;
    }
    if (need <= m->dev_scratch_bytes && device == m->dev_scratch_device) {
        return m->dev_scratch;
    }
    g->api->dev_free(m->dev_scratch); /* its stale registration: the BTL's buffer id check */
    m->dev_scratch = g->api->dev_alloc(device, need, err, sizeof(err));
    m->dev_scratch_bytes = NULL != m->dev_scratch ? need : 0;
    m->dev_scratch_device = device;
    if (NULL == m->dev_scratch) {
        opal_output(0,
                    "coll:llrdma: MPI_Allreduce on %s (GPU buffers): %lu bytes of GPU-direct "
                    "scratch: %s",
                    comm->c_name, (unsigned long)need, err);
    }
    return m->dev_scratch;
}

static void release_direct(mca_coll_llrdma_module_t *m)
{
    if (NULL != m->dev_scratch && NULL != cuda_api) {
        cuda_api->dev_free(m->dev_scratch);
    }
    m->dev_scratch = NULL;
    m->dev_scratch_bytes = 0;
}

/* ------------------------------------------------------------- entries */

int mca_coll_llrdma_allreduce_gpu(const llrdma_ar_plan_t *plan, const void *sbuf, void *rbuf,
                                  size_t count, int dt, int lop, struct ompi_communicator_t *comm,
                                  mca_coll_llrdma_module_t *m, int device)
{
    gpu_ctx_t g;
    llrdma_ar_comm_t tc;
    char err[512];
    void *scratch = NULL;
    size_t scratch_bytes = 0;
    int rc;

    memset(&g, 0, sizeof(g));
    if (NULL == (g.api = load_api(comm))) {
        return OMPI_ERR_NOT_SUPPORTED;
    }
    if (0 != g.api->begin(device, &g.s, err, sizeof(err))) {
        opal_output(0, "coll:llrdma: MPI_Allreduce on %s (GPU buffers): %s", comm->c_name, err);
        return OMPI_ERROR;
    }
    mca_coll_llrdma_pml_ctx_init(&g.pml, comm);
    memset(&tc, 0, sizeof(tc));
    tc.ctx = &g;
    tc.rank = ompi_comm_rank(comm);
    tc.size = ompi_comm_size(comm);
    tc.isend = gpu_isend;
    tc.irecv = gpu_irecv;
    tc.waitall = gpu_waitall;
    tc.waitall_sizes = gpu_waitall_sizes;
    tc.cancel = gpu_cancel;
    tc.copy = gpu_copy;
    tc.reduce = gpu_reduce;
    tc.alloc = gpu_alloc;
    tc.free = gpu_free;
    tc.sync = gpu_sync;
    if (NULL != m->shm.base) {
        pin_arena(m, g.api, comm);
        m->shm.device_fold = (1 == m->shm_pinned);
        m->shm.device_fold_min = mca_coll_llrdma_component.gpu_fold_min;
        tc.shm = &m->shm;
    }
    if (LLRDMA_AR_HIER == plan->alg) {
        /* GPU-direct (llrdma_ar_dev_path chose it: the call's step is the
         * put transport): its messages go to the NIC as device memory. */
        size_t need = llrdma_ar_scratch_bytes(plan, count, dt, tc.size);
        g.net = mca_coll_llrdma_net_of(m);
        g.net_ctx = g.net->begin(m, &g.pml);
        tc.isend = direct_isend;
        tc.irecv = direct_irecv;
        tc.waitall = direct_waitall;
        tc.waitall_sizes = direct_waitall_sizes;
        tc.cancel = direct_cancel;
        tc.hier = &m->hier;
        scratch = direct_scratch(m, &g, need, device, comm);
        if (0 != need && NULL == scratch) {
            /* Carried as for a failed host scratch: the schedule runs with
             * every receive sunk, so no other node waits. */
            mca_coll_llrdma_btlnet_sink(g.net_ctx);
            tc.failed = 1;
            scratch = (void *)&tc; /* never read: a failed run touches no buffer */
        }
        scratch_bytes = need;
    }

    rc = llrdma_ar_run(plan, &tc, sbuf, rbuf, count, dt, lop, scratch, scratch_bytes);
    /* A rank found gone fails this call and every later one (as on host). */
    if (mca_coll_llrdma_pml_gone(m, &g.pml, rc) && LLRDMA_AR_OK == rc) {
        rc = LLRDMA_AR_ERR_PEER_GONE;
    }
    /* Always: waits for the stream and releases the session. */
    if (0 != g.api->end(g.s, err, sizeof(err))) {
        opal_output(0, "coll:llrdma: MPI_Allreduce on %s (GPU buffers) failed: %s", comm->c_name,
                    err);
        return OMPI_ERROR;
    }
    return mca_coll_llrdma_ar_status(rc, g.pml.err, comm);
}

int mca_coll_llrdma_gpu_copy_sync(void *dst, const void *src, size_t bytes,
                                  struct ompi_communicator_t *comm)
{
    const llrdma_cuda_api_t *api = load_api(comm);
    char err[512];

    if (NULL == api) {
        return OMPI_ERR_NOT_SUPPORTED;
    }
    if (0 != api->copy_sync(dst, src, bytes, err, sizeof(err))) {
        opal_output(0, "coll:llrdma: MPI_Allreduce on %s (GPU buffers) failed: %s", comm->c_name,
                    err);
        return OMPI_ERROR;
    }
    return OMPI_SUCCESS;
}

/* What the core does not handle, on GPU buffers: the module below gets host
 * copies (as coll/cuda does in CUDA-aware builds), never device pointers. */
/* Host buffer i (0 receive, 1 send) of at least `bytes`, kept across calls:
 * a fresh multi-megabyte malloc per call is an mmap whose every page faults
 * on first touch (2 MB took 3.9 ms instead of 0.6 on the H200). */
static void *stage_buf(mca_coll_llrdma_module_t *m, int i, size_t bytes)
{
    char err[256];
    if (bytes > m->host_stage_bytes[i]) {
        void *p;
        if (m->host_stage_pinned[i]) {
            cuda_api->host_unregister(m->host_stage[i]);
            m->host_stage_pinned[i] = 0;
        }
        if (NULL == (p = realloc(m->host_stage[i], bytes))) {
            return NULL;
        }
        m->host_stage[i] = p;
        m->host_stage_bytes[i] = bytes;
        /* Pinned, the whole-vector copies run at DMA speed (pageable ones
         * go through the driver's own staging); unpinned they still work. */
        m->host_stage_pinned[i] =
            NULL != cuda_api && cuda_api->host_register(p, bytes, err, sizeof(err)) >= 0;
    }
    return m->host_stage[i];
}

static void release_stage(mca_coll_llrdma_module_t *m, int i)
{
    if (m->host_stage_pinned[i] && NULL != cuda_api) {
        cuda_api->host_unregister(m->host_stage[i]);
    }
    free(m->host_stage[i]);
    m->host_stage[i] = NULL;
    m->host_stage_bytes[i] = 0;
    m->host_stage_pinned[i] = 0;
}

void mca_coll_llrdma_gpu_release(mca_coll_llrdma_module_t *m)
{
    release_stage(m, 0);
    release_stage(m, 1);
    release_direct(m);
}

int mca_coll_llrdma_gpu_shared(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                               int device)
{
    const llrdma_cuda_api_t *api;
    unsigned long long key = 0, *line;
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm), same = 0;
    char err[256];

    if (NULL == m->shm.base || NULL == (api = load_api(comm))) {
        return 0;
    }
    if (0 == m->gpu_key || device != m->gpu_key_device) {
        if (0 != api->device_key(device, &key, err, sizeof(err))) {
            return 0;
        }
        m->gpu_key = key;
        m->gpu_key_device = device;
        line = (unsigned long long *)llrdma_ar_shm_rank_info(&m->shm, n, me);
        __atomic_store_n(line, key, __ATOMIC_RELEASE);
    }
    for (int r = 0; r < n; ++r) {
        line = (unsigned long long *)llrdma_ar_shm_rank_info(&m->shm, n, r);
        if (r != me && __atomic_load_n(line, __ATOMIC_ACQUIRE) == m->gpu_key) {
            ++same;
        }
    }
    if (same > 0 && !m->gpu_shared_said) {
        m->gpu_shared_said = 1;
        opal_output_verbose(5, mca_coll_llrdma_component.output,
                            "coll:llrdma: %s: rank %d shares its GPU with %d other rank(s): "
                            "device vectors are copied whole to the host (fewer GPU operations, "
                            "each a context switch)",
                            comm->c_name, me, same);
    }
    return same > 0;
}

int mca_coll_llrdma_gpu_fallback(const void *sbuf, void *rbuf, int count,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, mca_coll_llrdma_module_t *m,
                                 int skind, int rkind, mca_coll_llrdma_host_pass_t *pass)
{
    ptrdiff_t gap = 0;
    size_t span = (size_t)opal_datatype_span(&dtype->super, (size_t)count, &gap);
    char *hs = NULL, *hr = NULL;
    const void *s = sbuf;
    void *r = rbuf;
    int rc;

    if (NULL == load_api(comm)) { /* the copies need it; loaded now, it pins */
        return OMPI_ERR_NOT_SUPPORTED;
    }
    if (mca_coll_llrdma_test_alloc_fails(m, comm)) {
        opal_output(0, "coll:llrdma: %s: injected staging allocation failure (tests)",
                    comm->c_name);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    int staged = OMPI_SUCCESS;

    if (LLRDMA_MEM_HOST != rkind) {
        if (NULL == (hr = stage_buf(m, 0, span))) {
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        r = hr - gap;
        if (MPI_IN_PLACE == sbuf) {
            staged = mca_coll_llrdma_gpu_copy_sync(hr, (char *)rbuf + gap, span, comm);
        }
    }
    if (OMPI_SUCCESS == staged && MPI_IN_PLACE != sbuf && LLRDMA_MEM_HOST != skind) {
        if (NULL == (hs = stage_buf(m, 1, span))) {
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        s = hs - gap;
        staged = mca_coll_llrdma_gpu_copy_sync(hs, (const char *)sbuf + gap, span, comm);
    }
    if (OMPI_SUCCESS != staged) {
        if (NULL == pass) {
            return staged; /* the module below has no way to tell the others */
        }
        /* The input could not be staged: llrdma's host pass still runs its
         * schedule, carrying the failure to the other ranks (message
         * algorithms, the hierarchical schedule; an arena plan marks the
         * arena), so none of them waits for this one. */
        pass->failed = 1;
        (void)pass->run(s, r, pass);
        return staged;
    }
    /* Host copies now: either the module below, or llrdma's own host path
     * (same plan as every other rank's, whatever their buffers). */
    rc = NULL != pass
             ? pass->run(s, r, pass)
             : m->previous_allreduce(s, r, count, dtype, op, comm, m->previous_allreduce_module);
    if (OMPI_SUCCESS == rc && NULL != hr) {
        rc = mca_coll_llrdma_gpu_copy_sync((char *)rbuf + gap, hr, span, comm);
    }
    for (int i = 0; i < 2; ++i) { /* kept between calls only up to the cap */
        if (m->host_stage_bytes[i] > mca_coll_llrdma_component.scratch_cache_max) {
            release_stage(m, i);
        }
    }
    return rc;
}
