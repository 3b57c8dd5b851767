/*
 * coll/llrdma: the inter-node step's transport -- the seam between the
 * hierarchical Allreduce (llrdma_core/allreduce/hier.cc) and the wire.
 *
 * The core's inter-node step only calls isend / irecv / waitall / cancel
 * between the ranks holding the same slice on different nodes, with the
 * contract of llrdma_ar_comm_t (llrdma_allreduce.h).  Two instances:
 *  - pml: point-to-point messages through the PML (coll_llrdma_pml.c; ob1
 *    picks btl/llrdma between nodes);
 *  - btl: btl/llrdma's RDMA writes into the receiver's registered buffer
 *    (coll_llrdma_btlnet.c), the BTL found per peer as osc/rdma finds it.
 * Chosen once per communicator, at its set-up, the same on every rank
 * (coll_llrdma_internode_transport; docs/allreduce.md, "Transport seam").
 */
#include "ompi_config.h"

#include <stdlib.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"
#include "opal/util/output.h"

#include "coll_llrdma.h"

static const mca_coll_llrdma_net_t pml_net = {
    .name = "pml",
    .isend = mca_coll_llrdma_pml_isend,
    .irecv = mca_coll_llrdma_pml_irecv,
    .waitall = mca_coll_llrdma_pml_waitall,
    .cancel = mca_coll_llrdma_pml_cancel,
    .begin = NULL,
};

static void *btl_begin(mca_coll_llrdma_module_t *m, mca_coll_llrdma_pml_ctx_t *pml)
{
    return mca_coll_llrdma_btlnet_begin(m->btlnet, pml);
}

static const mca_coll_llrdma_net_t btl_net = {
    .name = "btl",
    .isend = mca_coll_llrdma_btlnet_isend,
    .irecv = mca_coll_llrdma_btlnet_irecv,
    .waitall = mca_coll_llrdma_btlnet_waitall,
    .cancel = mca_coll_llrdma_btlnet_cancel,
    .begin = btl_begin,
};

const mca_coll_llrdma_net_t *mca_coll_llrdma_net_of(const mca_coll_llrdma_module_t *m)
{
    return NULL != m->net ? m->net : &pml_net;
}

const char *mca_coll_llrdma_net_name(int knob)
{
    return LLRDMA_NET_BTL == knob ? "btl" : LLRDMA_NET_PML == knob ? "pml" : "auto";
}

void mca_coll_llrdma_net_setup(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    const int knob = c->internode_transport, me = ompi_comm_rank(comm);
    const char *why = NULL, *said;
    int *ranks = NULL, k = 0, bad = -1, rc;
    long mine = 0, all = 0;
    mca_coll_llrdma_btlnet_t *net = NULL;

    m->net = &pml_net;
    if (LLRDMA_NET_PML == knob) {
        said = "forced";
        goto out_say;
    }
    /* This rank's inter-node peers: the ranks with its local rank elsewhere. */
    ranks = malloc((size_t)m->hier.nnodes * sizeof(int));
    if (NULL != ranks) {
        for (int node = 0; node < m->hier.nnodes; ++node) {
            int r = m->hier.peers[node];
            if (node == m->hier.node || r < 0) {
                continue;
            }
            if (NULL == mca_coll_llrdma_btlnet_find(comm, r, &why)) {
                bad = r;
                break;
            }
            ranks[k++] = r;
        }
        if (bad < 0) {
            net = mca_coll_llrdma_btlnet_new(comm, ranks, k);
            why = NULL == net ? "out of memory" : NULL;
        }
    } else {
        why = "out of memory";
    }
    if (NULL == net && LLRDMA_NET_BTL == knob) {
        /* Said here, where it is known; every rank then takes the PML. */
        if (bad >= 0) {
            opal_output(0,
                        "coll:llrdma: %s: coll_llrdma_internode_transport=btl, but rank %d "
                        "reaches its inter-node peer rank %d without btl/llrdma RDMA (%s): the "
                        "inter-node step of %s goes through the PML",
                        comm->c_name, me, bad, why, comm->c_name);
        } else {
            opal_output(0,
                        "coll:llrdma: %s: coll_llrdma_internode_transport=btl, but rank %d "
                        "could not set it up (%s): the inter-node step of %s goes through the "
                        "PML",
                        comm->c_name, me, why, comm->c_name);
        }
    }
    mine = NULL != net;
    rc = m->previous_allreduce(&mine, &all, 1, MPI_LONG, MPI_MIN, comm,
                               m->previous_allreduce_module);
    if (OMPI_SUCCESS == rc && 1 == all) {
        m->btlnet = net;
        m->net = &btl_net;
        said = LLRDMA_NET_BTL == knob ? "forced; every inter-node peer through btl/llrdma RDMA"
                                      : "every inter-node peer through btl/llrdma RDMA";
    } else {
        mca_coll_llrdma_btlnet_free(net);
        said = OMPI_SUCCESS != rc ? "the agreement failed"
               : NULL != net      ? "another rank has no btl/llrdma RDMA path to a peer"
                                  : "a rank has no btl/llrdma RDMA path to a peer";
    }
    free(ranks);
out_say:
    if (c->verbose >= 10 && 0 == me) {
        opal_output_verbose(10, c->output, "coll:llrdma: %s: inter-node transport %s (%s)",
                            comm->c_name, mca_coll_llrdma_net_of(m)->name, said);
    }
}
