/*
 * llrdma_netuse.h -- does btl/llrdma carry this rank's point-to-point
 * traffic, and must the user hear about it (C API of llrdma_core/netuse.cc).
 *
 * An Open MPI built with UCX selects pml/ucx on an RDMA device, and ob1 with
 * its BTLs never runs; a hint set for btl/llrdma then does nothing for the
 * network and nothing says so.  The glue gathers what Open MPI chose (the
 * PML, which BTLs reach which peers, which btl_llrdma_* knobs the user set);
 * this decides and words it, so coll/llrdma's one line per job and
 * llrdma-check's per-rank report say the same.  No Open MPI header.
 */
#ifndef LLRDMA_NETUSE_H
#define LLRDMA_NETUSE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *pml;        /* the selected PML component ("ob1", "ucx", "cm") */
    int knobs;              /* btl_llrdma_* variables the user set (an API hint counts) */
    const char *knob;       /* the first of them as "btl_llrdma_size_hint=8K (environment)" */
    int local_peers;        /* peers on this node looked at */
    int local_llrdma;       /* of those, reached through btl/llrdma */
    int remote_peers;       /* peers on other nodes looked at */
    int remote_llrdma;      /* of those, reached through btl/llrdma */
    const char *btl_status; /* btl/llrdma's own ("active", "disqualified: ..."), NULL unknown */
    const char *instead;    /* the BTLs that reach a remote peer instead ("tcp"), NULL unknown */
} llrdma_netuse_t;

typedef enum {
    LLRDMA_NETUSE_USED = 0,     /* btl/llrdma reaches every remote peer looked at */
    LLRDMA_NETUSE_ONE_NODE = 1, /* no remote peer: shared memory carries the traffic */
    LLRDMA_NETUSE_PARTIAL = 2,  /* some remote peers only */
    LLRDMA_NETUSE_NOT_OB1 = 3,  /* another PML drives the network: no BTL is used */
    LLRDMA_NETUSE_NO_PEER = 4   /* ob1, but btl/llrdma reaches no remote peer */
} llrdma_netuse_verdict_t;

/* The verdict, and in msg (always terminated, may be cut) one sentence for
 * the user: what carries the traffic and, where btl/llrdma is unused, what
 * to set.  Returns LLRDMA_NETUSE_* (or -1 for NULL arguments). */
int llrdma_netuse_decide(const llrdma_netuse_t *in, char *msg, size_t len);

/* 1 when the job should say so (one line) and llrdma-check exit non-zero:
 * the user set a btl_llrdma knob and btl/llrdma carries nothing to other
 * nodes (NOT_OB1, NO_PEER).  PARTIAL is worth a line (2) but no failure. */
int llrdma_netuse_warn(int verdict, int knobs);

#ifdef __cplusplus
}
#endif

#endif
