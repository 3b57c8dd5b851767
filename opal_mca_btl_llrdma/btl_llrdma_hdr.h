/*
 * btl/llrdma wire formats: the header in front of every send, and the private
 * data of an rdma_cm connection request.  Both peers run the same build
 * (Open MPI does not mix BTL versions in one job), so these are host-order
 * structs; the version byte catches a mixed installation at connect time.
 */
#ifndef MCA_BTL_LLRDMA_HDR_H
#define MCA_BTL_LLRDMA_HDR_H

#include <stdint.h>

/* In front of every fragment.  8 bytes keep the payload 8-byte aligned. */
typedef struct mca_btl_llrdma_hdr_t {
    uint8_t tag;   /* ob1 active-message tag */
    uint8_t flags; /* MCA_BTL_LLRDMA_HDR_* (first record of a buffer only) */
    /* With MCA_BTL_LLRDMA_HDR_CREDIT: the low 16 bits of the sender's
     * cumulative count of our buffers it received and reposted (credits
     * returned in the header of reverse traffic; docs/btl-design.md). */
    uint16_t credit;
    /* Payload bytes in the low 24 bits, checked against the completion's
     * byte_len; MCA_BTL_LLRDMA_HDR_MAGIC in the high 8 (a corrupt or foreign
     * buffer).  Fragments are at most 1 MiB. */
    uint32_t len;
} mca_btl_llrdma_hdr_t;

#define MCA_BTL_LLRDMA_HDR_MAGIC 0x4cu /* "L" */
#define MCA_BTL_LLRDMA_HDR_LEN_MAX 0xffffffu
#define MCA_BTL_LLRDMA_HDR_WORD(len) ((uint32_t)(len) | (MCA_BTL_LLRDMA_HDR_MAGIC << 24))
#define MCA_BTL_LLRDMA_HDR_LEN(h) ((h)->len & MCA_BTL_LLRDMA_HDR_LEN_MAX)
#define MCA_BTL_LLRDMA_HDR_MAGIC_OK(h) (MCA_BTL_LLRDMA_HDR_MAGIC == (h)->len >> 24)
/* The buffer holds several records (header + payload), each starting at a
 * multiple of 8 bytes; the last one ends where the received bytes end. */
#define MCA_BTL_LLRDMA_HDR_PACKED 0x01u
/* `credit` carries a return count. */
#define MCA_BTL_LLRDMA_HDR_CREDIT 0x02u
/* A piece of a fragment larger than the receiver's buffers (a peer with a
 * smaller hint; llrdma_btl_route): MORE on every piece but the last, LAST on
 * the last.  Never packed, never packed behind. */
#define MCA_BTL_LLRDMA_HDR_MORE 0x04u
#define MCA_BTL_LLRDMA_HDR_LAST 0x08u
#define MCA_BTL_LLRDMA_HDR_PIECE (MCA_BTL_LLRDMA_HDR_MORE | MCA_BTL_LLRDMA_HDR_LAST)
#define MCA_BTL_LLRDMA_REC_ALIGN(x) (((x) + 7u) & ~7u)

#define MCA_BTL_LLRDMA_CONN_MAGIC 0x6c6c7264u /* "llrd" */
/* 4: the listener's secret; 5: returned credits in the send header (an
 * older peer is told "another llrdma version" at connect time instead of
 * reading the new header as a malformed fragment); 6: pieces of split
 * fragments (HDR_MORE, HDR_LAST). */
#define MCA_BTL_LLRDMA_CONN_VERSION 6

/* Why a connection request was rejected (conn_req_t.reason). */
enum {
    MCA_BTL_LLRDMA_REJ_NONE = 0,
    MCA_BTL_LLRDMA_REJ_TIE,    /* simultaneous connect: the rejecting side's attempt wins */
    MCA_BTL_LLRDMA_REJ_DUP,    /* the rejecting side already has this path */
    MCA_BTL_LLRDMA_REJ_NORES,  /* no receive buffers could be allotted */
    MCA_BTL_LLRDMA_REJ_NOPATH, /* the rejecting side has no such path */
    MCA_BTL_LLRDMA_REJ_BAD,    /* malformed or foreign request */
};

/* rdma_connect / rdma_accept / rdma_reject private data (56 bytes are
 * available in a request on IB/RoCE).  Each side tells the other what it may
 * send: the credits (receive buffers allotted to this connection), the
 * largest fragment it receives on the path, and where to write returned
 * credits (see docs/btl-design.md, "Flow control"). */
typedef struct mca_btl_llrdma_conn_req_t {
    uint32_t magic;
    uint8_t version;
    uint8_t path;   /* LLRDMA_PATH_LL or LLRDMA_PATH_BW */
    uint8_t reason; /* MCA_BTL_LLRDMA_REJ_* in a reject */
    uint8_t reserved;
    uint32_t jobid; /* the sender's opal_process_name_t */
    uint32_t vpid;
    uint64_t hint;        /* the sender's size hint, fixed for this connection */
    uint64_t credit_addr; /* 8 bytes the peer RDMA-writes its cumulative return count to */
    uint32_t credit_rkey;
    uint32_t credits;  /* receive buffers the sender allotted to this connection */
    uint32_t frag_max; /* largest fragment (BTL header excluded) it receives on this path */
    /* The listener's secret from its modex record: only processes of the job
     * read it, so a request without it comes from outside (a shared fabric
     * has other tenants).  0 in replies and rejects. */
    uint64_t secret;
} mca_btl_llrdma_conn_req_t;

/* An IB CM request carries 56 bytes of private data (RoCE the same). */
_Static_assert(sizeof(mca_btl_llrdma_conn_req_t) <= 56, "connect request over 56 bytes");

/* What a module publishes in the modex; one record per module (port). */
typedef struct mca_btl_llrdma_addr_t {
    uint32_t ipv4;      /* network byte order: the rdma_cm listener */
    uint16_t cm_port;   /* network byte order */
    uint8_t ib_port;    /* informational */
    uint8_t link_layer; /* IBV_LINK_LAYER_* */
    char dev[24];       /* informational, for messages */
    /* What this rank receives (its own profile): peers never send more. */
    uint64_t hint;
    uint32_t frag_max[2]; /* per path (LL, BW); 0 = no such path */
    uint8_t prefix_len;   /* netmask length of ipv4 (0 unknown): pairs ports by subnet */
    uint64_t secret;      /* random, per listener: required in its connect requests */
} mca_btl_llrdma_addr_t;

#endif
