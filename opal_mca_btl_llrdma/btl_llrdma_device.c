/*
 * Verbs device discovery for btl/llrdma: which (device, port) pairs this rank
 * may use, honouring btl_llrdma_if_include / if_exclude, and which address
 * rdma_cm binds to on each: on RoCE the IPv4-mapped GID (RoCE v2 preferred,
 * as the Soft-RoCE notes require), on InfiniBand an IPoIB interface's IPv4
 * address.
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <string.h>

#include "opal/util/argv.h"
#include "opal/util/output.h"

#include "btl_llrdma.h"
#include "btl_llrdma_verbs.h"

/* Does `list` (argv of "dev" or "dev:port") name this device/port?  port 0
 * asks about the device as a whole (only plain "dev" entries match). */
static int list_matches(char **list, const char *dev, int port)
{
    char buf[128];
    for (int i = 0; NULL != list && NULL != list[i]; ++i) {
        if (0 == strcmp(list[i], dev)) {
            return 1;
        }
        if (port > 0) {
            snprintf(buf, sizeof(buf), "%s:%d", dev, port);
            if (0 == strcmp(list[i], buf)) {
                return 1;
            }
        }
    }
    return 0;
}

/* Device-level filter: excluded devices are skipped; with an include list a
 * device stays when it or one of its ports is listed. */
static int device_wanted(char **inc, char **exc, const char *dev)
{
    if (NULL != exc && list_matches(exc, dev, 0)) {
        return 0;
    }
    if (NULL == inc) {
        return 1;
    }
    for (int i = 0; NULL != inc[i]; ++i) {
        size_t n = strlen(dev);
        if (0 == strncmp(inc[i], dev, n) && ('\0' == inc[i][n] || ':' == inc[i][n])) {
            return 1;
        }
    }
    return 0;
}

static int port_wanted(char **inc, char **exc, const char *dev, int port)
{
    if (NULL != exc && list_matches(exc, dev, port)) {
        return 0;
    }
    return NULL == inc || list_matches(inc, dev, port);
}

static int gid_is_ipv4_mapped(const union ibv_gid *g)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return 0 == memcmp(g->raw, prefix, sizeof(prefix));
}

/* RoCE: the IPv4-mapped GID to use, RoCE v2 before v1.  -1 when none. */
static int pick_roce_gid(struct ibv_context *ctx, int port, int tbl_len, mca_btl_llrdma_port_t *out)
{
    int best = -1, best_rank = 0;
    for (int i = 0; i < tbl_len; ++i) {
        union ibv_gid gid;
        unsigned type = IBV_GID_TYPE_ROCE_V1;
        int rank;
        if (0 != mca_btl_llrdma_verbs.query_gid(ctx, (uint8_t)port, i, &gid) ||
            !gid_is_ipv4_mapped(&gid)) {
            continue;
        }
        (void)mca_btl_llrdma_verbs.query_gid_type(ctx, (uint8_t)port, i, &type);
        rank = IBV_GID_TYPE_ROCE_V2 == type ? 2 : 1;
        if (rank > best_rank) {
            best = i;
            best_rank = rank;
            out->gid_type = type;
            memcpy(&out->ipv4, &gid.raw[12], sizeof(out->ipv4));
        }
    }
    out->gid_index = best;
    return best;
}

/* InfiniBand: an IPv4 address of one of the device's IPoIB interfaces. */
static int pick_ipoib_addr(const char *dev, mca_btl_llrdma_port_t *out)
{
    char path[256];
    struct ifaddrs *ifs = NULL;
    DIR *d;
    struct dirent *e;
    int found = -1;

    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/net", dev);
    d = opendir(path);
    if (NULL == d) {
        return -1;
    }
    if (0 != getifaddrs(&ifs)) {
        goto out_closedir;
    }
    while (found < 0 && NULL != (e = readdir(d))) {
        for (struct ifaddrs *a = ifs; NULL != a; a = a->ifa_next) {
            if (NULL != a->ifa_addr && AF_INET == a->ifa_addr->sa_family &&
                0 == strcmp(a->ifa_name, e->d_name)) {
                out->ipv4 = ((struct sockaddr_in *)a->ifa_addr)->sin_addr;
                out->gid_index = 0;
                found = 0;
                break;
            }
        }
    }
    freeifaddrs(ifs);
out_closedir:
    closedir(d);
    return found;
}

