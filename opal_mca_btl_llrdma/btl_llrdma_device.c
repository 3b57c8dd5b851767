/*
 * Verbs device discovery for btl/llrdma: which (device, port) pairs this rank
 * may use, honouring btl_llrdma_if_include / if_exclude, and which address
 * rdma_cm binds to on each: on RoCE the IPv4-mapped GID (RoCE v2 preferred,
 * as the Soft-RoCE notes require; btl_llrdma_gid_index and roce_version
 * override the choice), on InfiniBand the IPv4 address of an IPoIB interface
 * of that port.  The address's netmask length is kept for pairing ports with
 * a peer's by subnet (llrdma_reach_pick).
 */
#include "opal_config.h"

#include <arpa/inet.h>
#include <sched.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "opal/constants.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/util/argv.h"
#include "opal/util/output.h"

#include "btl_llrdma.h"
#include "btl_llrdma_verbs.h"
#include "btl_llrdma_gpu.h"
#include "btl_llrdma_sysfs.h"
#include "llrdma_mca_common.h"
#include "llrdma_nic.h"
#include "llrdma_reach.h"

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

static int gid_is_zero(const union ibv_gid *g)
{
    static const uint8_t zero[16];
    return 0 == memcmp(g->raw, zero, sizeof(zero));
}

void mca_btl_llrdma_var_origin(const char *name, char *buf, size_t len)
{
    llrdma_hint_inputs_t in;
    char full[128];
    int idx = mca_base_var_find("opal", "btl", "llrdma", name);

    snprintf(full, sizeof(full), "btl_llrdma_%s", name);
    if (idx < 0 || OPAL_SUCCESS != llrdma_mca_hint_inputs(idx, full, &in)) {
        snprintf(buf, len, "unknown source");
        return;
    }
    switch (in.mca_source) {
    case LLRDMA_SRC_ENV:
        snprintf(buf, len, "environment (OMPI_MCA_%s; mpirun --mca sets this too)", full);
        break;
    case LLRDMA_SRC_FILE:
        if (in.mca_line > 0) {
            snprintf(buf, len, "file %s:%d", NULL != in.mca_file ? in.mca_file : "(unknown path)",
                     in.mca_line);
        } else {
            snprintf(buf, len, "file %s", NULL != in.mca_file ? in.mca_file : "(unknown path)");
        }
        break;
    default:
        snprintf(buf, len, "%s", llrdma_source_name(in.mca_source));
        break;
    }
}

void mca_btl_llrdma_bad_knob(const char *name, const char *value, const char *why)
{
    char origin[600], detail[2048];
    mca_btl_llrdma_var_origin(name, origin, sizeof(origin));
    snprintf(detail, sizeof(detail), "btl_llrdma_%s = %s (from %s): %s", name, value, origin, why);
    llrdma_mca_fatal("invalid btl knob", detail);
}

/* btl_llrdma_roce_version: auto | 1 | 2 (LLRDMA_ROCE_*). */
static int roce_version_knob(void)
{
    const char *t = mca_btl_llrdma_component.roce_version;
    char quoted[160];
    if (NULL == t || 0 == strcasecmp(t, "auto")) {
        return LLRDMA_ROCE_AUTO;
    }
    if (0 == strcmp(t, "1")) {
        return LLRDMA_ROCE_V1;
    }
    if (0 == strcmp(t, "2")) {
        return LLRDMA_ROCE_V2;
    }
    snprintf(quoted, sizeof(quoted), "'%.150s'", t);
    mca_btl_llrdma_bad_knob("roce_version", quoted, "not one of auto, 1, 2");
    return LLRDMA_ROCE_AUTO; /* not reached */
}

