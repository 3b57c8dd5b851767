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
#define _GNU_SOURCE /* dladdr */
#include "ompi_config.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
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

/* How a handle's elements reduce, for the handles whose width is read from
 * the datatype at run time: Fortran kinds follow the Fortran compiler Open
 * MPI was built with (-fdefault-integer-8, -fdefault-real-8), the MPI_AINT
 * family follows Open MPI's configure. */
enum {
    K_SIGNED,   /* C integer: every integer op */
    K_UNSIGNED, /* C integer, unsigned */
    K_FINT,     /* Fortran INTEGER: no logical ops (MPI defines none, and Open
                   MPI rejects them on MPI_INTEGER) */
    K_REAL,     /* Fortran REAL, DOUBLE PRECISION */
    K_LOGICAL,  /* Fortran LOGICAL, C++ bool: logical ops only */
    K_COMPLEX,  /* C and Fortran complex: sum and prod only */
    K_2INT,     /* MPI_2INTEGER */
    K_2REAL     /* MPI_2REAL, MPI_2DOUBLE_PRECISION */
};

/* The core type of kind k whose element is n bytes, or -1: an optional type
 * Open MPI marks unavailable in this build has size 0, and a width the core
 * lacks (REAL*16, INTEGER*16, long double) has none. */
static int by_size(int k, size_t n)
{
    switch (k) {
    case K_SIGNED:
    case K_FINT:
        return signed_by_size(n);
    case K_UNSIGNED:
        return unsigned_by_size(n);
    case K_REAL:
        return 4 == n ? LLRDMA_DT_FLOAT : 8 == n ? LLRDMA_DT_DOUBLE : -1;
    case K_LOGICAL:
        return 1 == n   ? LLRDMA_DT_BOOL
               : 2 == n ? LLRDMA_DT_LOGICAL16
               : 4 == n ? LLRDMA_DT_LOGICAL32
               : 8 == n ? LLRDMA_DT_LOGICAL64
                        : -1;
    case K_COMPLEX:
        return 8 == n ? LLRDMA_DT_FLOAT_COMPLEX : 16 == n ? LLRDMA_DT_DOUBLE_COMPLEX : -1;
    case K_2INT:
        return 2 * sizeof(int) == n ? LLRDMA_DT_2INT : 16 == n ? LLRDMA_DT_2INT64 : -1;
    case K_2REAL:
        return 8 == n ? LLRDMA_DT_2FLOAT : 16 == n ? LLRDMA_DT_2DOUBLE : -1;
    default:
        return -1;
    }
}

/* The handles mapped by their size (by_size).  The optional Fortran kinds are
 * macros only where Open MPI's configure found them; where it did not, the
 * object may still exist with size 0 (OMPI_DATATYPE_INIT_UNAVAILABLE). */
static int kind_of(struct ompi_datatype_t *d)
{
    if (d == MPI_INTEGER)
        return K_FINT;
    if (d == MPI_DOUBLE_PRECISION || d == MPI_REAL)
        return K_REAL;
    if (d == MPI_LOGICAL || d == MPI_CXX_BOOL)
        return K_LOGICAL;
    if (d == MPI_DOUBLE_COMPLEX || d == MPI_COMPLEX || d == MPI_C_FLOAT_COMPLEX ||
        d == MPI_C_DOUBLE_COMPLEX || d == MPI_C_COMPLEX || d == MPI_CXX_FLOAT_COMPLEX ||
        d == MPI_CXX_DOUBLE_COMPLEX)
        return K_COMPLEX;
    if (d == MPI_AINT || d == MPI_COUNT)
        return K_SIGNED;
    /* Open MPI 4.1 reduces MPI_OFFSET as an unsigned integer (ompi/op/op.c):
     * min and max of negative offsets follow it, so that the result never
     * depends on which module ran. */
    if (d == MPI_OFFSET)
        return K_UNSIGNED;
    if (d == MPI_2INTEGER)
        return K_2INT;
    if (d == MPI_2REAL || d == MPI_2DOUBLE_PRECISION)
        return K_2REAL;
#ifdef MPI_INTEGER1
    if (d == MPI_INTEGER1)
        return K_FINT;
#endif
#ifdef MPI_INTEGER2
    if (d == MPI_INTEGER2)
        return K_FINT;
#endif
#ifdef MPI_INTEGER4
    if (d == MPI_INTEGER4)
        return K_FINT;
#endif
#ifdef MPI_INTEGER8
    if (d == MPI_INTEGER8)
        return K_FINT;
#endif
#ifdef MPI_INTEGER16
    if (d == MPI_INTEGER16)
        return K_FINT;
#endif
#ifdef MPI_LOGICAL1
    if (d == MPI_LOGICAL1)
        return K_LOGICAL;
#endif
#ifdef MPI_LOGICAL2
    if (d == MPI_LOGICAL2)
        return K_LOGICAL;
#endif
#ifdef MPI_LOGICAL4
    if (d == MPI_LOGICAL4)
        return K_LOGICAL;
#endif
#ifdef MPI_LOGICAL8
    if (d == MPI_LOGICAL8)
        return K_LOGICAL;
#endif
#ifdef MPI_REAL2
    if (d == MPI_REAL2)
        return K_REAL;
#endif
#ifdef MPI_REAL4
    if (d == MPI_REAL4)
        return K_REAL;
#endif
#ifdef MPI_REAL8
    if (d == MPI_REAL8)
        return K_REAL;
#endif
#ifdef MPI_REAL16
    if (d == MPI_REAL16)
        return K_REAL;
#endif
#ifdef MPI_COMPLEX8
    if (d == MPI_COMPLEX8)
        return K_COMPLEX;
#endif
#ifdef MPI_COMPLEX16
    if (d == MPI_COMPLEX16)
        return K_COMPLEX;
#endif
#ifdef MPI_COMPLEX32
    if (d == MPI_COMPLEX32)
        return K_COMPLEX;
#endif
    return -1;
}

