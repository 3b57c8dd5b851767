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
 * Under auto, calls whose inter-node messages all fit the BTL's eager limit
 * still take the PML: one eager message each, where a put costs READY, the
 * write and DONE (2-4x slower up to 32 KB across two Soft-RoCE guests,
 * docs/benchmarks-cluster.md).
 */
#include "ompi_config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"
#include "ompi/mca/bml/bml.h"
#include "opal/mca/btl/btl.h"
#include "opal/util/output.h"

#include "coll_llrdma.h"
#include "llrdma_core.h"

/* ob1 sends a message eagerly only up to btl_eager_limit minus
 * sizeof(mca_pml_ob1_hdr_t) (pml_ob1_sendreq.h); that header is not
 * installed, and the union is under this many bytes in Open MPI 4.1. */
#define OB1_HDR_ALLOWANCE 128

static const mca_coll_llrdma_net_t pml_net = {
    .name = "pml",
    .isend = mca_coll_llrdma_pml_isend,
    .irecv = mca_coll_llrdma_pml_irecv,
    .waitall = mca_coll_llrdma_pml_waitall,
    .waitall_sizes = mca_coll_llrdma_pml_waitall_sizes,
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
    .waitall_sizes = mca_coll_llrdma_btlnet_waitall_sizes,
    .cancel = mca_coll_llrdma_btlnet_cancel,
    .begin = btl_begin,
};

const mca_coll_llrdma_net_t *mca_coll_llrdma_net_of(const mca_coll_llrdma_module_t *m)
{
    return NULL != m->net ? m->net : &pml_net;
}

const mca_coll_llrdma_net_t *mca_coll_llrdma_net_for(const mca_coll_llrdma_module_t *m,
                                                     const llrdma_ar_plan_t *plan, size_t count,
                                                     size_t esize)
{
    const mca_coll_llrdma_net_t *net = mca_coll_llrdma_net_of(m);

    if (&btl_net == net && LLRDMA_NET_AUTO == mca_coll_llrdma_component.internode_transport &&
        llrdma_ar_hier_msg_max(plan, count, esize) <= m->net_eager) {
        return &pml_net;
    }
    return net;
}

int mca_coll_llrdma_net_is_btl(const mca_coll_llrdma_net_t *net)
{
    return &btl_net == net;
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
    long mine[2] = {0, LONG_MAX}, all[2] = {0, 0}; /* btl usable; smallest eager limit */
    mca_coll_llrdma_btlnet_t *net = NULL;

    m->net = &pml_net;
    m->net_eager = 0;
    m->gpu_direct = 0;
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
            mca_bml_base_btl_t *b = mca_coll_llrdma_btlnet_find(comm, r, &why);
            if (NULL == b) {
                bad = r;
                break;
            }
            if ((long)b->btl->btl_eager_limit < mine[1]) {
                mine[1] = (long)b->btl->btl_eager_limit;
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
    mine[0] = NULL != net;
    rc = m->previous_allreduce(mine, all, 2, MPI_LONG, MPI_MIN, comm, m->previous_allreduce_module);
    if (OMPI_SUCCESS == rc && 1 == all[0]) {
        m->btlnet = net;
        m->net = &btl_net;
        m->net_eager = all[1] > OB1_HDR_ALLOWANCE ? (size_t)(all[1] - OB1_HDR_ALLOWANCE) : 0;
        said = LLRDMA_NET_BTL == knob ? "forced; every inter-node peer through btl/llrdma RDMA"
                                      : "every inter-node peer through btl/llrdma RDMA";
    } else {
        mca_coll_llrdma_btlnet_free(net);
        said = OMPI_SUCCESS != rc ? "the agreement failed"
               : NULL != net      ? "another rank has no btl/llrdma RDMA path to a peer"
                                  : "a rank has no btl/llrdma RDMA path to a peer";
    }
    free(ranks);
    if (&btl_net == m->net) {
        /* Device vectors straight to the NIC where every module of this
         * rank's BTL registers GPU memory: a rank decides alone, as the
         * inter-node messages are the same whatever memory they come from. */
        llrdma_rank_config_t cfg;
        m->gpu_direct = LLRDMA_OK == llrdma_state_get(&cfg) && cfg.gpu_rdma_every;
    }
out_say:
    if (c->verbose >= 5 && 0 == me) {
        char small[128] = "";
        if (0 != m->net_eager && LLRDMA_NET_AUTO == knob) {
            snprintf(small, sizeof(small),
                     "; calls whose inter-node messages ob1 sends eagerly (up to %lu bytes) "
                     "take the PML",
                     (unsigned long)m->net_eager);
        }
        opal_output_verbose(5, c->output,
                            "coll:llrdma: %s: inter-node transport %s (%s)%s; device vectors on "
                            "rank 0: %s",
                            comm->c_name, mca_coll_llrdma_net_of(m)->name, said, small,
                            m->gpu_direct ? "GPU-direct (btl/llrdma registers GPU memory)"
                            : &btl_net == m->net
                                ? "copied to host memory (btl/llrdma registers no GPU memory)"
                                : "copied to host memory (the PML carries the inter-node step)");
    }
}
