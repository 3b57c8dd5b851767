/*
 * coll/llrdma MPI_Allreduce: map the call onto the C++ core
 * (llrdma_core/llrdma_allreduce.h), which plans from the size hint and runs the
 * algorithm over the PML vtable below.  Whatever the core does not handle goes
 * to the module below us, unchanged (GPU buffers as host copies).  GPU
 * buffers take the same schedule with CUDA staging (coll_llrdma_gpu.c).
 *
 * Every decision that shapes the schedule depends only on arguments MPI
 * requires to agree across the communicator (datatype, op, count) and on
 * process-wide settings (hint, algorithm and segment knobs) that must be equal
 * on all ranks: a rank that chose differently would wait for messages that
 * never come.  Where the buffers live may differ between ranks.
 */
#include "ompi_config.h"

#include <stddef.h>
#include <string.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/request/request.h"
#include "opal/util/output.h"

#include "coll_llrdma.h"
#include "coll_llrdma_cuptr.h"
#include "llrdma_allreduce.h"

typedef mca_coll_llrdma_pml_ctx_t pml_ctx_t;

static int signed_by_size(size_t n)
{
    switch (n) {
    case 1:
        return LLRDMA_DT_INT8;
    case 2:
        return LLRDMA_DT_INT16;
    case 4:
        return LLRDMA_DT_INT32;
    case 8:
        return LLRDMA_DT_INT64;
    default:
        return -1;
    }
}

static int unsigned_by_size(size_t n)
{
    switch (n) {
    case 1:
        return LLRDMA_DT_UINT8;
    case 2:
        return LLRDMA_DT_UINT16;
    case 4:
        return LLRDMA_DT_UINT32;
    case 8:
        return LLRDMA_DT_UINT64;
    default:
        return -1;
    }
}

/* Predefined C datatypes only, by handle (ompi/op/op.h, which would give the
 * type ids, is not usable with Debian's headers).  MPI_CHAR, Fortran, complex,
 * long double and the MPI_AINT family are left to the module below. */
static int map_dtype(struct ompi_datatype_t *d)
{
    if (d == MPI_INT8_T || d == MPI_SIGNED_CHAR)
        return LLRDMA_DT_INT8;
    if (d == MPI_INT16_T)
        return LLRDMA_DT_INT16;
    if (d == MPI_INT32_T)
        return LLRDMA_DT_INT32;
    if (d == MPI_INT64_T)
        return LLRDMA_DT_INT64;
    if (d == MPI_UINT8_T || d == MPI_UNSIGNED_CHAR)
        return LLRDMA_DT_UINT8;
    if (d == MPI_UINT16_T)
        return LLRDMA_DT_UINT16;
    if (d == MPI_UINT32_T)
        return LLRDMA_DT_UINT32;
    if (d == MPI_UINT64_T)
        return LLRDMA_DT_UINT64;
    if (d == MPI_SHORT)
        return signed_by_size(sizeof(short));
    if (d == MPI_INT)
        return signed_by_size(sizeof(int));
    if (d == MPI_LONG)
        return signed_by_size(sizeof(long));
    if (d == MPI_LONG_LONG_INT || d == MPI_LONG_LONG)
        return signed_by_size(sizeof(long long));
    if (d == MPI_UNSIGNED_SHORT)
        return unsigned_by_size(sizeof(unsigned short));
    if (d == MPI_UNSIGNED)
        return unsigned_by_size(sizeof(unsigned));
    if (d == MPI_UNSIGNED_LONG)
        return unsigned_by_size(sizeof(unsigned long));
    if (d == MPI_UNSIGNED_LONG_LONG)
        return unsigned_by_size(sizeof(unsigned long long));
    if (d == MPI_FLOAT)
        return LLRDMA_DT_FLOAT;
    if (d == MPI_DOUBLE)
        return LLRDMA_DT_DOUBLE;
    if (d == MPI_C_BOOL)
        return sizeof(_Bool) == 1 ? LLRDMA_DT_BOOL : -1;
    if (d == MPI_BYTE)
        return LLRDMA_DT_BYTE;
    if (d == MPI_FLOAT_INT)
        return LLRDMA_DT_FLOAT_INT;
    if (d == MPI_DOUBLE_INT)
        return LLRDMA_DT_DOUBLE_INT;
    if (d == MPI_LONG_INT)
        return LLRDMA_DT_LONG_INT;
    if (d == MPI_2INT)
        return LLRDMA_DT_2INT;
    if (d == MPI_SHORT_INT)
        return LLRDMA_DT_SHORT_INT;
    return -1;
}