/* Netmask length and interface of a local IPv4 address; 0 when unknown. */
static int ipv4_prefix(struct ifaddrs *ifs, struct in_addr a, char *ifname, size_t len)
{
    for (struct ifaddrs *i = ifs; NULL != i; i = i->ifa_next) {
        if (NULL != i->ifa_addr && AF_INET == i->ifa_addr->sa_family && NULL != i->ifa_netmask &&
            ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == a.s_addr) {
            snprintf(ifname, len, "%s", i->ifa_name);
            return __builtin_popcount(((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr);
        }
    }
    return 0;
}

static const char *roce_name(int v)
{
    return LLRDMA_ROCE_V1 == v ? "RoCE v1" : LLRDMA_ROCE_V2 == v ? "RoCE v2" : "RoCE";
}

/* The RoCE version rdma_cm connects this port with, when an administrator
 * set it (configfs rdma_cm/<dev>/ports/<port>/default_roce_mode); otherwise
 * LLRDMA_ROCE_AUTO: the kernel's default, RoCE v2 where the device has it.
 * rdma_cm takes the GID of the bound address with that type: no verbs call
 * lets a process choose. */
static int cm_roce_mode(const char *dev, int port)
{
    char path[320], line[32] = "";
    FILE *f;

    snprintf(path, sizeof(path), "/sys/kernel/config/rdma_cm/%s/ports/%d/default_roce_mode", dev,
             port);
    if (NULL == (f = fopen(path, "r"))) {
        return LLRDMA_ROCE_AUTO;
    }
    if (NULL == fgets(line, sizeof(line), f)) {
        line[0] = '\0';
    }
    fclose(f);
    return NULL != strstr(line, "v2")   ? LLRDMA_ROCE_V2
           : NULL != strstr(line, "v1") ? LLRDMA_ROCE_V1
                                        : LLRDMA_ROCE_AUTO;
}

/* RoCE: the GID rdma_cm binds to (llrdma_gid_choose: btl_llrdma_gid_index,
 * else RoCE v2 before v1, restricted by btl_llrdma_roce_version or else by
 * the RoCE version rdma_cm uses on the port).  -1 when the port has none; a
 * setting that cannot take effect stops MPI_Init. */
static int pick_roce_gid(struct ibv_context *ctx, const char *dev, int port, int tbl_len,
                         int roce_version, mca_btl_llrdma_port_t *out)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    int pinned = c->gid_index, n = tbl_len > 0 ? tbl_len : 0, idx;
    int cm_mode = cm_roce_mode(dev, port), want = roce_version;
    char allows[160];
    llrdma_gid_entry_t *tbl = calloc((size_t)(n > 0 ? n : 1), sizeof(*tbl));
    union ibv_gid *gids = calloc((size_t)(n > 0 ? n : 1), sizeof(*gids));

    if (NULL == tbl || NULL == gids) {
        idx = -1;
        goto out_free;
    }
    for (int i = 0; i < n; ++i) {
        unsigned type = IBV_GID_TYPE_ROCE_V1; /* kernels without GID types have v1 only */
        if (pinned >= 0 && i != pinned) {
            continue; /* only the pinned entry is looked at */
        }
        if (0 != mca_btl_llrdma_verbs.query_gid(ctx, (uint8_t)port, i, &gids[i])) {
            continue;
        }
        if (gid_is_zero(&gids[i])) {
            continue; /* an empty entry reads as :: */
        }
        (void)mca_btl_llrdma_verbs.query_gid_type(ctx, (uint8_t)port, i, &type);
        tbl[i].readable = 1;
        tbl[i].ipv4_mapped = gid_is_ipv4_mapped(&gids[i]);
        tbl[i].type = (int)type;
    }
    if (LLRDMA_ROCE_AUTO != roce_version && LLRDMA_ROCE_AUTO != cm_mode &&
        cm_mode != roce_version) {
        char value[160], why[512];
        snprintf(value, sizeof(value), "'%.150s'", c->roce_version);
        snprintf(why, sizeof(why),
                 "rdma_cm connects %s:%d with %s (configfs rdma_cm/%s/ports/%d/"
                 "default_roce_mode), which a process cannot change; set that to %s as well, "
                 "or use auto",
                 dev, port, roce_name(cm_mode), dev, port,
                 LLRDMA_ROCE_V1 == roce_version ? "\"IB/RoCE v1\"" : "\"RoCE v2\"");
        mca_btl_llrdma_bad_knob("roce_version", value, why);
    }
    if (LLRDMA_ROCE_AUTO == want) {
        want = cm_mode; /* report the GID type rdma_cm will really use */
    }
    if (LLRDMA_ROCE_AUTO != roce_version) {
        snprintf(allows, sizeof(allows), "btl_llrdma_roce_version = %s allows only %s",
                 c->roce_version, roce_name(roce_version));
    } else if (LLRDMA_ROCE_AUTO != cm_mode) {
        snprintf(allows, sizeof(allows),
                 "rdma_cm connects this port with %s (configfs default_roce_mode)",
                 roce_name(cm_mode));
    } else {
        snprintf(allows, sizeof(allows), "a RoCE port needs a RoCE v1 or v2 GID");
    }
    idx = llrdma_gid_choose(tbl, n, pinned, want);
    if (idx < 0 && pinned < 0 && want != roce_version) {
        opal_output_verbose(10, c->output,
                            "btl:llrdma: %s:%d: no IPv4-mapped %s GID, the version rdma_cm uses "
                            "on this port (configfs default_roce_mode)",
                            dev, port, roce_name(want));
    }
    if (idx >= 0) {
        out->gid_index = idx;
        out->gid_type = (unsigned)tbl[idx].type;
        memcpy(&out->ipv4, &gids[idx].raw[12], sizeof(out->ipv4));
    } else if (pinned >= 0) {
        char value[32], why[1024], text[INET6_ADDRSTRLEN] = "?";
        const char *type = pinned < n ? llrdma_gid_type_name(tbl[pinned].type) : "";
        if (pinned < n) {
            (void)inet_ntop(AF_INET6, gids[pinned].raw, text, sizeof(text));
        }
        snprintf(value, sizeof(value), "%d", pinned);
        switch (idx) {
        case LLRDMA_GID_OUT_OF_RANGE:
            snprintf(why, sizeof(why), "%s:%d has only %d GID table entries (0..%d)", dev, port, n,
                     n - 1);
            break;
        case LLRDMA_GID_UNREADABLE:
            snprintf(why, sizeof(why), "GID %d of %s:%d is an empty table entry", pinned, dev,
                     port);
            break;
        case LLRDMA_GID_NOT_IPV4:
            snprintf(why, sizeof(why),
                     "GID %d of %s:%d is %s (%s), not an IPv4-mapped address (::ffff:a.b.c.d); "
                     "rdma_cm binds to an IPv4 address, so the GID must carry one",
                     pinned, dev, port, text, type);
            break;
        default: /* LLRDMA_GID_WRONG_TYPE */
            snprintf(why, sizeof(why), "GID %d of %s:%d is %s (%s), but %s", pinned, dev, port,
                     text, type, allows);
            break;
        }
        mca_btl_llrdma_bad_knob("gid_index", value, why);
    }
out_free:
    free(gids);
    free(tbl);
    return idx >= 0 ? idx : -1;
}

/* Which port (1-based) an IPoIB interface belongs to: dev_port is 0-based
 * (Linux 3.15+); older kernels set only dev_id (also 0-based; IPoIB sets
 * both now).  0 when sysfs does not say. */
static int netdev_port(const char *ifname)
{
    char path[320];
    long dev_port = -1, dev_id = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/sys/class/net/%s/dev_port", ifname);
    if (NULL != (f = fopen(path, "r"))) {
        if (1 != fscanf(f, "%ld", &dev_port)) {
            dev_port = -1;
        }
        fclose(f);
    }
    snprintf(path, sizeof(path), "/sys/class/net/%s/dev_id", ifname);
    if (NULL != (f = fopen(path, "r"))) {
        if (1 != fscanf(f, "%li", &dev_id)) { /* "0x1" */
            dev_id = -1;
        }
        fclose(f);
    }
    if (dev_port > 0) {
        return (int)dev_port + 1;
    }
    if (dev_id > 0) {
        return (int)dev_id + 1;
    }
    return dev_port == 0 || dev_id == 0 ? 1 : 0;
}

/* An Ethernet netdev of a VPI device's other port lives in the same
 * directory: only IPoIB (ARPHRD_INFINIBAND, 32) counts; unknown is kept. */
static int netdev_is_ipoib(const char *ifname)
{
    char path[320];
    int type = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/sys/class/net/%s/type", ifname);
    if (NULL != (f = fopen(path, "r"))) {
        if (1 != fscanf(f, "%d", &type)) {
            type = -1;
        }
        fclose(f);
    }
    return type < 0 || 32 == type;
}

/* InfiniBand: the IPv4 address of an IPoIB interface of this device and
 * port (the smallest name when several qualify: ib0 before ib0.8001).  On a
 * multi-port HCA (mlx4) every port's interfaces are listed under the one PCI
 * device; dev_port tells them apart.  If sysfs says nothing about ports, an
 * interface of the device is used (said at verbose level 10). */
static int pick_ipoib_addr(const char *dev, int port, struct ifaddrs *ifs,
                           mca_btl_llrdma_port_t *out)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    char path[256];
    struct ifaddrs *best[2] = {NULL, NULL}; /* this port, port unknown */
    DIR *d;
    struct dirent *e;
    struct ifaddrs *use;

    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/net", dev);
    d = opendir(path);
    if (NULL == d) {
        return -1;
    }
    while (NULL != (e = readdir(d))) {
        int p;
        if ('.' == e->d_name[0] || !netdev_is_ipoib(e->d_name)) {
            continue;
        }
        p = netdev_port(e->d_name);
        if (0 != p && port != p) {
            continue; /* another port's interface */
        }
        for (struct ifaddrs *a = ifs; NULL != a; a = a->ifa_next) {
            struct ifaddrs **slot = &best[0 == p ? 1 : 0];
            if (NULL == a->ifa_addr || AF_INET != a->ifa_addr->sa_family ||
                !(a->ifa_flags & IFF_UP) || 0 != strcmp(a->ifa_name, e->d_name)) {
                continue;
            }
            if (NULL == *slot || strcmp(a->ifa_name, (*slot)->ifa_name) < 0) {
                *slot = a;
            }
            break; /* its first IPv4 address */
        }
    }
    closedir(d);
    use = NULL != best[0] ? best[0] : best[1];
    if (NULL == use) {
        return -1;
    }
    if (use == best[1]) {
        opal_output_verbose(10, c->output,
                            "btl:llrdma: %s:%d: sysfs does not say which port %s belongs to "
                            "(no dev_port/dev_id); using it",
                            dev, port, use->ifa_name);
    }
    out->ipv4 = ((struct sockaddr_in *)use->ifa_addr)->sin_addr;
    out->prefix_len =
        NULL != use->ifa_netmask
            ? __builtin_popcount(((struct sockaddr_in *)use->ifa_netmask)->sin_addr.s_addr)
            : 0;
    snprintf(out->netdev, sizeof(out->netdev), "%s", use->ifa_name);
    out->gid_index = 0; /* rdma_cm resolves the path from the IPoIB address */
    out->gid_type = IBV_GID_TYPE_IB;
    return 0;
}

