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
    uint8_t tag;    /* ob1 active-message tag */
    uint8_t flags;  /* reserved */
    uint16_t magic; /* MCA_BTL_LLRDMA_HDR_MAGIC: a corrupt or foreign buffer */
    uint32_t len;   /* payload bytes, checked against the completion's byte_len */
} mca_btl_llrdma_hdr_t;

#define MCA_BTL_LLRDMA_HDR_MAGIC 0x4c4cu /* "LL" */

#define MCA_BTL_LLRDMA_CONN_MAGIC 0x6c6c7264u /* "llrd" */
#define MCA_BTL_LLRDMA_CONN_VERSION 1

/* rdma_connect private data (56 bytes are available on IB/RoCE). */
typedef struct mca_btl_llrdma_conn_req_t {
    uint32_t magic;
    uint8_t version;
    uint8_t path; /* LLRDMA_PATH_LL or LLRDMA_PATH_BW */
    uint16_t reserved;
    uint32_t jobid; /* the initiator's opal_process_name_t */
    uint32_t vpid;
    uint64_t hint; /* the initiator's size hint, fixed for this connection */
} mca_btl_llrdma_conn_req_t;

/* What a module publishes in the modex; one record per module (port). */
typedef struct mca_btl_llrdma_addr_t {
    uint32_t ipv4;      /* network byte order: the rdma_cm listener */
    uint16_t cm_port;   /* network byte order */
    uint8_t ib_port;    /* informational */
    uint8_t link_layer; /* IBV_LINK_LAYER_* */
    char dev[24];       /* informational, for messages */
} mca_btl_llrdma_addr_t;

#endif
