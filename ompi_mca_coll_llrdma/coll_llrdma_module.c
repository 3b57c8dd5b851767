/*
 * coll/llrdma module: per-communicator query and enable.
 */
#include "ompi_config.h"

#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"

#include "coll_llrdma.h"

static void module_construct(mca_coll_llrdma_module_t *m)
{
    m->previous_allreduce = NULL;
    m->previous_allreduce_module = NULL;
    m->hint = 0;
}

static void module_destruct(mca_coll_llrdma_module_t *m)
{
    /* A module may be destroyed without ever being enabled. */
    if (NULL != m->previous_allreduce_module) {
        OBJ_RELEASE(m->previous_allreduce_module);
    }
}

OBJ_CLASS_INSTANCE(mca_coll_llrdma_module_t, mca_coll_base_module_t, module_construct,
                   module_destruct);

/* Modules are enabled in ascending priority and their functions copied into
 * comm->c_coll after each enable, so what is there now is the best lower
 * layer.  No communication here: ranks that decided differently would hang. */
static int module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_llrdma_module_t *m = (mca_coll_llrdma_module_t *)module;

    if (NULL == comm->c_coll->coll_allreduce || NULL == comm->c_coll->coll_allreduce_module) {
        opal_output_verbose(1, mca_coll_llrdma_component.output,
                            "coll:llrdma: no lower Allreduce on %s: not used", comm->c_name);
        return OMPI_ERROR;
    }
    m->previous_allreduce = comm->c_coll->coll_allreduce;
    m->previous_allreduce_module = comm->c_coll->coll_allreduce_module;
    OBJ_RETAIN(m->previous_allreduce_module);
    return OMPI_SUCCESS;
}

mca_coll_base_module_t *mca_coll_llrdma_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    mca_coll_llrdma_module_t *m;

    if (comm == &ompi_mpi_comm_world.comm && !mca_coll_llrdma_component.checked_world) {
        mca_coll_llrdma_component.checked_world = 1;
        mca_coll_llrdma_check_world(comm);
    }
    if (OMPI_COMM_IS_INTER(comm) || mca_coll_llrdma_component.priority <= 0) {
        return NULL;
    }
    m = OBJ_NEW(mca_coll_llrdma_module_t);
    if (NULL == m) {
        return NULL;
    }
    m->hint = mca_coll_llrdma_component.hint;
    m->super.coll_module_enable = module_enable;
    m->super.coll_allreduce = mca_coll_llrdma_allreduce;
    *priority = mca_coll_llrdma_component.priority;
    return &m->super;
}