static int map_op(struct ompi_op_t *op)
{
    if (op == MPI_SUM)
        return LLRDMA_OP_SUM;
    if (op == MPI_PROD)
        return LLRDMA_OP_PROD;
    if (op == MPI_MIN)
        return LLRDMA_OP_MIN;
    if (op == MPI_MAX)
        return LLRDMA_OP_MAX;
    if (op == MPI_LAND)
        return LLRDMA_OP_LAND;
    if (op == MPI_LOR)
        return LLRDMA_OP_LOR;
    if (op == MPI_LXOR)
        return LLRDMA_OP_LXOR;
    if (op == MPI_BAND)
        return LLRDMA_OP_BAND;
    if (op == MPI_BOR)
        return LLRDMA_OP_BOR;
    if (op == MPI_BXOR)
        return LLRDMA_OP_BXOR;
    if (op == MPI_MAXLOC)
        return LLRDMA_OP_MAXLOC;
    if (op == MPI_MINLOC)
        return LLRDMA_OP_MINLOC;
    return -1;
}

/* ------------------------------------------------------- PML transport */

static int record(pml_ctx_t *c, int rc)
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
    pml_ctx_t *c = (pml_ctx_t *)ctx;
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
    pml_ctx_t *c = (pml_ctx_t *)ctx;
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

/* The core's contract: every request completes and is released, even on error.
 * ompi_request_wait_all may leave requests pending after a failure
 * (MPI_ERR_PENDING), so wait them one by one; a request that failed is not
 * freed by the wait and is freed here. */