/* Predefined C datatypes of fixed C width, by handle (ompi/op/op.h, which
 * would give the type ids, is not usable with Debian's headers). */
static int map_c_dtype(struct ompi_datatype_t *d)
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

/* The core type of a predefined datatype (>= 0), or why not: MAP_NONE for
 * a handle the core does not reduce (MPI_CHAR, MPI_WCHAR, long double and
 * its pairs, user types: the module below decides), MAP_NO_WIDTH for one
 * whose size in this build has no core type (*size says which).  *k: the
 * handle's kind (K_*), -1 for the C types above. */
#define MAP_NONE (-1)
#define MAP_NO_WIDTH (-2)
static int map_dtype(struct ompi_datatype_t *d, int *k, size_t *size)
{
    int dt = map_c_dtype(d);

    *k = -1;
    if (dt >= 0) {
        return dt;
    }
    if ((*k = kind_of(d)) < 0) {
        return MAP_NONE;
    }
    *size = 0;
    ompi_datatype_type_size(d, size);
    dt = by_size(*k, *size);
    return dt >= 0 ? dt : MAP_NO_WIDTH;
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

/* ------------------------------------------------------------- entry */

static const char *where(int kind)
{
    return LLRDMA_MEM_DEVICE == kind ? "GPU" : LLRDMA_MEM_MANAGED == kind ? "managed" : "host";
}

/* The size rules for device vectors (llrdma_ar_dev_*, shared with
 * llrdma-check): the knobs and what this communicator and plan are. */
static llrdma_ar_dev_rule_t dev_rule(const mca_coll_llrdma_module_t *m,
                                     const llrdma_ar_plan_t *plan)
{
    const mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    llrdma_ar_dev_rule_t r = {
        .hier = LLRDMA_AR_HIER == plan->alg,
        .shm_plan = NULL != m->shm.base && LLRDMA_AR_MODE_HIER != m->mode &&
                    (LLRDMA_AR_SHM_DIRECT == plan->alg || LLRDMA_AR_SHM_SPLIT == plan->alg),
        .arena = NULL != m->shm.base,
        .gpu_peer = c->gpu_peer,
        .peer_min = c->gpu_peer_min,
        .stage_auto = c->gpu_stage_auto,
        .stage_max = c->gpu_stage_max,
    };
    return r;
}

/* Where the GPU path exists, a declined communicator's calls come here
 * instead: device buffers still need host copies before the module below
 * may see them, host buffers go straight to it. */
static int declined_allreduce(const void *sbuf, void *rbuf, int count,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_llrdma_module_t *m = (mca_coll_llrdma_module_t *)module;
    int skind = LLRDMA_MEM_HOST, rkind = LLRDMA_MEM_HOST, device;

    if (count > 0) {
        rkind = mca_coll_llrdma_gpu_kind(rbuf, &device);
        if (MPI_IN_PLACE != sbuf) {
            skind = mca_coll_llrdma_gpu_kind(sbuf, &device);
        }
    }
    if (LLRDMA_MEM_HOST != rkind || LLRDMA_MEM_HOST != skind) {
        return mca_coll_llrdma_gpu_fallback(sbuf, rbuf, count, dtype, op, comm, m, skind, rkind,
                                            NULL);
    }
    return m->previous_allreduce(sbuf, rbuf, count, dtype, op, comm, m->previous_allreduce_module);
}

/* A communicator whose ranks disagree on the plan never uses coll/llrdma:
 * its Allreduce goes to the module below for good, so later calls skip the
 * agreement and classification (han's HAN_LOAD_FALLBACK_COLLECTIVE, same
 * reference counting).  Where the GPU path exists, to declined_allreduce. */
static void decline(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm)
{
    mca_coll_base_module_t *self = &m->super;

    if (comm->c_coll->coll_allreduce_module != self ||
        comm->c_coll->coll_allreduce != mca_coll_llrdma_allreduce) {
        return; /* already, or someone above us owns the slot */
    }
    if (mca_coll_llrdma_gpu_possible()) {
        comm->c_coll->coll_allreduce = declined_allreduce;
    } else {
        comm->c_coll->coll_allreduce = m->previous_allreduce;
        comm->c_coll->coll_allreduce_module = m->previous_allreduce_module;
        OBJ_RETAIN(m->previous_allreduce_module);
        OBJ_RELEASE(self); /* the communicator's module list still holds it */
    }
    if (mca_coll_llrdma_component.verbose >= 5) {
        Dl_info where; /* name the module below by the object its function lives in */
        const char *obj =
            (0 != dladdr((void *)m->previous_allreduce, &where) && NULL != where.dli_fname)
                ? where.dli_fname
                : "unknown object";
        opal_output_verbose(5, mca_coll_llrdma_component.output,
                            "coll:llrdma: %s: Allreduce handed to the previous module (%s) for "
                            "good%s",
                            comm->c_name, NULL != strrchr(obj, '/') ? strrchr(obj, '/') + 1 : obj,
                            mca_coll_llrdma_gpu_possible() ? " (device buffers copied to the host)"
                                                           : "");
    }
}

static int make_plan(const mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                     size_t bytes, size_t esize, llrdma_ar_plan_t *plan)
{
    const mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    if (LLRDMA_AR_MODE_HIER == m->mode) {
        return llrdma_ar_plan_hier(bytes, esize, &m->topo, m->hint, m->eager_bytes, c->algorithm,
                                   c->segment_bytes, plan);
    }
    return llrdma_ar_plan_shm(bytes, esize, ompi_comm_size(comm), m->hint, m->eager_bytes,
                              NULL != m->shm.base ? m->shm.chunk_bytes : 0, c->algorithm,
                              c->segment_bytes, plan);
}

static int is_shm_plan(const mca_coll_llrdma_module_t *m, const llrdma_ar_plan_t *plan)
{
    return dev_rule(m, plan).shm_plan;
}

static int run_plan(const llrdma_ar_plan_t *plan, const void *sbuf, void *rbuf, int count,
                    struct ompi_datatype_t *dtype, struct ompi_op_t *op, int dt, int lop,
                    size_t esize, int skind, int rkind, int device,
                    struct ompi_communicator_t *comm, mca_coll_llrdma_module_t *m, int failed);

/* The core's transport over the PML for one call on comm (ctx fresh). */
static void pml_transport(llrdma_ar_comm_t *tc, mca_coll_llrdma_pml_ctx_t *ctx,
                          struct ompi_communicator_t *comm)
{
    mca_coll_llrdma_pml_ctx_init(ctx, comm);
    memset(tc, 0, sizeof(*tc));
    tc->ctx = ctx;
    tc->rank = ompi_comm_rank(comm);
    tc->size = ompi_comm_size(comm);
    tc->isend = mca_coll_llrdma_pml_isend;
    tc->irecv = mca_coll_llrdma_pml_irecv;
    tc->waitall = mca_coll_llrdma_pml_waitall;
    tc->waitall_sizes = mca_coll_llrdma_pml_waitall_sizes; /* failures carried in messages */
    tc->cancel = mca_coll_llrdma_pml_cancel;
}
static int end_message_call(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                            mca_coll_llrdma_pml_ctx_t *ctx, int rc);
static int scratch_failed(const llrdma_ar_plan_t *plan, llrdma_ar_comm_t *tc,
                          mca_coll_llrdma_pml_ctx_t *ctx, void *rbuf, int count, int dt, int lop,
                          size_t esize, struct ompi_communicator_t *comm,
                          mca_coll_llrdma_module_t *m);
static int run_sunk(const llrdma_ar_plan_t *plan, llrdma_ar_comm_t *tc,
                    mca_coll_llrdma_pml_ctx_t *ctx, void *sink, int count, int dt, int lop,
                    size_t esize, struct ompi_communicator_t *comm, mca_coll_llrdma_module_t *m);

/* The host pass of a call whose device vectors are copied whole: the same
 * plan on the host copies (mca_coll_llrdma_gpu_fallback calls it back). */
typedef struct {
    mca_coll_llrdma_host_pass_t super;
    const llrdma_ar_plan_t *plan;
    int count, dt, lop;
    size_t esize;
    struct ompi_datatype_t *dtype;
    struct ompi_op_t *op;
    struct ompi_communicator_t *comm;
    mca_coll_llrdma_module_t *m;
} plan_pass_t;

static int plan_pass_run(const void *s, void *r, mca_coll_llrdma_host_pass_t *self)
{
    plan_pass_t *p = (plan_pass_t *)self;
    return run_plan(p->plan, s, r, p->count, p->dtype, p->op, p->dt, p->lop, p->esize,
                    LLRDMA_MEM_HOST, LLRDMA_MEM_HOST, -1, p->comm, p->m, self->failed);
}

/* One planned call: GPU or host path, over the PML or the arena.  failed:
 * this rank's input could not be staged; the schedule runs carrying that
 * (llrdma_ar_comm_t.failed). */
static int run_plan(const llrdma_ar_plan_t *plan, const void *sbuf, void *rbuf, int count,
                    struct ompi_datatype_t *dtype, struct ompi_op_t *op, int dt, int lop,
                    size_t esize, int skind, int rkind, int device,
                    struct ompi_communicator_t *comm, mca_coll_llrdma_module_t *m, int failed)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    size_t need;
    pml_ctx_t ctx;
    llrdma_ar_comm_t tc;
    llrdma_ar_dev_rule_t rule;
    int rc;

    if (c->verbose >= 10 && LLRDMA_AR_HIER == plan->alg) {
        opal_output_verbose(
            10, c->output,
            "coll:llrdma: allreduce %lu bytes (%s %s) on %s, %d ranks, hint %lu: hierarchical, "
            "%d nodes, %d slices, inter-node %s (%s), segment %lu, %d in flight over %s; "
            "%s buffers",
            (unsigned long)((size_t)count * esize), llrdma_ar_dtype_name(dt),
            llrdma_ar_op_name(lop), comm->c_name, ompi_comm_size(comm), (unsigned long)m->hint,
            plan->nodes, plan->slices, llrdma_ar_alg_name(plan->inter_alg), plan->inter_why,
            (unsigned long)plan->segment_bytes, plan->nsegments_in_flight,
            mca_coll_llrdma_net_for(m, plan, (size_t)count, esize)->name,
            LLRDMA_MEM_HOST != rkind ? where(rkind) : where(skind));
    } else if (c->verbose >= 10) {
        opal_output_verbose(
            10, c->output,
            "coll:llrdma: allreduce %lu bytes (%s %s) on %s, %d ranks, hint %lu: %s, "
            "segment %lu, %d in flight (%s); %s buffers",
            (unsigned long)((size_t)count * esize), llrdma_ar_dtype_name(dt),
            llrdma_ar_op_name(lop), comm->c_name, ompi_comm_size(comm), (unsigned long)m->hint,
            llrdma_ar_alg_name(plan->alg), (unsigned long)plan->segment_bytes,
            plan->nsegments_in_flight, plan->why,
            LLRDMA_MEM_HOST != rkind ? where(rkind) : where(skind));
    }

    rule = dev_rule(m, plan);
    if (llrdma_ar_dev_try_peer((uint64_t)count * esize, &rule) &&
        mca_coll_llrdma_peer_wanted(m, comm)) {
        /* Every rank comes here in the same calls, whatever its buffers. */
        rc = mca_coll_llrdma_gpu_peer(m, comm, MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf,
                                      (size_t)count, dt, lop, esize, skind, rkind, device);
        if (MCA_COLL_LLRDMA_PEER_FALLBACK != rc) {
            return rc;
        }
    }
    if (LLRDMA_MEM_HOST != rkind) {
        /* Result on the GPU (device or managed memory): the one rule,
         * llrdma_ar_dev_path (llrdma-check prints it too), says whether two
         * whole copies and the host path (several nodes; a small vector; a
         * GPU other ranks use, where each GPU operation is a context switch)
         * or the GPU's own reduction staged round by round. */
        uint64_t bytes = (uint64_t)count * esize;
        int shared = !rule.hier && rule.stage_auto && bytes > llrdma_ar_dev_stage_max(&rule) &&
                     mca_coll_llrdma_gpu_shared(m, comm, device);
        int path;
        /* Several nodes: GPU-direct where this rank's NIC registers GPU
         * memory and the call's inter-node step is the put transport. */
        rule.direct =
            rule.hier && m->gpu_direct &&
            mca_coll_llrdma_net_is_btl(mca_coll_llrdma_net_for(m, plan, (size_t)count, esize));
        path = llrdma_ar_dev_path(bytes, &rule, 0, shared, NULL);
        if (c->verbose >= 10 && rule.hier) {
            opal_output_verbose(10, c->output, "coll:llrdma: allreduce on %s: device vector, %s",
                                comm->c_name, llrdma_ar_dev_path_name(path));
        }
        if (LLRDMA_AR_DEV_GPU != path && LLRDMA_AR_DEV_DIRECT != path) {
            plan_pass_t pass = {
                {plan_pass_run, failed}, plan, count, dt, lop, esize, dtype, op, comm, m};
            return mca_coll_llrdma_gpu_fallback(sbuf, rbuf, count, dtype, op, comm, m, skind, rkind,
                                                &pass.super);
        }
        return mca_coll_llrdma_allreduce_gpu(plan, MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf,
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

    pml_transport(&tc, &ctx, comm);
    tc.shm = NULL != m->shm.base ? &m->shm : NULL;
    tc.failed = failed;
    if (tc.failed && is_shm_plan(m, plan)) {
        return OMPI_ERROR; /* the arena call marks the arena: nobody waits */
    }
    if (LLRDMA_AR_HIER == plan->alg) {
        /* The only messages are the inter-node step's: through the seam. */
        const mca_coll_llrdma_net_t *net = mca_coll_llrdma_net_for(m, plan, (size_t)count, esize);
        if (NULL != net->begin) {
            tc.ctx = net->begin(m, &ctx);
        }
        tc.isend = net->isend;
        tc.irecv = net->irecv;
        tc.waitall = net->waitall;
        /* Within the node the arena carries a failure, across nodes the
         * inter-node step's messages do (hier.cc). */
        tc.waitall_sizes = net->waitall_sizes;
        tc.cancel = net->cancel;
        tc.hier = &m->hier;
    }

    need = llrdma_ar_scratch_bytes(plan, (size_t)count, dt, tc.size);
    if (mca_coll_llrdma_test_alloc_fails(m, comm)) {
        opal_output(0, "coll:llrdma: %s: injected scratch allocation failure (tests)",
                    comm->c_name);
        return scratch_failed(plan, &tc, &ctx, rbuf, count, dt, lop, esize, comm, m);
    }
    if (need > m->scratch_bytes) {
        void *p = realloc(m->scratch, need);
        if (NULL == p) {
            return scratch_failed(plan, &tc, &ctx, rbuf, count, dt, lop, esize, comm, m);
        }
        m->scratch = p;
        m->scratch_bytes = need;
    }
    rc = llrdma_ar_run(plan, &tc, MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf, (size_t)count, dt, lop,
                       m->scratch, m->scratch_bytes);
    return end_message_call(m, comm, &ctx, rc);
}

/* Runs a call's schedule carrying a failure, without scratch: over the PML
 * every receive lands in `sink` (host memory of the call's vector size, its
 * contents undefined after the failed call), over the BTL's inter-node step
 * every receive takes nothing (READY says SUNK: no registration, no put),
 * sends are empty, and the core does no local work, so it touches neither
 * the scratch it is told it has nor its buffers.  OMPI_ERROR, or
 * OMPI_ERR_NOT_SUPPORTED when the transport cannot (the GPU staging
 * transport). */
static int run_sunk(const llrdma_ar_plan_t *plan, llrdma_ar_comm_t *tc,
                    mca_coll_llrdma_pml_ctx_t *ctx, void *sink, int count, int dt, int lop,
                    size_t esize, struct ompi_communicator_t *comm, mca_coll_llrdma_module_t *m)
{
    static unsigned char untouched[64];
    int rc;

    if (tc->irecv == mca_coll_llrdma_btlnet_irecv) {
        mca_coll_llrdma_btlnet_sink(tc->ctx);
    } else if (tc->irecv != mca_coll_llrdma_pml_irecv || tc->ctx != (void *)ctx) {
        return OMPI_ERR_NOT_SUPPORTED;
    } else {
        ctx->sink = sink;
        ctx->sink_bytes = (size_t)count * esize;
    }
    tc->failed = 1;
    rc = llrdma_ar_run(plan, tc, NULL, sink, (size_t)count, dt, lop, untouched,
                       llrdma_ar_scratch_bytes(plan, (size_t)count, dt, tc->size));
    (void)comm; /* as end_message_call; the scratch was never given to a request */
    (void)mca_coll_llrdma_pml_gone(m, ctx, rc);
    return OMPI_ERROR;
}

/* No scratch for this call (an allocation failed): on a message plan or the
 * hierarchical schedule over the PML the call still runs its schedule,
 * empty, so the other ranks -- on other nodes too -- fail it instead of
 * waiting for this one's messages; an arena plan's failure is marked in the
 * arena by arena_call. */
static int scratch_failed(const llrdma_ar_plan_t *plan, llrdma_ar_comm_t *tc,
                          mca_coll_llrdma_pml_ctx_t *ctx, void *rbuf, int count, int dt, int lop,
                          size_t esize, struct ompi_communicator_t *comm,
                          mca_coll_llrdma_module_t *m)
{
    /* rbuf is host memory here: device vectors reach run_plan as host copies. */
    if (!is_shm_plan(m, plan) &&
        OMPI_ERR_NOT_SUPPORTED != run_sunk(plan, tc, ctx, rbuf, count, dt, lop, esize, comm, m)) {
        opal_output_verbose(1, mca_coll_llrdma_component.output,
                            "coll:llrdma: MPI_Allreduce on %s: no memory for its scratch; the "
                            "call ran its schedule empty, so it fails on every rank",
                            comm->c_name);
    }
    return OMPI_ERR_OUT_OF_RESOURCE;
}

/* After a call over the PML: a rank found gone fails this call and every
 * later one (m->msg_gone, said once); scratch a given-up request may still
 * write into is leaked. */
static int end_message_call(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                            mca_coll_llrdma_pml_ctx_t *ctx, int rc)
{
    const mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;

    if (mca_coll_llrdma_pml_gone(m, ctx, rc)) {
        if (ctx->abandoned > 0) {
            m->scratch = NULL; /* a request given up incomplete may still write into it */
            m->scratch_bytes = 0;
        }
        if (LLRDMA_AR_OK == rc) {
            rc = LLRDMA_AR_ERR_PEER_GONE; /* said by mca_coll_llrdma_pml_gone */
        }
    }
    if (m->scratch_bytes > c->scratch_cache_max) {
        /* Kept between calls only up to the cap (memory bound, docs/allreduce.md). */
        free(m->scratch);
        m->scratch = NULL;
        m->scratch_bytes = 0;
    }
    return mca_coll_llrdma_ar_status(rc, ctx->err, comm);
}

/* A call after a rank of the communicator was found gone (m->msg_gone), on
 * a message plan: it still runs its schedule, carrying the failure (empty
 * sends, no local work, nothing to or from the gone rank, receives sunk), so
 * a rank that has not seen the death yet is not left waiting for this one;
 * then it fails. */
static int run_failed(const llrdma_ar_plan_t *plan, void *rbuf, int count, int dt, int lop,
                      size_t esize, int rkind, struct ompi_communicator_t *comm,
                      mca_coll_llrdma_module_t *m)
{
    mca_coll_llrdma_pml_ctx_t ctx;
    llrdma_ar_comm_t tc;
    void *sink = rbuf; /* its contents are undefined after the failed call */
    int rc;

    if (LLRDMA_MEM_HOST != rkind && NULL == (sink = malloc((size_t)count * esize))) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    pml_transport(&tc, &ctx, comm);
    ctx.gone = m->msg_gone;
    rc = run_sunk(plan, &tc, &ctx, sink, count, dt, lop, esize, comm, m);
    if (sink != rbuf && 0 == ctx.abandoned) {
        free(sink); /* else a given-up receive may still write into it: leaked */
    }
    return rc;
}

/* The arena is broken (llrdma_ar_shm_check's state st): OMPI_SUCCESS when
 * it was rebuilt (or, failing that, is gone: the message algorithms take
 * over) and the call may run, else the call's error. */
static int arena_broken(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm, int st,
                        int gone)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;

    switch (st) {
    case LLRDMA_AR_SHM_REBUILD:
        m->peer.have_last = 0; /* the failed call may have left a rank unmapped */
        (void)mca_coll_llrdma_shm_rebuild(m, comm); /* collective; said on failure */
        return OMPI_SUCCESS;
    case LLRDMA_AR_SHM_PEER_GONE:
        mca_coll_llrdma_say_gone(m, comm, gone, "it in the shared-memory arena");
        return OMPI_ERROR;
    default:
        opal_output_verbose(1, c->output,
                            "coll:llrdma: MPI_Allreduce on %s: another rank failed in this call "
                            "(shared-memory arena); it fails on every rank, the next call sets "
                            "up a fresh arena",
                            comm->c_name);
        return OMPI_ERROR;
    }
}

/* An Allreduce through the arena.  Every local failure marks the arena
 * broken, wherever it happens (a GPU copy or a library load before the
 * arena, an allocation, a copy after it), so no rank waits for this one.
 * The call the arena broke in fails on the ranks that see it; in the next
 * call every rank rebuilds the arena before writing any output, and runs
 * again (llrdma_ar_shm_check). */
static int arena_call(const llrdma_ar_plan_t *plan, const void *sbuf, void *rbuf, int count,
                      struct ompi_datatype_t *dtype, struct ompi_op_t *op, int dt, int lop,
                      size_t esize, int skind, int rkind, int device,
                      struct ompi_communicator_t *comm, mca_coll_llrdma_module_t *m, int fast)
{
    int n = ompi_comm_size(comm), gone = -1, st, rc = OMPI_SUCCESS, rebuilt = 0;
    llrdma_ar_plan_t replanned; /* the caller's plan stays as it was (the fast path's) */

    ++m->shm.call;
    for (int attempt = 0; attempt < 2; ++attempt) {
        st = llrdma_ar_shm_check(&m->shm, n, &gone);
        if (LLRDMA_AR_SHM_USABLE != st) {
            if (rebuilt) {
                return rc; /* a fresh arena records this call: FAILED, not REBUILD */
            }
            if (OMPI_SUCCESS != (rc = arena_broken(m, comm, st, gone))) {
                return rc;
            }
            rebuilt = 1;
            fast = 0; /* planned again: the rebuilt arena may be none */
            if (LLRDMA_AR_OK != make_plan(m, comm, (size_t)count * esize, esize, &replanned)) {
                return OMPI_ERROR; /* cannot happen: it planned before */
            }
            plan = &replanned;
        }
        if (fast) {
            ++m->fast_calls;
            rc = llrdma_ar_shm_direct_host(plan, &m->shm, ompi_comm_rank(comm), n,
                                           MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf, (size_t)count,
                                           dt, lop);
            rc = mca_coll_llrdma_ar_status(rc, OMPI_SUCCESS, comm);
        } else {
            rc = run_plan(plan, sbuf, rbuf, count, dtype, op, dt, lop, esize, skind, rkind, device,
                          comm, m, 0);
        }
        if (OMPI_SUCCESS == rc || NULL == m->shm.base) {
            return rc;
        }
        if (LLRDMA_AR_SHM_USABLE == llrdma_ar_shm_check(&m->shm, n, &gone)) {
            llrdma_ar_shm_fail(&m->shm, n); /* failed here, outside the arena */
            return rc;
        }
    }
    return rc;
}

/* An Allreduce by the hierarchical schedule.  Its node arena follows the
 * failure model of the one-node arena within the node (a failure ends the
 * call on every rank of the node, a dead rank is named), but a broken node
 * arena is not rebuilt: the other nodes' ranks would have to join a new
 * set-up, and they may be blocked in the inter-node step of the failed
 * call; so every later Allreduce on the communicator fails too, each still
 * exchanging its (empty) inter-node messages, so no node waits for good. */
static int hier_call(llrdma_ar_plan_t *plan, const void *sbuf, void *rbuf, int count,
                     struct ompi_datatype_t *dtype, struct ompi_op_t *op, int dt, int lop,
                     size_t esize, int skind, int rkind, int device,
                     struct ompi_communicator_t *comm, mca_coll_llrdma_module_t *m)
{
    int gone = -1, st = LLRDMA_AR_SHM_USABLE, rc;

    if (NULL != m->shm.base) {
        ++m->shm.call;
        st = llrdma_ar_shm_check(&m->shm, m->shm_ranks, &gone);
    }
    if (LLRDMA_AR_SHM_PEER_GONE == st) { /* the arena names local ranks */
        return arena_broken(m, comm, st, gone >= 0 && gone < m->shm_ranks ? m->locals[gone] : gone);
    }
    if (LLRDMA_AR_SHM_USABLE != st) {
        if (!m->hier_said) {
            m->hier_said = 1;
            opal_output(0,
                        "coll:llrdma: MPI_Allreduce on %s: a rank failed in this node's "
                        "shared-memory arena (in this or an earlier Allreduce); across nodes the "
                        "arena is not rebuilt, so this and every later Allreduce on %s fails",
                        comm->c_name, comm->c_name);
        }
        /* The call still runs, failed: this node's slice holders tell the
         * other nodes' in the inter-node step's messages (hier.cc), which
         * would otherwise wait for good -- a rank that enters the call after
         * a local peer broke the arena in it must not just return. */
        (void)run_plan(plan, sbuf, rbuf, count, dtype, op, dt, lop, esize, skind, rkind, device,
                       comm, m, 1);
        return OMPI_ERROR;
    }
    rc = run_plan(plan, sbuf, rbuf, count, dtype, op, dt, lop, esize, skind, rkind, device, comm, m,
                  0);
    if (OMPI_SUCCESS != rc && NULL != m->shm.base) {
        llrdma_ar_shm_fail(&m->shm, m->shm_ranks); /* no rank of the node waits for this one */
    }
    return rc;
}

/* Why the core cannot take this call (NULL: it can, *esize set).  k and
 * size: map_dtype's; buf (len bytes) holds the text when it is made here. */
static const char *unhandled(struct ompi_communicator_t *comm, int count,
                             struct ompi_datatype_t *dtype, int dt, int k, size_t size, int lop,
                             size_t *esize, char *buf, size_t len)
{
    ptrdiff_t lb = 0, extent = 0;

    if (OMPI_COMM_IS_INTER(comm)) {
        return "inter-communicator";
    }
    if (count < 0) {
        return "negative count";
    }
    if (MAP_NO_WIDTH == dt) {
        snprintf(buf, len, "no core type of its size (%lu bytes%s)", (unsigned long)size,
                 0 == size ? ": not available in this Open MPI build" : "");
        return buf;
    }
    if (dt < 0) {
        return "datatype not handled";
    }
    if (lop < 0) {
        return "operation not handled";
    }
    if (!llrdma_ar_supported(dt, lop) ||
        (K_FINT == k && (LLRDMA_OP_LAND == lop || LLRDMA_OP_LOR == lop || LLRDMA_OP_LXOR == lop))) {
        return "operation not defined on this datatype"; /* the module below reports it */
    }
    /* Predefined types are contiguous with lb 0; the core assumes C layout. */
    *esize = llrdma_ar_dtype_size(dt);
    ompi_datatype_get_extent(dtype, &lb, &extent);
    if (0 != lb || (ptrdiff_t)*esize != extent) {
        return "datatype layout differs from the C struct";
    }
    return NULL;
}

/* A call the planned path runs as shm_direct from host memory is
 * remembered with its plan, so that the next one with the same count,
 * datatype and op on host buffers skips the classification, the planner and
 * the transport set-up (llrdma_ar_shm_direct_host; small calls spent most
 * of their time outside the wait there).  Every rank runs the same rounds
 * either way: the plan is what the planner gives these arguments on any
 * rank, as long as what it read stays as it was; what can change is checked
 * per call (buffer kinds, a gone rank, the arena's state in arena_call, the
 * verbosity that prints plan lines). */
static void remember_fast(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                          const llrdma_ar_plan_t *plan, int count, struct ompi_datatype_t *dtype,
                          struct ompi_op_t *op, int dt, int lop, size_t esize, int skind, int rkind)
{
    const mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    uint64_t bytes = (uint64_t)count * esize;
    llrdma_ar_dev_rule_t rule = dev_rule(m, plan);

    m->fast.count = 0;
    if (LLRDMA_AR_SHM_DIRECT == plan->alg && LLRDMA_AR_MODE_HIER != m->mode &&
        LLRDMA_MEM_HOST == skind && LLRDMA_MEM_HOST == rkind && c->verbose < 10 &&
        c->test_alloc_rank < 0 && m->msg_gone < 0 && NULL != m->shm.base &&
        !llrdma_ar_dev_try_peer(bytes, &rule)) {
        m->fast.plan = *plan;
        m->fast.count = count;
        m->fast.dtype = dtype;
        m->fast.op = op;
        m->fast.dt = dt;
        m->fast.lop = lop;
        m->fast.esize = esize;
        m->fast.in_lines =
            llrdma_ar_lines_prepare(plan, &m->shm, ompi_comm_rank(comm), ompi_comm_size(comm),
                                    (size_t)count, dt, lop, &m->fast.lines);
    }
}

/* arena_call for the remembered call in the lines on an arena that is not
 * broken: the same steps without its re-planning loop (which only a broken
 * arena needs) or its 15 arguments; a failure ends as arena_call's does
 * after its run.  A 64-byte call on 2 ranks: about 60 instructions fewer. */
static int lines_call(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                      const void *sbuf, void *rbuf)
{
    int n = ompi_comm_size(comm), gone = -1, st, rc;

    ++m->shm.call;
    ++m->fast_calls;
    rc = llrdma_ar_lines_run(&m->fast.lines, &m->shm, MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf);
    if (LLRDMA_AR_OK == rc) {
        return OMPI_SUCCESS;
    }
    rc = mca_coll_llrdma_ar_status(rc, OMPI_SUCCESS, comm);
    if (OMPI_SUCCESS == rc || NULL == m->shm.base) {
        return rc;
    }
    st = llrdma_ar_shm_check(&m->shm, n, &gone);
    if (LLRDMA_AR_SHM_USABLE == st) {
        llrdma_ar_shm_fail(&m->shm, n); /* failed here, outside the arena */
        return rc;
    }
    /* Broken in this call (FAILED) or a rank gone: said, and the call fails. */
    return OMPI_SUCCESS != arena_broken(m, comm, st, gone) ? OMPI_ERROR : rc;
}

/* A call that is not the remembered one: classified, planned and run (out
 * of line, so that the remembered call does not pay for this one's 2 KB
 * frame and six saved registers). */
static __opal_attribute_noinline__ int allreduce_planned(const void *sbuf, void *rbuf, int count,
                                                         struct ompi_datatype_t *dtype,
                                                         struct ompi_op_t *op,
                                                         struct ompi_communicator_t *comm,
                                                         mca_coll_llrdma_module_t *m);

/* The remembered call (remember_fast) on host buffers: in the lines, on an
 * arena that is not broken, straight to lines_call, else through
 * arena_call; every other call to allreduce_planned. */
int mca_coll_llrdma_allreduce(const void *sbuf, void *rbuf, int count,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_llrdma_module_t *m = (mca_coll_llrdma_module_t *)module;
    int device = -1, sdevice = -1;

    if (count == m->fast.count && dtype == m->fast.dtype && op == m->fast.op && count > 0 &&
        m->msg_gone < 0 && mca_coll_llrdma_component.verbose < 10 && NULL != m->shm.base &&
        LLRDMA_MEM_HOST == mca_coll_llrdma_gpu_kind(rbuf, &device) &&
        (MPI_IN_PLACE == sbuf || LLRDMA_MEM_HOST == mca_coll_llrdma_gpu_kind(sbuf, &sdevice))) {
        if (m->fast.in_lines && !llrdma_ar_shm_broken(&m->shm, ompi_comm_size(comm))) {
            return lines_call(m, comm, sbuf, rbuf);
        }
        return arena_call(&m->fast.plan, sbuf, rbuf, count, dtype, op, m->fast.dt, m->fast.lop,
                          m->fast.esize, LLRDMA_MEM_HOST, LLRDMA_MEM_HOST, -1, comm, m, 1);
    }
    return allreduce_planned(sbuf, rbuf, count, dtype, op, comm, m);
}

static int allreduce_planned(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                             struct ompi_op_t *op, struct ompi_communicator_t *comm,
                             mca_coll_llrdma_module_t *m)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    const char *why = NULL;
    char whybuf[96];
    int dt = -1, lop = -1, kind = -1;
    size_t dsize = 0;
    int skind = LLRDMA_MEM_HOST, rkind = LLRDMA_MEM_HOST, device = -1, sdevice = -1;
    size_t esize = 0;
    llrdma_ar_plan_t plan;

    if (m->agreed <= 0 && !mca_coll_llrdma_agree(m, comm)) {
        decline(m, comm);
        why = NULL != m->decline_why ? m->decline_why : "ranks disagree on the plan inputs";
    }
    /* Where the buffers live decides how data moves, never the schedule (ranks
     * may differ).  Asked per call: nothing is cached per pointer. */
    if (count > 0) {
        rkind = mca_coll_llrdma_gpu_kind(rbuf, &device);
        if (MPI_IN_PLACE != sbuf) {
            skind = mca_coll_llrdma_gpu_kind(sbuf, &sdevice);
        }
    }
    if (NULL == why) {
        dt = map_dtype(dtype, &kind, &dsize);
        lop = map_op(op);
        why = unhandled(comm, count, dtype, dt, kind, dsize, lop, &esize, whybuf, sizeof(whybuf));
    }
    if (NULL == why && LLRDMA_AR_OK != make_plan(m, comm, (size_t)count * esize, esize, &plan)) {
        why = "planner rejected the arguments";
    }
    if (NULL != why && m->msg_gone >= 0) {
        return OMPI_ERROR; /* the module below would wait for the gone rank */
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
                                                NULL);
        }
        return m->previous_allreduce(sbuf, rbuf, count, dtype, op, comm,
                                     m->previous_allreduce_module);
    }
    if (m->msg_gone >= 0) {
        /* A rank of this communicator is gone (said once): every call fails,
         * a message plan after running its schedule for the others. */
        if (LLRDMA_AR_HIER == plan.alg || is_shm_plan(m, &plan)) {
            return OMPI_ERROR;
        }
        return run_failed(&plan, rbuf, count, dt, lop, esize, rkind, comm, m);
    }
    if (LLRDMA_AR_HIER == plan.alg) {
        return hier_call(&plan, sbuf, rbuf, count, dtype, op, dt, lop, esize, skind, rkind, device,
                         comm, m);
    }
    if (is_shm_plan(m, &plan)) {
        remember_fast(m, comm, &plan, count, dtype, op, dt, lop, esize, skind, rkind);
        return arena_call(&plan, sbuf, rbuf, count, dtype, op, dt, lop, esize, skind, rkind, device,
                          comm, m, 0);
    }
    ++m->msg_calls;
    return run_plan(&plan, sbuf, rbuf, count, dtype, op, dt, lop, esize, skind, rkind, device, comm,
                    m, 0);
}