/* Ports of every device with an address for rdma_cm, before the device
 * policy chooses among the devices (more than one rank's ports can hold). */
#define CAND_MAX 64

typedef struct {
    int dev; /* index into the device arrays */
    mca_btl_llrdma_port_t port;
} cand_port_t;

/* Read one port and find the address rdma_cm binds to; fills *pt.  1: usable. */
static int probe_port(struct ibv_context *ctx, const char *name, int p,
                      const struct ibv_device_attr *dattr, const struct ibv_port_attr *pattr,
                      struct ifaddrs *ifs, int roce_version, int *no_roce_gid,
                      mca_btl_llrdma_port_t *pt)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    int roce = IBV_LINK_LAYER_ETHERNET == pattr->link_layer;

    memset(pt, 0, sizeof(*pt));
    snprintf(pt->dev, sizeof(pt->dev), "%s", name);
    pt->port = p;
    pt->link_layer = pattr->link_layer;
    pt->max_cqe = (uint32_t)dattr->max_cqe;
    pt->max_srq_wr = (uint32_t)dattr->max_srq_wr;
    pt->max_qp_wr = (uint32_t)dattr->max_qp_wr;
    pt->max_msg_sz = pattr->max_msg_sz;
    pt->max_rd_atom = (uint32_t)dattr->max_qp_rd_atom;
    pt->max_init_rd_atom = (uint32_t)dattr->max_qp_init_rd_atom;
    if (!roce && c->gid_index >= 0) {
        opal_output_verbose(10, c->output,
                            "btl:llrdma: %s:%d is InfiniBand: btl_llrdma_gid_index "
                            "applies to RoCE ports only",
                            name, p);
    }
    if ((roce ? pick_roce_gid(ctx, name, p, pattr->gid_tbl_len, roce_version, pt)
              : pick_ipoib_addr(name, p, ifs, pt)) < 0) {
        *no_roce_gid += roce;
        opal_output_verbose(10, c->output,
                            "btl:llrdma: %s:%d active but has no IPv4 address for "
                            "rdma_cm (%s); skipped",
                            name, p,
                            !roce ? "no IPoIB interface of this port with IPv4"
                            : LLRDMA_ROCE_AUTO == roce_version
                                ? "no IPv4-mapped GID"
                                : "no IPv4-mapped GID of the btl_llrdma_roce_version");
        return 0;
    }
    if (roce) {
        pt->prefix_len = ipv4_prefix(ifs, pt->ipv4, pt->netdev, sizeof(pt->netdev));
    }
    return 1;
}

