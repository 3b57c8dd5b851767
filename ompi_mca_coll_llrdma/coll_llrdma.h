/*
 * coll/llrdma: MPI_Allreduce whose algorithm and segment size follow the
 * low-latency RDMA size hint; every other collective, and every Allreduce it
 * does not handle, goes to the module below it.
 */
#ifndef MCA_COLL_LLRDMA_H
#define MCA_COLL_LLRDMA_H

#include "ompi_config.h"

#include "ompi/mca/coll/coll.h"

#include "llrdma_core.h"

BEGIN_C_DECLS

typedef enum {
    LLRDMA_MISMATCH_ABORT = 0,
    LLRDMA_MISMATCH_WARN = 1,
} llrdma_mismatch_action_t;

typedef struct mca_coll_llrdma_component_t {
    mca_coll_base_component_2_0_0_t super;

    /* MCA variables (coll_llrdma_component.c) */
    int priority;
    int verbose;
    char *size_hint; /* override of btl_llrdma_size_hint for coll only */
    int size_hint_index;
    char *algorithm_name; /* auto | recursive_doubling | rabenseifner | ring */
    char *segment_text;   /* 0 = from the hint */
    char *mismatch_text;  /* abort | warn */

    /* Validated at init_query */
    int output;
    int algorithm;        /* LLRDMA_AR_* */
    size_t segment_bytes; /* 0 = planner decides */
    llrdma_mismatch_action_t mismatch;
    uint64_t hint;     /* the hint coll uses */
    int checked_world; /* cross-rank check done */
} mca_coll_llrdma_component_t;

typedef struct mca_coll_llrdma_module_t {
    mca_coll_base_module_t super;
    mca_coll_base_module_allreduce_fn_t previous_allreduce;
    mca_coll_base_module_t *previous_allreduce_module;
    uint64_t hint;
    int agreed; /* 0: not checked yet, 1: all ranks plan alike, -1: they do not */
} mca_coll_llrdma_module_t;

OBJ_CLASS_DECLARATION(mca_coll_llrdma_module_t);

OMPI_MODULE_DECLSPEC extern mca_coll_llrdma_component_t mca_coll_llrdma_component;

int mca_coll_llrdma_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_llrdma_comm_query(struct ompi_communicator_t *comm, int *priority);

/* coll_llrdma_check.c: cross-rank hint check over the modex (MPI_COMM_WORLD,
 * once, during MPI_Init; no communication). */
void mca_coll_llrdma_check_world(struct ompi_communicator_t *world);

/* coll_llrdma_module.c: on the first Allreduce of a communicator, check
 * (through the module below) that every rank plans with the same hint,
 * algorithm and segment; otherwise the ranks' schedules would differ and
 * hang.  Returns 1 when llrdma may run, 0 to fall back for good. */
int mca_coll_llrdma_agree(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm);

/* coll_llrdma_allreduce.c */
int mca_coll_llrdma_allreduce(const void *sbuf, void *rbuf, int count,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module);

END_C_DECLS
#endif
