/*
 * The one seam between btl/llrdma and rdma-core.  Every verbs call of the
 * BTL goes through mca_btl_llrdma_verbs, so unit tests can install a fake
 * device and make the Nth call of any entry fail (as NCCL's ibvwrap and
 * libfabric's EFA provider do).  Entries are added here as the BTL uses them;
 * nothing else in the BTL includes <infiniband/verbs.h> functions directly.
 */
#ifndef MCA_BTL_LLRDMA_VERBS_H
#define MCA_BTL_LLRDMA_VERBS_H

#include <infiniband/verbs.h>

typedef struct mca_btl_llrdma_verbs_ops_t {
    struct ibv_device **(*get_device_list)(int *num_devices);
    void (*free_device_list)(struct ibv_device **list);
    const char *(*get_device_name)(struct ibv_device *device);
    struct ibv_context *(*open_device)(struct ibv_device *device);
    int (*close_device)(struct ibv_context *context);
    int (*query_device)(struct ibv_context *context, struct ibv_device_attr *attr);
    int (*query_port)(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr);
    int (*query_gid)(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid);
} mca_btl_llrdma_verbs_ops_t;

/* Initialised to rdma-core; a test may overwrite any entry. */
extern mca_btl_llrdma_verbs_ops_t mca_btl_llrdma_verbs;

/* The rdma-core table, to restore after a test. */
extern const mca_btl_llrdma_verbs_ops_t mca_btl_llrdma_verbs_real;

#endif
