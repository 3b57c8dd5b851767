/*
 * Gathering the inputs of llrdma_netuse_decide from Open MPI (coll/llrdma and
 * llrdma-check; coll_llrdma_netuse.c).
 */
#ifndef COLL_LLRDMA_NETUSE_H
#define COLL_LLRDMA_NETUSE_H

#include "llrdma_netuse.h"

struct ompi_communicator_t;

typedef struct {
    llrdma_netuse_t in; /* its strings point into the buffers below */
    char pml[64];
    char knob[192];
    char status[128];
    char instead[64];
} mca_coll_llrdma_netuse_facts_t;

/* This rank's PML, the btl_llrdma_* knobs set, and which BTLs reach up to
 * max_peers peers of comm (spread over its ranks; each gets its BML
 * endpoint, as its first message would; 0: none looked at). */
void mca_coll_llrdma_netuse_gather(struct ompi_communicator_t *comm, int max_peers,
                                   mca_coll_llrdma_netuse_facts_t *f);

#endif
