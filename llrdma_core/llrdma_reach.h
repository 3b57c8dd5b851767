/*
 * llrdma_reach.h -- pure fabric-addressing decisions of btl/llrdma (C API of
 * llrdma_core/reach.cc): which GID of a RoCE port rdma_cm binds to, and which
 * of a peer's published ports a local port talks to.  No Open MPI or verbs
 * header, so the rules are unit-tested on their own (tests/unit/test_reach).
 */
#ifndef LLRDMA_REACH_H
#define LLRDMA_REACH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Same values as rdma-core's IBV_LINK_LAYER_* (0, unspecified, is what old
 * InfiniBand drivers report: it counts as InfiniBand). */
enum { LLRDMA_LINK_UNSPECIFIED = 0, LLRDMA_LINK_IB = 1, LLRDMA_LINK_ETH = 2 };

/* Same values as rdma-core's IBV_GID_TYPE_*. */
enum { LLRDMA_GID_TYPE_IB = 0, LLRDMA_GID_TYPE_ROCE_V1 = 1, LLRDMA_GID_TYPE_ROCE_V2 = 2 };

/* btl_llrdma_roce_version: which GID types a RoCE port may use. */
enum { LLRDMA_ROCE_AUTO = 0, LLRDMA_ROCE_V1 = 1, LLRDMA_ROCE_V2 = 2 };

/* "roce_v1", "roce_v2", "ib" (the dump's gid_type); "" for an unknown type. */
const char *llrdma_gid_type_name(int gid_type);

/* ------------------------------------------------------------ GID choice */

/* One entry of a port's GID table as discovery read it. */
typedef struct {
    int readable;    /* ibv_query_gid succeeded and the entry is not empty (::) */
    int ipv4_mapped; /* ::ffff:a.b.c.d, the only kind rdma_cm's IPv4 address maps to */
    int type;        /* LLRDMA_GID_TYPE_*; ROCE_V1 when the type could not be read */
} llrdma_gid_entry_t;

/* Results of llrdma_gid_choose other than an index. */
enum {
    LLRDMA_GID_NONE = -1,         /* no IPv4-mapped GID of an allowed type */
    LLRDMA_GID_OUT_OF_RANGE = -2, /* pinned index >= table length */
    LLRDMA_GID_UNREADABLE = -3,   /* pinned entry could not be read, or is empty */
    LLRDMA_GID_NOT_IPV4 = -4,     /* pinned GID is not IPv4-mapped */
    LLRDMA_GID_WRONG_TYPE = -5    /* pinned GID's type is excluded by roce_version */
};

/* The GID index a RoCE port binds to.  pinned < 0: the first IPv4-mapped GID
 * of the preferred type (auto: RoCE v2, else v1; LLRDMA_ROCE_V1/V2: only that
 * type).  pinned >= 0: that index, which must be readable, IPv4-mapped and of
 * an allowed type.  Returns the index or one of LLRDMA_GID_*. */
int llrdma_gid_choose(const llrdma_gid_entry_t *tbl, int n, int pinned, int roce_version);

/* ---------------------------------------------------------- reachability */

/* Most ports per process llrdma_reach_pick handles (btl/llrdma publishes at
 * most MCA_BTL_LLRDMA_MAX_PORTS). */
#define LLRDMA_REACH_MAX_PORTS 64

/* One port's published address. */
typedef struct {
    uint32_t ipv4;      /* host byte order; 0 = none */
    uint8_t prefix_len; /* netmask length 1..32; 0 = unknown */
    uint8_t link_layer; /* LLRDMA_LINK_* */
} llrdma_reach_addr_t;

/* How well `a` reaches `b` (symmetric): 0 not at all (different link layer,
 * or no address), 1 same link layer, 2 also the same IPv4 subnet (under the
 * shorter of the two known prefixes). */
int llrdma_reach_quality(const llrdma_reach_addr_t *a, const llrdma_reach_addr_t *b);

/* Which of the peer's `npeer` ports local port `me` (of `nlocal`) talks to,
 * or -1 (also for invalid arguments, or more than LLRDMA_REACH_MAX_PORTS
 * on a side).  Ports are paired one to one, like rails: a maximum matching
 * that first pairs ports on the same subnet, then ports of the same link
 * layer, in a fixed order.  `local_first` is 1 on the process whose name is
 * the smaller of the two and 0 on the other, so both sides compute the same
 * pairs and every connection is wanted by both ends.  A local port left
 * without a partner (this side has more ports of that link layer) gets -1:
 * the peer is reached through the others. */
int llrdma_reach_pick(const llrdma_reach_addr_t *local, int nlocal, const llrdma_reach_addr_t *peer,
                      int npeer, int me, int local_first);

#ifdef __cplusplus
}
#endif
#endif
