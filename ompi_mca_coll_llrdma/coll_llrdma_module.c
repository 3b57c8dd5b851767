/*
 * coll/llrdma module: per-communicator query and enable.
 */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"
#include "opal/util/info.h"
#include "opal/util/output.h"
#include "ompi/mca/bml/base/base.h"
#include "ompi/mca/pml/base/base.h"
#include "ompi/proc/proc.h"

#include "coll_llrdma.h"

static void module_construct(mca_coll_llrdma_module_t *m)
{
    m->previous_allreduce = NULL;
    m->previous_allreduce_module = NULL;
    m->hint = 0;
    m->agreed = 0;
    m->eager_bytes = 0;
    m->scratch = NULL;
    m->scratch_bytes = 0;
    memset(&m->shm, 0, sizeof(m->shm));
    m->shm_bytes = 0;
    m->shm_pinned = 0;
    m->host_stage[0] = m->host_stage[1] = NULL;
    m->host_stage_bytes[0] = m->host_stage_bytes[1] = 0;
    m->host_stage_pinned[0] = m->host_stage_pinned[1] = 0;
    m->gpu_key = 0;
    m->gpu_key_device = -1;
    m->gpu_shared_said = 0;
    /* OBJ_NEW does not zero: every field is set here (a garbage field once
     * made one rank skip the arena's failure model while its peers ran it). */
    m->shm_ranks = 0;
    m->shm_rank = 0;
    m->net_eager = 0;
    m->gpu_direct = 0;
    /* Read by the first GPU-direct call to decide whether its scratch is big
     * enough: left unset, a garbage size made that call fail on every rank
     * (and which garbage depended on the module's layout). */
    m->dev_scratch = NULL;
    m->dev_scratch_bytes = 0;
    m->dev_scratch_device = -1;
    m->gone_said = 0;
    m->msg_gone = -1;
    memset(&m->fast, 0, sizeof(m->fast));
    m->fast_calls = 0;
    m->msg_calls = 0;
    m->mode = LLRDMA_AR_MODE_FLAT;
    memset(&m->topo, 0, sizeof(m->topo));
    memset(&m->hier, 0, sizeof(m->hier));
    m->peers = NULL;
    m->locals = NULL;
    m->node_leader = 0;
    m->decline_why = NULL;
    m->info_off = 0;
    m->hier_said = 0;
    m->net = NULL;
    m->btlnet = NULL;
    memset(&m->peer, 0, sizeof(m->peer));
    m->peer_maps = m->peer_events = m->peer_exports = NULL;
    m->peer_event = NULL;
    m->peer_event_id = 0;
    m->peer_dev = -1;
    m->peer_key = 0;
}

static void module_destruct(mca_coll_llrdma_module_t *m)
{
    free(m->scratch);
    free(m->peers);
    free(m->locals);
    mca_coll_llrdma_btlnet_free(m->btlnet);
    mca_coll_llrdma_peer_release(m);
    mca_coll_llrdma_gpu_release(m);
    mca_coll_llrdma_shm_release(m);
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

/* The communicator's info key LLRDMA_INFO_ALLREDUCE (given at creation, e.g.
 * MPI_Comm_dup_with_info): 1 when it says false.  Any other value than a
 * boolean is reported and ignored (MPI lets an implementation ignore info). */
static int info_opts_out(struct ompi_communicator_t *comm)
{
    static const char *const off[] = {"false", "off", "no", "0"};
    static const char *const on[] = {"true", "on", "yes", "1"};
    char v[64];
    int flag = 0;

    if (NULL == comm->super.s_info ||
        OPAL_SUCCESS !=
            llrdma_info_get(comm->super.s_info, LLRDMA_INFO_ALLREDUCE, v, sizeof(v), &flag) ||
        !flag) {
        return 0;
    }
    for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); ++i) {
        if (0 == strcasecmp(v, off[i])) {
            return 1;
        }
        if (0 == strcasecmp(v, on[i])) {
            return 0;
        }
    }
    opal_output(0,
                "coll:llrdma: rank %d: communicator info " LLRDMA_INFO_ALLREDUCE
                "='%s' is not a boolean (true/false, on/off, yes/no, 1/0): ignored, "
                "coll/llrdma serves the communicator",
                ompi_comm_rank(comm), v);
    return 0;
}

mca_coll_base_module_t *mca_coll_llrdma_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    mca_coll_llrdma_module_t *m;

    if (comm == &ompi_mpi_comm_world.comm && !mca_coll_llrdma_component.checked_world) {
        mca_coll_llrdma_component.checked_world = 1;
        mca_coll_llrdma_check_world(comm);
        mca_coll_llrdma_check_split(comm);
        mca_coll_llrdma_check_netuse(comm);
        mca_coll_llrdma_check_loaded(comm);
    }
    if (OMPI_COMM_IS_INTER(comm) || mca_coll_llrdma_component.priority <= 0 ||
        mca_coll_llrdma_component.off_for_job) {
        return NULL;
    }
    m = OBJ_NEW(mca_coll_llrdma_module_t);
    if (NULL == m) {
        return NULL;
    }
    m->hint = mca_coll_llrdma_component.hint;
    /* Declined at the first call (with the others' agreement), not here:
     * ranks given different info must still pick the same module. */
    m->info_off = info_opts_out(comm);
    m->super.coll_module_enable = module_enable;
    m->super.coll_allreduce = mca_coll_llrdma_allreduce;
    *priority = mca_coll_llrdma_component.priority;
    /* coll/self (priority 75) serves one-rank communicators with a host memcpy
     * that would crash on GPU buffers: where the GPU path exists, take their
     * Allreduce (the others stay coll/self's). */
    if (1 == ompi_comm_size(comm) && *priority < 76 && mca_coll_llrdma_gpu_possible()) {
        *priority = 76;
    }
    return &m->super;
}
