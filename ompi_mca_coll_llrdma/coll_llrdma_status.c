/*
 * coll/llrdma: what a call returns.  The core's and the transports' status
 * as an Open MPI error code (said at verbose level 1 where it is news), and
 * the test hook that fails one chosen call's scratch allocation.  Called by
 * every execution path (arena, messages, GPU staged and peer), which is why
 * it lives below all of them.
 */
#include "ompi_config.h"

#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"
#include "opal/util/output.h"

#include "coll_llrdma.h"

int mca_coll_llrdma_ar_status(int rc, int pml_err, struct ompi_communicator_t *comm)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;

    switch (rc) {
    case LLRDMA_AR_OK:
        return OMPI_SUCCESS;
    case LLRDMA_AR_ERR_TRANSPORT:
        if (OMPI_SUCCESS != pml_err) {
            opal_output_verbose(1, c->output, "coll:llrdma: allreduce on %s failed in the PML: %d",
                                comm->c_name, pml_err);
        }
        return OMPI_SUCCESS != pml_err ? pml_err : OMPI_ERROR;
    case LLRDMA_AR_ERR_NOMEM:
        return OMPI_ERR_OUT_OF_RESOURCE;
    case LLRDMA_AR_ERR_PEER_GONE:
        return OMPI_ERROR; /* reported once by the arena call (arena_status) */
    case LLRDMA_AR_ERR_PEER_FAILED:
        opal_output_verbose(1, c->output,
                            "coll:llrdma: MPI_Allreduce on %s: another rank failed in this call "
                            "(its messages said so); the next call is not affected",
                            comm->c_name);
        return OMPI_ERROR;
    default:
        opal_output_verbose(1, c->output, "coll:llrdma: allreduce on %s: core error %d",
                            comm->c_name, rc);
        return OMPI_ERROR;
    }
}

int mca_coll_llrdma_test_alloc_fails(const mca_coll_llrdma_module_t *m,
                                     struct ompi_communicator_t *comm)
{
    const mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    /* The call's number: the arena's count where there is one, else the
     * message plans' own. */
    return c->test_alloc_rank >= 0 && c->test_alloc_rank == ompi_comm_rank(comm) &&
           c->test_alloc_call == (NULL != m->shm.base ? m->shm.call : m->msg_calls);
}
