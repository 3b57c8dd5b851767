/*
 * rdma-core behind the verbs seam (see btl_llrdma_verbs.h).  Several verbs
 * are static inline functions or macros in <infiniband/verbs.h>, so each gets
 * a real function here that a table can point to.
 */
#include "btl_llrdma_verbs.h"

static struct ibv_device **real_get_device_list(int *n)
{
    return ibv_get_device_list(n);
}
static void real_free_device_list(struct ibv_device **l)
{
    ibv_free_device_list(l);
}
static const char *real_get_device_name(struct ibv_device *d)
{
    return ibv_get_device_name(d);
}
static struct ibv_context *real_open_device(struct ibv_device *d)
{
    return ibv_open_device(d);
}
static int real_close_device(struct ibv_context *c)
{
    return ibv_close_device(c);
}

static int real_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
    return ibv_query_device(c, a);
}

static int real_query_port(struct ibv_context *c, uint8_t p, struct ibv_port_attr *a)
{
    return ibv_query_port(c, p, a);
}

static int real_query_gid(struct ibv_context *c, uint8_t p, int i, union ibv_gid *g)
{
    return ibv_query_gid(c, p, i, g);
}

const mca_btl_llrdma_verbs_ops_t mca_btl_llrdma_verbs_real = {
    .get_device_list = real_get_device_list,
    .free_device_list = real_free_device_list,
    .get_device_name = real_get_device_name,
    .open_device = real_open_device,
    .close_device = real_close_device,
    .query_device = real_query_device,
    .query_port = real_query_port,
    .query_gid = real_query_gid,
};

mca_btl_llrdma_verbs_ops_t mca_btl_llrdma_verbs = {
    .get_device_list = real_get_device_list,
    .free_device_list = real_free_device_list,
    .get_device_name = real_get_device_name,
    .open_device = real_open_device,
    .close_device = real_close_device,
    .query_device = real_query_device,
    .query_port = real_query_port,
    .query_gid = real_query_gid,
};
