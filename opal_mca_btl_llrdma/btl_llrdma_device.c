/*
 * Verbs device discovery for btl/llrdma: which (device, port) pairs this rank
 * may use, honouring btl_llrdma_if_include / if_exclude.
 */
#include "opal_config.h"

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

int mca_btl_llrdma_discover(llrdma_rank_config_t *cfg)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    struct ibv_device **devs = NULL;
    char **inc = NULL, **exc = NULL;
    int ndev = 0, usable = 0, opened = 0;

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
            if (0 == usable) {
                snprintf(cfg->device.name, sizeof(cfg->device.name), "%s", name);
                cfg->device.port = p;
                cfg->device.cq_moderation_supported = -1; /* known once a CQ exists */
            }
            ++usable;
            opal_output_verbose(10, c->output, "btl:llrdma: %s:%d active (%s)", name, p,
                                IBV_LINK_LAYER_ETHERNET == pattr.link_layer ? "RoCE"
                                                                            : "InfiniBand");
        }
    next_close_device:
        mca_btl_llrdma_verbs.close_device(ctx);
    }

    if (0 == usable) {
        snprintf(cfg->btl_status, sizeof(cfg->btl_status),
                 "disqualified: no usable active verbs port (%d device(s), %d opened)", ndev,
                 opened);
    } else {
        snprintf(cfg->btl_status, sizeof(cfg->btl_status),
                 "disqualified: %s:%d found, but the data path is not implemented yet",
                 cfg->device.name, cfg->device.port);
    }
    cfg->ndevices = usable;
    mca_btl_llrdma_verbs.free_device_list(devs);
out_free_lists:
    opal_argv_free(inc);
    opal_argv_free(exc);
    return usable;
}