int mca_btl_llrdma_discover(llrdma_rank_config_t *cfg)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    struct ibv_device **devs = NULL;
    char **inc = NULL, **exc = NULL;
    int ndev = 0, usable = 0, opened = 0;

    c->nports = 0;

    if (NULL != c->if_include && NULL != c->if_exclude) {
        snprintf(cfg->btl_status, sizeof(cfg->btl_status),
                 "disqualified: btl_llrdma_if_include and if_exclude both set");
        return 0;
    }
    if (NULL != c->if_include) {
        inc = opal_argv_split(c->if_include, ',');
    }
    if (NULL != c->if_exclude) {
        exc = opal_argv_split(c->if_exclude, ',');
    }

    devs = mca_btl_llrdma_verbs.get_device_list(&ndev);
    if (NULL == devs || 0 == ndev) {
        snprintf(cfg->btl_status, sizeof(cfg->btl_status), "disqualified: no verbs device");
        goto out_free_lists;
    }

    for (int d = 0; d < ndev; ++d) {
        const char *name = mca_btl_llrdma_verbs.get_device_name(devs[d]);
        struct ibv_device_attr dattr;
        struct ibv_context *ctx;

        if (NULL == name || !device_wanted(inc, exc, name)) {
            continue;
        }
        ctx = mca_btl_llrdma_verbs.open_device(devs[d]);
        if (NULL == ctx) {
            opal_output_verbose(10, c->output, "btl:llrdma: cannot open %s", name);
            continue;
        }
        ++opened;
        if (0 != mca_btl_llrdma_verbs.query_device(ctx, &dattr)) {
            opal_output_verbose(10, c->output, "btl:llrdma: ibv_query_device(%s) failed", name);
            goto next_close_device;
        }
        for (int p = 1; p <= dattr.phys_port_cnt; ++p) {
            struct ibv_port_attr pattr;
            if (!port_wanted(inc, exc, name, p) ||
                0 != mca_btl_llrdma_verbs.query_port(ctx, (uint8_t)p, &pattr) ||
                IBV_PORT_ACTIVE != pattr.state) {
                continue;
            }
            mca_btl_llrdma_port_t *pt;
            if (c->nports >= MCA_BTL_LLRDMA_MAX_PORTS) {
                continue;
            }
            pt = &c->ports[c->nports];
            memset(pt, 0, sizeof(*pt));
            snprintf(pt->dev, sizeof(pt->dev), "%s", name);
            pt->port = p;
            pt->link_layer = pattr.link_layer;
            pt->max_cqe = (uint32_t)dattr.max_cqe;
            pt->max_srq_wr = (uint32_t)dattr.max_srq_wr;
            pt->max_qp_wr = (uint32_t)dattr.max_qp_wr;
            if ((IBV_LINK_LAYER_ETHERNET == pattr.link_layer
                     ? pick_roce_gid(ctx, p, pattr.gid_tbl_len, pt)
                     : pick_ipoib_addr(name, pt)) < 0) {
                opal_output_verbose(10, c->output,
                                    "btl:llrdma: %s:%d active but has no IPv4 address for "
                                    "rdma_cm (%s); skipped",
                                    name, p,
                                    IBV_LINK_LAYER_ETHERNET == pattr.link_layer
                                        ? "no IPv4-mapped GID"
                                        : "no IPoIB interface with IPv4");
                continue;
            }
            if (0 == usable) {
                snprintf(cfg->device.name, sizeof(cfg->device.name), "%s", name);
                cfg->device.port = p;
                cfg->device.cq_moderation_supported = -1; /* known once a CQ exists */
            }
            ++usable;
            ++c->nports;
            opal_output_verbose(10, c->output, "btl:llrdma: %s:%d active (%s, GID index %d, %s)",
                                name, p,
                                IBV_LINK_LAYER_ETHERNET == pattr.link_layer ? "RoCE" : "InfiniBand",
                                pt->gid_index, inet_ntoa(pt->ipv4));
        }
    next_close_device:
        mca_btl_llrdma_verbs.close_device(ctx);
    }

    if (0 == usable) {
        snprintf(cfg->btl_status, sizeof(cfg->btl_status),
                 "disqualified: no usable active verbs port (%d device(s), %d opened)", ndev,
                 opened);
    }
    cfg->ndevices = usable;
    mca_btl_llrdma_verbs.free_device_list(devs);
out_free_lists:
    opal_argv_free(inc);
    opal_argv_free(exc);
    return usable;
}
