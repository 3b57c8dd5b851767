/*
 * coll/llrdma: the communicator's agreement, made once, lazily, by its first
 * Allreduce: every rank's plan inputs (hint, knobs, eager size, GPU driver,
 * opt-out) compared in one Allreduce of the module below, then the node
 * layout and the arena or the inter-node transport set up collectively.
 * Any disagreement takes the communicator out for every rank, with the
 * reason in the dump.
 */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/communicator/communicator.h"
#include "ompi/constants.h"
#include "opal/util/output.h"
#include "ompi/mca/bml/base/base.h"
#include "ompi/mca/pml/base/base.h"
#include "ompi/proc/proc.h"

#include "coll_llrdma.h"

/* Largest payload ob1 sends eagerly to every peer of comm (its eager BTL's
 * limit, less a header margin); 0 when unknown (another PML, no endpoint). */
static size_t local_eager_bytes(struct ompi_communicator_t *comm)
{
    /* ob1's match header plus slack; exactness does not matter, agreement does. */
    const size_t header = 64;
    size_t best = SIZE_MAX;
    int me = ompi_comm_rank(comm), n = ompi_comm_size(comm);

    if (0 != strcmp(mca_pml_base_selected_component.pmlm_version.mca_component_name, "ob1")) {
        return 0;
    }
    for (int i = 0; i < n; ++i) {
        ompi_proc_t *proc;
        mca_bml_base_endpoint_t *ep;
        mca_bml_base_btl_t *b;
        if (i == me) {
            continue;
        }
        proc = ompi_comm_peer_lookup(comm, i);
        ep = (NULL != proc) ? mca_bml_base_get_endpoint(proc) : NULL;
        b = (NULL != ep && mca_bml_base_btl_array_get_size(&ep->btl_eager) > 0)
                ? mca_bml_base_btl_array_get_index(&ep->btl_eager, 0)
                : NULL;
        if (NULL == b || b->btl->btl_eager_limit <= header) {
            return 0;
        }
        if (b->btl->btl_eager_limit - header < best) {
            best = b->btl->btl_eager_limit - header;
        }
    }
    return SIZE_MAX == best ? 0 : best;
}