int mca_coll_llrdma_pml_waitall(void *ctx, int n, void **reqs)
{
    pml_ctx_t *c = (pml_ctx_t *)ctx;
    int i, rc, first = OMPI_SUCCESS;

    for (i = 0; i < n; ++i) {
        ompi_request_t *r = (ompi_request_t *)reqs[i];
        rc = ompi_request_wait(&r, MPI_STATUS_IGNORE);
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

/* ------------------------------------------------------------- entry */

int mca_coll_llrdma_ar_status(int rc, int pml_err, struct ompi_communicator_t *comm)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;

    switch (rc) {
    case LLRDMA_AR_OK:
        return OMPI_SUCCESS;
    case LLRDMA_AR_ERR_TRANSPORT:
        opal_output_verbose(1, c->output, "coll:llrdma: allreduce on %s failed in the PML: %d",
                            comm->c_name, pml_err);
        return OMPI_SUCCESS != pml_err ? pml_err : OMPI_ERROR;
    case LLRDMA_AR_ERR_NOMEM:
        return OMPI_ERR_OUT_OF_RESOURCE;
    default:
        opal_output_verbose(1, c->output, "coll:llrdma: allreduce on %s: core error %d",
                            comm->c_name, rc);
        return OMPI_ERROR;
    }
}

static const char *where(int kind)
{
    return LLRDMA_MEM_DEVICE == kind ? "GPU" : LLRDMA_MEM_MANAGED == kind ? "managed" : "host";
}

/* Device vectors up to this go whole through the host path.  "auto": with
 * an arena the device path wins from 32K (2 H200s, one rank each: 25 against
 * 43 us), without one per-segment PML staging only from about 2M; and with
 * "auto", ranks sharing a GPU always go whole (see the call site). */
static size_t gpu_stage_max(const mca_coll_llrdma_module_t *m)
{
    const mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    if (!c->gpu_stage_auto) {
        return c->gpu_stage_max;
    }
    return NULL != m->shm.base ? (size_t)16 << 10 : (size_t)2 << 20;
}

int mca_coll_llrdma_allreduce(const void *sbuf, void *rbuf, int count,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_llrdma_module_t *m = (mca_coll_llrdma_module_t *)module;
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    const char *why = NULL;
    int dt = -1, lop = -1, rc;
    int skind = LLRDMA_MEM_HOST, rkind = LLRDMA_MEM_HOST, device = -1, sdevice = -1;
    ptrdiff_t lb = 0, extent = 0;
    size_t esize = 0, need;
    llrdma_ar_plan_t plan;
    pml_ctx_t ctx;
    llrdma_ar_comm_t tc;

    /* Where the buffers live decides how data moves, never the schedule (ranks
     * may differ).  Asked per call: nothing is cached per pointer. */
    if (count > 0) {
        rkind = mca_coll_llrdma_gpu_kind(rbuf, &device);
        if (MPI_IN_PLACE != sbuf) {
            skind = mca_coll_llrdma_gpu_kind(sbuf, &sdevice);
        }
    }
    dt = map_dtype(dtype);
    lop = map_op(op);
    if (OMPI_COMM_IS_INTER(comm)) {
        why = "inter-communicator";
    } else if (!mca_coll_llrdma_agree(m, comm)) {
        why = "ranks disagree on the plan inputs";
    } else if (count < 0) {
        why = "negative count";
    } else if (dt < 0) {
        why = "datatype not handled";
    } else if (lop < 0) {
        why = "operation not handled";
    } else if (!llrdma_ar_supported(dt, lop)) {
        why = "operation not defined on this datatype"; /* the module below reports it */
    } else {
        /* Predefined types are contiguous with lb 0; the core assumes C layout. */
        esize = llrdma_ar_dtype_size(dt);
        ompi_datatype_get_extent(dtype, &lb, &extent);
        if (0 != lb || (ptrdiff_t)esize != extent) {
            why = "datatype layout differs from the C struct";
        }
    }
    if (NULL == why &&
        LLRDMA_AR_OK != llrdma_ar_plan_shm((size_t)count * esize, esize, ompi_comm_size(comm),
                                           m->hint, m->eager_bytes,
                                           NULL != m->shm.base ? m->shm.chunk_bytes : 0,
                                           c->algorithm, c->segment_bytes, &plan)) {
        why = "planner rejected the arguments";
    }
    if (NULL != why) {
        if (c->verbose >= 10) { /* skip the argument work on the hot path */
            opal_output_verbose(10, c->output,
                                "coll:llrdma: allreduce of %d x %s (op %s) on %s: %s, using the "
                                "previous module",
                                count, dtype->name, lop >= 0 ? llrdma_ar_op_name(lop) : "other",
                                comm->c_name, why);
        }
        if (LLRDMA_MEM_HOST != rkind || LLRDMA_MEM_HOST != skind) {
            return mca_coll_llrdma_gpu_fallback(sbuf, rbuf, count, dtype, op, comm, m, skind, rkind,
                                                0);
        }
        return m->previous_allreduce(sbuf, rbuf, count, dtype, op, comm,
                                     m->previous_allreduce_module);
    }

    if (c->verbose >= 10) {
        opal_output_verbose(
            10, c->output,
            "coll:llrdma: allreduce %lu bytes (%s %s) on %s, %d ranks, hint %lu: %s, "
            "segment %lu, %d in flight (%s); %s buffers",
            (unsigned long)((size_t)count * esize), llrdma_ar_dtype_name(dt),
            llrdma_ar_op_name(lop), comm->c_name, ompi_comm_size(comm), (unsigned long)m->hint,
            llrdma_ar_alg_name(plan.alg), (unsigned long)plan.segment_bytes,
            plan.nsegments_in_flight, plan.why,
            LLRDMA_MEM_HOST != rkind ? where(rkind) : where(skind));
    }

    if (LLRDMA_MEM_HOST != rkind &&
        ((size_t)count * esize <= gpu_stage_max(m) ||
         (c->gpu_stage_auto && mca_coll_llrdma_gpu_shared(m, comm, device)))) {
        /* Small vector on the GPU, or a GPU other ranks use too: two whole
         * copies and the host path cost fewer GPU operations (each a context
         * switch when ranks share a GPU) than per-round staging;
         * docs/benchmarks.md has the measurements. */
        return mca_coll_llrdma_gpu_fallback(sbuf, rbuf, count, dtype, op, comm, m, skind, rkind, 1);
    }
    if (LLRDMA_MEM_HOST != rkind) {
        /* Result on the GPU (device or managed memory): reduce there. */
        return mca_coll_llrdma_allreduce_gpu(&plan, MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf,
                                             (size_t)count, dt, lop, comm, m, device);
    }
    if (LLRDMA_MEM_HOST != skind) {
        /* Result in host memory: bring the input over, then the host path. */
        rc = mca_coll_llrdma_gpu_copy_sync(rbuf, sbuf, (size_t)count * esize, comm);
        if (OMPI_SUCCESS != rc) {
            return rc;
        }
        sbuf = MPI_IN_PLACE;
    }

    ctx.comm = comm;
    ctx.err = OMPI_SUCCESS;
    memset(&tc, 0, sizeof(tc));
    tc.ctx = &ctx;
    tc.rank = ompi_comm_rank(comm);
    tc.size = ompi_comm_size(comm);
    tc.isend = mca_coll_llrdma_pml_isend;
    tc.irecv = mca_coll_llrdma_pml_irecv;
    tc.waitall = mca_coll_llrdma_pml_waitall;
    tc.cancel = mca_coll_llrdma_pml_cancel;
    tc.shm = NULL != m->shm.base ? &m->shm : NULL;

    need = llrdma_ar_scratch_bytes(&plan, (size_t)count, dt, tc.size);
    if (need > m->scratch_bytes) {
        void *p = realloc(m->scratch, need);
        if (NULL == p) {
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        m->scratch = p;
        m->scratch_bytes = need;
    }
    rc = llrdma_ar_run(&plan, &tc, MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf, (size_t)count, dt, lop,
                       m->scratch, m->scratch_bytes);
    return mca_coll_llrdma_ar_status(rc, ctx.err, comm);
}
