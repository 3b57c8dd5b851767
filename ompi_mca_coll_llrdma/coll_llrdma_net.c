/*
 * coll/llrdma: the inter-node step's transport -- the seam between the
 * hierarchical Allreduce (llrdma_core/allreduce/hier.cc) and the wire.
 *
 * The core's inter-node step only calls isend / irecv / waitall / cancel
 * between the ranks holding the same slice on different nodes, with the
 * contract of llrdma_ar_comm_t (llrdma_allreduce.h).  Today that is the PML
 * (ob1 picks btl/llrdma between nodes).  A BTL put path (btl_put into the
 * peer's registered receive buffer plus a completion flag, as NCCL's net
 * plugins implement isend/irecv over RDMA writes; osc/rdma's way of finding
 * the BTL: ompi_comm_peer_lookup -> mca_bml_base_get_endpoint -> btl_rdma)
 * is another mca_coll_llrdma_net_t, chosen here per communicator; nothing
 * in the core changes.
 */
#include "ompi_config.h"

#include "coll_llrdma.h"

static const mca_coll_llrdma_net_t pml_net = {
    .name = "pml",
    .isend = mca_coll_llrdma_pml_isend,
    .irecv = mca_coll_llrdma_pml_irecv,
    .waitall = mca_coll_llrdma_pml_waitall,
    .cancel = mca_coll_llrdma_pml_cancel,
};

const mca_coll_llrdma_net_t *mca_coll_llrdma_net_select(struct ompi_communicator_t *comm)
{
    (void)comm; /* the only transport until btl/llrdma has btl_put */
    return &pml_net;
}