int mca_coll_llrdma_agree(mca_coll_llrdma_module_t *m, struct ompi_communicator_t *comm)
{
    mca_coll_llrdma_component_t *c = &mca_coll_llrdma_component;
    int n = ompi_comm_size(comm);
    long mine[19], all[19], eager, below, peer;
    int rc, mode, *keys = NULL;
    void *names = NULL;

    if (0 != m->agreed) {
        return m->agreed > 0;
    }
    /* The layout's buffers come first, so that a failed allocation is agreed
     * on below instead of leaving the others in an exchange. */
    keys = malloc((size_t)n * sizeof(int));
    names = malloc((size_t)n * mca_coll_llrdma_shm_name_bytes());
    m->peers = malloc((size_t)n * sizeof(int));
    m->locals = malloc((size_t)n * sizeof(int));
    below = mca_coll_llrdma_below_hier(m);
    /* max(x) == -max(-x) on every rank iff all ranks hold the same x; the
     * eager payload is agreed as the minimum (any unknown makes it unknown). */
    eager = (long)local_eager_bytes(comm);
    mine[0] = (long)m->hint;
    mine[1] = -(long)m->hint;
    mine[2] = c->algorithm;
    mine[3] = -c->algorithm;
    mine[4] = (long)c->segment_bytes;
    mine[5] = -(long)c->segment_bytes;
    mine[6] = -eager;
    mine[7] = (0 == eager) ? 1 : 0;
    /* An arena wanted by every rank, with the same chunk everywhere. */
    mine[8] = -(long)(c->shm_enable ? 1 : 0);
    mine[9] = (long)c->shm_chunk;
    mine[10] = -(long)c->shm_chunk;
    mine[11] = (NULL == keys || NULL == names || NULL == m->peers || NULL == m->locals) ? 1 : 0;
    mine[12] = below;
    /* The inter-node transport knob (its set-up is collective). */
    mine[13] = c->internode_transport;
    mine[14] = -c->internode_transport;
    /* Opting out by info must be unanimous to be consistent: any rank that
     * opts out takes the communicator out for all (max of mine[15]). */
    mine[15] = m->info_off;
    /* The GPU peer knobs decide which calls try the peer path (rounds). */
    peer = (long)c->gpu_peer << 41 | (long)c->gpu_peer_min;
    mine[16] = peer;
    mine[17] = -peer;
    /* Which ranks may take the GPU peer path: all or none (a rank without
     * the CUDA driver holds no device buffer, so no call could take it, and
     * host calls need not even stamp a placement word). */
    mine[18] = mca_coll_llrdma_gpu_driver() ? 0 : 1;
    rc =
        m->previous_allreduce(mine, all, 19, MPI_LONG, MPI_MAX, comm, m->previous_allreduce_module);
    if (OMPI_SUCCESS != rc) {
        m->agreed = -1;
        m->decline_why = "the agreement Allreduce failed";
    } else if (0 != all[15]) {
        m->agreed = -1;
        m->decline_why = "the communicator's info sets " LLRDMA_INFO_ALLREDUCE "=false";
        if (!m->info_off) {
            opal_output(0,
                        "coll:llrdma: rank %d of %s: its info does not set " LLRDMA_INFO_ALLREDUCE
                        "=false but another rank's does: coll/llrdma stays off on this "
                        "communicator for every rank; give every rank the same info",
                        ompi_comm_rank(comm), comm->c_name);
        }
    } else if (all[0] != -all[1] || all[2] != -all[3] || all[4] != -all[5] || all[9] != -all[10] ||
               all[13] != -all[14] || all[16] != -all[17]) {
        m->agreed = -1;
        m->decline_why = "ranks disagree on the plan inputs";
        if (0 == ompi_comm_rank(comm)) {
            opal_output(0,
                        "coll:llrdma: ranks of %s disagree on the Allreduce plan (size hint "
                        "%ld..%ld, algorithm %ld..%ld, segment %ld..%ld, shm chunk "
                        "%ld..%ld, or coll_llrdma_gpu_peer / gpu_peer_min / "
                        "internode_transport): coll/llrdma stays "
                        "off on this communicator; make the "
                        "hint and the coll_llrdma_* knobs identical on every rank",
                        comm->c_name, -all[1], all[0], -all[3], all[2], -all[5], all[4], -all[10],
                        all[9]);
        }
    } else if (0 != all[11]) {
        m->agreed = -1;
        m->decline_why = "out of memory for the node layout";
    } else {
        m->eager_bytes = (0 != all[7]) ? 0 : (size_t)(-all[6]);
        if (0 != all[18] && !m->peer.never) {
            m->peer.never = 1;
            m->peer.never_reason = LLRDMA_PEER_NO_LIBRARY;
            if (mca_coll_llrdma_gpu_possible()) {
                opal_output_verbose(
                    5, c->output, "coll:llrdma: %s: no GPU peer path on this communicator: %s",
                    comm->c_name,
                    mca_coll_llrdma_gpu_driver() ? "another rank has no CUDA driver (libcuda.so.1)"
                                                 : "this rank has no CUDA driver (libcuda.so.1)");
            }
        }
        /* Every rank takes the same branches: the set-ups are collective. */
        mode = mca_coll_llrdma_hier_setup(m, comm, keys, names, -all[8] == 1, 0 != all[12]);
        m->agreed = 1;
        if (mode < 0) {
            m->agreed = -1;
            m->decline_why = "the node layout exchange failed";
        } else if (LLRDMA_AR_MODE_DECLINE == mode) {
            m->agreed = -1;
        } else if (LLRDMA_AR_MODE_HIER == mode) {
            mca_coll_llrdma_net_setup(m, comm); /* collective too */
        } else if (LLRDMA_AR_MODE_FLAT == mode && 1 == m->topo.nnodes && -all[8] == 1 && n > 1) {
            (void)mca_coll_llrdma_shm_setup(m, comm);
        }
        m->mode = mode;
    }
    free(names);
    free(keys);
    if (LLRDMA_AR_MODE_HIER != m->mode) {
        free(m->peers);
        free(m->locals);
        m->peers = m->locals = NULL;
        m->hier.peers = NULL;
    }
    return m->agreed > 0;
}