/* The rank's side of the device policy: its GPU (a current CUDA context),
 * else the NUMA nodes of its CPU set. */
static void rank_place(const char *root, llrdma_nic_rank_t *r)
{
    cpu_set_t set;
    int cpus[CPU_SETSIZE], n = 0;

    r->gpu_numa = -1;
    if (0 == mca_btl_llrdma_gpu_bus_id(r->gpu_bus_id, sizeof(r->gpu_bus_id)) &&
        0 != mca_btl_llrdma_sysfs_pci(root, r->gpu_bus_id, r->gpu_pci_path, sizeof(r->gpu_pci_path),
                                      &r->gpu_numa)) {
        r->gpu_pci_path[0] = '\0'; /* a GPU sysfs does not show: ranked by CPU set */
    }
    CPU_ZERO(&set);
    if (0 == sched_getaffinity(0, sizeof(set), &set)) {
        for (int i = 0; i < CPU_SETSIZE; ++i) {
            if (CPU_ISSET(i, &set)) {
                cpus[n++] = i;
            }
        }
    }
    r->cpu_nodes = mca_btl_llrdma_sysfs_cpu_nodes(root, cpus, n);
}

/* The dump's record of one device and the verbose line saying it. */
static void report_device(llrdma_rank_config_t *cfg, const llrdma_nic_dev_t *d,
                          const llrdma_nic_choice_t *ch, uint32_t used)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    llrdma_nic_report_t *r;
    char ports[16] = "";

    for (int p = 1, len = 0; p <= 32; ++p) {
        if (used & (1u << (p - 1))) {
            len += snprintf(ports + len, sizeof(ports) - (size_t)len, "%s%d", len ? "," : "", p);
            if (len >= (int)sizeof(ports)) {
                break;
            }
        }
    }
    opal_output_verbose(5, c->output, "btl:llrdma: device %s (%s): %s%s; %s", d->name,
                        llrdma_nic_class_name(ch->cls), ch->chosen ? "used, ports " : "not used",
                        ch->chosen ? ports : "", ch->reason);
    if (cfg->nnics >= LLRDMA_NIC_DUMP_MAX) {
        return;
    }
    r = &cfg->nics[cfg->nnics++];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", d->name);
    snprintf(r->ports, sizeof(r->ports), "%s", ports);
    snprintf(r->cls, sizeof(r->cls), "%s", llrdma_nic_class_name(ch->cls));
    r->chosen = ch->chosen;
    snprintf(r->reason, sizeof(r->reason), "%s", ch->reason);
}

