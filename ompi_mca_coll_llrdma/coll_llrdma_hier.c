/*
 * coll/llrdma across nodes: which node each rank runs on, and how a
 * communicator is served (llrdma_ar_mode): flat, hierarchical
 * (docs/allreduce.md, "Several nodes"), or not at all (the module below
 * keeps it).  Decided once, on the communicator's first Allreduce.
 *
 * Node identity is Open MPI's locality, as coll/han's topology and
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) use it: a rank's node key is the
 * lowest rank of comm that OPAL_PROC_ON_LOCAL_NODE says shares its node, the
 * same on every rank of that node, exchanged with one allgather.
 *
 * coll_llrdma_node_split (tests only, info level 9) splits that further:
 * world ranks in groups of N, or groups of listed sizes, count as separate
 * nodes, so the hierarchical path runs on one host over vader (the arenas
 * are real shared memory; the "inter-node" messages just stay on the host).
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <string.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"
#include "ompi/proc/proc.h"
#include "opal/util/output.h"

#include "coll_llrdma.h"

int mca_coll_llrdma_node_key(struct ompi_communicator_t *comm)
{
    const mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm), leader = me;

    for (int i = 0; i < me; ++i) {
        ompi_proc_t *proc = ompi_comm_peer_lookup(comm, i);
        if (NULL != proc && OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags)) {
            leader = i;
            break;
        }
    }
    if (c->split_n > 0) {
        /* Validated against the world size when MPI_COMM_WORLD was set up. */
        int group = llrdma_ar_node_split_group(c->split_sizes, c->split_n, c->split_repeat,
                                               (int)OMPI_PROC_MY_NAME->vpid,
                                               ompi_comm_size(&ompi_mpi_comm_world.comm), NULL, 0);
        return group * n + leader;
    }
    return leader;
}

int mca_coll_llrdma_below_hier(const mca_coll_llrdma_module_t *m)
{
    const opal_object_t *below = &m->previous_allreduce_module->super;
    return NULL != below->obj_class && NULL != below->obj_class->cls_name &&
           0 == strcmp(below->obj_class->cls_name, "mca_coll_han_module_t");
}

int mca_coll_llrdma_hier_setup(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm,
                               int *keys, void *names, int shm_all, int below_hier)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm), mine, mode, rc;
    const char *why = NULL;

    mine = mca_coll_llrdma_node_key(comm);
    rc = comm->c_coll->coll_allgather(&mine, 1, MPI_INT, keys, 1, MPI_INT, comm,
                                      comm->c_coll->coll_allgather_module);
    if (OMPI_SUCCESS != rc ||
        LLRDMA_AR_OK != llrdma_ar_layout(n, keys, me, &m->topo, &m->hier, m->peers, n)) {
        return -1;
    }
    for (int r = 0, i = 0; r < n; ++r) {
        if (keys[r] == keys[me]) {
            m->locals[i++] = r;
        }
    }
    m->node_leader = m->locals[0];
    m->topo.arenas = shm_all;
    m->topo.below_hier = below_hier;
    mode = llrdma_ar_mode(&m->topo, &why);
    if (LLRDMA_AR_MODE_HIER == mode &&
        OMPI_SUCCESS != mca_coll_llrdma_shm_setup_node(m, comm, names)) {
        m->topo.arenas = 0; /* said by the rank that failed */
        mode = llrdma_ar_mode(&m->topo, &why);
    }
    if (c->verbose >= 5 && 0 == me) {
        opal_output_verbose(5, c->output,
                            "coll:llrdma: %s: %d ranks on %d node(s), %d to %d per node: %s (%s)",
                            comm->c_name, n, m->topo.nnodes, m->topo.min_local, m->topo.max_local,
                            LLRDMA_AR_MODE_HIER == mode      ? "hierarchical"
                            : LLRDMA_AR_MODE_DECLINE == mode ? "stepping aside"
                                                             : "flat",
                            why);
    }
    m->decline_why = why;
    return mode;
}