int mca_btl_llrdma_discover(llrdma_rank_config_t *cfg)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    struct ibv_device **devs = NULL;
    struct ifaddrs *ifs = NULL;
    char **inc = NULL, **exc = NULL;
    int ndev = 0, nn = 0, ncand = 0, usable = 0, opened = 0, no_roce_gid = 0, policy;
    int roce_version = roce_version_knob();
    const char *root = mca_btl_llrdma_sysfs_root();
    llrdma_nic_dev_t *nics = NULL;
    llrdma_nic_choice_t *choice = NULL;
    cand_port_t *cand = NULL;
    uint32_t *noaddr = NULL; /* per device: active ports without an address for rdma_cm */
    llrdma_nic_rank_t rank;
    char err[512];

    c->nports = 0;
    cfg->device.gid_index = -1; /* unknown until a port is found */
    cfg->nnics = 0;
    (void)llrdma_nic_policy_parse(c->device_policy, &policy); /* validated in check_params */
    snprintf(cfg->nic_policy, sizeof(cfg->nic_policy), "%s", llrdma_nic_policy_name(policy));

    if (c->gid_index < -1) {
        char value[32];
        snprintf(value, sizeof(value), "%d", c->gid_index);
        mca_btl_llrdma_bad_knob("gid_index", value,
                                "not -1 (choose) or a GID table index (0, 1, ...)");
    }
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
    if (0 != getifaddrs(&ifs)) {
        ifs = NULL; /* no netmasks, no IPoIB addresses */
    }

    devs = mca_btl_llrdma_verbs.get_device_list(&ndev);
    if (NULL == devs || 0 == ndev) {
        snprintf(cfg->btl_status, sizeof(cfg->btl_status), "disqualified: no verbs device");
        goto out_free_ifaddrs;
    }
    nics = calloc((size_t)ndev, sizeof(*nics));
    choice = calloc((size_t)ndev, sizeof(*choice));
    cand = calloc(CAND_MAX, sizeof(*cand));
    noaddr = calloc((size_t)ndev, sizeof(*noaddr));
    if (NULL == nics || NULL == choice || NULL == cand || NULL == noaddr) {
        snprintf(cfg->btl_status, sizeof(cfg->btl_status), "disqualified: out of memory");
        goto out_free_list;
    }

    /* Every device: where it sits (sysfs) and which of its ports are active
     * with an address rdma_cm can bind to (verbs).  Devices and ports the
     * if_include/if_exclude lists leave out are not opened or probed. */
    for (int d = 0; d < ndev; ++d) {
        const char *name = mca_btl_llrdma_verbs.get_device_name(devs[d]);
        llrdma_nic_dev_t *nd = &nics[nn];
        struct ibv_device_attr dattr;
        struct ibv_context *ctx;

        if (NULL == name) {
            continue;
        }
        snprintf(nd->name, sizeof(nd->name), "%s", name);
        nd->numa_node = -1;
        mca_btl_llrdma_sysfs_device(root, nd);
        ++nn;
        if (!device_wanted(inc, exc, name)) {
            continue; /* the policy says why (its sysfs port states kept) */
        }
        nd->active_ports = 0;
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
        for (int p = 1; p <= dattr.phys_port_cnt && p <= 32; ++p) {
            struct ibv_port_attr pattr;
            if (0 != mca_btl_llrdma_verbs.query_port(ctx, (uint8_t)p, &pattr) ||
                IBV_PORT_ACTIVE != pattr.state) {
                continue;
            }
            if (!port_wanted(inc, exc, name, p)) {
                nd->active_ports |= 1u << (p - 1); /* the policy says it is left out */
                continue;
            }
            if (ncand >= CAND_MAX) {
                continue;
            }
            if (probe_port(ctx, name, p, &dattr, &pattr, ifs, roce_version, &no_roce_gid,
                           &cand[ncand].port)) {
                cand[ncand++].dev = nn - 1;
                nd->active_ports |= 1u << (p - 1);
            } else {
                noaddr[nn - 1] |= 1u << (p - 1);
            }
        }
    next_close_device:
        mca_btl_llrdma_verbs.close_device(ctx);
    }

    /* Which devices, by the policy (llrdma_nic_choose); then their ports. */
    memset(&rank, 0, sizeof(rank));
    rank.policy = policy;
    rank.list = c->devices;
    rank.include = c->if_include;
    rank.exclude = c->if_exclude;
    rank_place(root, &rank);
    if (LLRDMA_OK != llrdma_nic_choose(nics, nn, &rank, choice, cfg->nic_near,
                                       sizeof(cfg->nic_near), err, sizeof(err))) {
        char value[160];
        snprintf(value, sizeof(value), "'%.150s'", NULL != c->devices ? c->devices : "");
        mca_btl_llrdma_bad_knob("devices", value, err);
    }
    for (int i = 0; i < nn; ++i) {
        uint32_t used = 0;
        for (int k = 0; k < ncand; ++k) {
            mca_btl_llrdma_port_t *pt = &cand[k].port;
            if (cand[k].dev != i || !choice[i].chosen ||
                !(choice[i].ports & (1u << (pt->port - 1))) ||
                c->nports >= MCA_BTL_LLRDMA_MAX_PORTS) {
                continue;
            }
            c->ports[c->nports++] = *pt;
            used |= 1u << (pt->port - 1);
            if (0 == usable++) {
                snprintf(cfg->device.name, sizeof(cfg->device.name), "%s", pt->dev);
                cfg->device.port = pt->port;
                cfg->device.cq_moderation_supported = -1; /* known once a CQ exists */
                cfg->device.gid_index = pt->gid_index;
                snprintf(cfg->device.gid_type, sizeof(cfg->device.gid_type), "%s",
                         llrdma_gid_type_name((int)pt->gid_type));
            }
            opal_output_verbose(
                10, c->output, "btl:llrdma: %s:%d active (%s, GID index %d, %s, %s/%d on %s)",
                pt->dev, pt->port,
                IBV_LINK_LAYER_ETHERNET == pt->link_layer ? "RoCE" : "InfiniBand", pt->gid_index,
                llrdma_gid_type_name((int)pt->gid_type), inet_ntoa(pt->ipv4), pt->prefix_len,
                '\0' != pt->netdev[0] ? pt->netdev : "?");
        }
        if (LLRDMA_NIC_UNUSABLE == choice[i].cls && 0 == nics[i].active_ports && 0 != noaddr[i]) {
            snprintf(choice[i].reason, sizeof(choice[i].reason),
                     "active, but no port has an IPv4 address for rdma_cm");
        }
        report_device(cfg, &nics[i], &choice[i], used);
    }

    if (0 == usable && no_roce_gid > 0 && LLRDMA_ROCE_AUTO != roce_version) {
        snprintf(cfg->btl_status, sizeof(cfg->btl_status),
                 "disqualified: no active port has an IPv4-mapped %s GID "
                 "(btl_llrdma_roce_version=%s)",
                 roce_name(roce_version), c->roce_version);
    } else if (0 == usable) {
        snprintf(cfg->btl_status, sizeof(cfg->btl_status),
                 "disqualified: no usable active verbs port (%d device(s), %d opened)", ndev,
                 opened);
    }
    cfg->ndevices = usable;
out_free_list:
    free(noaddr);
    free(cand);
    free(choice);
    free(nics);
    mca_btl_llrdma_verbs.free_device_list(devs);
out_free_ifaddrs:
    if (NULL != ifs) {
        freeifaddrs(ifs);
    }
    opal_argv_free(inc);
    opal_argv_free(exc);
    return usable;
}
