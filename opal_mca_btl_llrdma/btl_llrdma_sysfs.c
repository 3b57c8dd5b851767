/*
 * sysfs reading for btl/llrdma's device policy (btl_llrdma_sysfs.h).  The
 * decision itself is the core's (llrdma_nic_choose); this file only turns
 * symlinks and small files into its inputs.
 */
#include "btl_llrdma_sysfs.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *mca_btl_llrdma_sysfs_root(void)
{
    const char *r = getenv("LLRDMA_SYSFS_ROOT");
    return NULL != r ? r : "";
}

static const char *root_of(const char *root)
{
    return NULL != root && '\0' != root[0] ? root : "/";
}

/* realpath of root + "/sys/devices/": a resolved device path below it is
 * the PCI path (the fixture root may itself sit behind a symlink: /tmp). */
static int devices_prefix(const char *root, char *buf, size_t len)
{
    char r[PATH_MAX];
    if (NULL == realpath(root_of(root), r)) {
        return -1;
    }
    snprintf(buf, len, "%s/sys/devices/", 0 == strcmp(r, "/") ? "" : r);
    return 0;
}

static int read_int(const char *path, int dflt)
{
    FILE *f = fopen(path, "r");
    int v;
    if (NULL == f) {
        return dflt;
    }
    if (1 != fscanf(f, "%d", &v)) {
        v = dflt;
    }
    fclose(f);
    return v;
}

/* Resolve `link` (a sysfs device symlink); fill path (below /sys/devices)
 * and numa.  -1 when it does not resolve below /sys/devices/pci*. */
static int resolve(const char *root, const char *link, char *path, size_t len, int *numa)
{
    char real[PATH_MAX], prefix[PATH_MAX + 16], f[PATH_MAX + 16];
    size_t n;

    path[0] = '\0';
    *numa = -1;
    if (0 != devices_prefix(root, prefix, sizeof(prefix)) || NULL == realpath(link, real)) {
        return -1;
    }
    n = strlen(prefix);
    /* Virtual devices (Soft-RoCE's netdev parent) resolve elsewhere. */
    if (0 != strncmp(real, prefix, n) || 0 != strncmp(real + n, "pci", 3)) {
        return -1;
    }
    /* A function that is not a PCI device itself (a virtio NIC's virtioN
     * under its PCI device) has no numa_node: its PCI device's counts. */
    for (int up = 0; up < 2; ++up) {
        char *slash;
        snprintf(f, sizeof(f), "%s/numa_node", real);
        if (0 == access(f, F_OK) || NULL == (slash = strrchr(real, '/')) ||
            (size_t)(slash - real) <= n + 3) {
            break;
        }
        *slash = '\0';
    }
    snprintf(path, len, "%s", real + n);
    snprintf(f, sizeof(f), "%s/numa_node", real);
    *numa = read_int(f, -1);
    return 0;
}

void mca_btl_llrdma_sysfs_device(const char *root, llrdma_nic_dev_t *d)
{
    char link[PATH_MAX], p[PATH_MAX + 96];
    DIR *dir;
    struct dirent *e;

    snprintf(link, sizeof(link), "%s/sys/class/infiniband/%s/device", root_of(root), d->name);
    if (0 != resolve(root, link, d->pci_path, sizeof(d->pci_path), &d->numa_node)) {
        /* Soft-RoCE (rxe) has no device of its own: its place is that of the
         * netdev it runs on (the "parent" attribute), when that is a PCI NIC. */
        char nd[64] = "";
        FILE *f;
        snprintf(p, sizeof(p), "%s/sys/class/infiniband/%s/parent", root_of(root), d->name);
        if (NULL != (f = fopen(p, "r"))) {
            if (1 != fscanf(f, "%63s", nd)) {
                nd[0] = '\0';
            }
            fclose(f);
        }
        if ('\0' != nd[0] && NULL == strchr(nd, '/')) {
            snprintf(link, sizeof(link), "%s/sys/class/net/%s/device", root_of(root), nd);
            (void)resolve(root, link, d->pci_path, sizeof(d->pci_path), &d->numa_node);
        }
    }
    d->active_ports = 0;
    snprintf(p, sizeof(p), "%s/sys/class/infiniband/%s/ports", root_of(root), d->name);
    if (NULL == (dir = opendir(p))) {
        return;
    }
    while (NULL != (e = readdir(dir))) {
        int port = atoi(e->d_name);
        if (port < 1 || port > 32) {
            continue;
        }
        snprintf(p, sizeof(p), "%s/sys/class/infiniband/%s/ports/%d/state", root_of(root), d->name,
                 port);
        if (4 == read_int(p, 0)) { /* "4: ACTIVE" */
            d->active_ports |= 1u << (port - 1);
        }
    }
    closedir(dir);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const llrdma_nic_dev_t *)a)->name, ((const llrdma_nic_dev_t *)b)->name);
}

int mca_btl_llrdma_sysfs_devices(const char *root, llrdma_nic_dev_t *out, int max)
{
    char p[PATH_MAX];
    DIR *dir;
    struct dirent *e;
    int n = 0;

    snprintf(p, sizeof(p), "%s/sys/class/infiniband", root_of(root));
    if (NULL == (dir = opendir(p))) {
        return 0;
    }
    while (n < max && NULL != (e = readdir(dir))) {
        if ('.' == e->d_name[0]) {
            continue;
        }
        memset(&out[n], 0, sizeof(out[n]));
        snprintf(out[n].name, sizeof(out[n].name), "%.63s", e->d_name);
        mca_btl_llrdma_sysfs_device(root, &out[n]);
        ++n;
    }
    closedir(dir);
    qsort(out, (size_t)n, sizeof(*out), by_name);
    return n;
}

int mca_btl_llrdma_sysfs_pci(const char *root, const char *bus_id, char *path, size_t len,
                             int *numa)
{
    char id[32], link[PATH_MAX];
    size_t i;

    /* cuDeviceGetPCIBusId writes upper case hex; sysfs names are lower case. */
    for (i = 0; i + 1 < sizeof(id) && '\0' != bus_id[i]; ++i) {
        id[i] = (char)tolower((unsigned char)bus_id[i]);
    }
    id[i] = '\0';
    snprintf(link, sizeof(link), "%s/sys/bus/pci/devices/%s", root_of(root), id);
    return resolve(root, link, path, len, numa);
}

/* Does a cpulist ("0-3,8,10-11") hold cpu? */
static int cpulist_has(const char *s, int cpu)
{
    while ('\0' != *s) {
        char *end;
        long a = strtol(s, &end, 10), b;
        if (end == s) {
            return 0;
        }
        b = a;
        if ('-' == *end) {
            s = end + 1;
            b = strtol(s, &end, 10);
        }
        if (cpu >= a && cpu <= b) {
            return 1;
        }
        s = ',' == *end ? end + 1 : end + strlen(end);
    }
    return 0;
}

uint64_t mca_btl_llrdma_sysfs_cpu_nodes(const char *root, const int *cpus, int ncpus)
{
    uint64_t m = 0;
    for (int node = 0; node < 64; ++node) {
        char p[PATH_MAX], list[4096];
        FILE *f;
        snprintf(p, sizeof(p), "%s/sys/devices/system/node/node%d/cpulist", root_of(root), node);
        if (NULL == (f = fopen(p, "r"))) {
            continue; /* node numbers may have holes */
        }
        if (NULL == fgets(list, sizeof(list), f)) {
            list[0] = '\0';
        }
        fclose(f);
        list[strcspn(list, "\n")] = '\0';
        for (int i = 0; i < ncpus; ++i) {
            if (cpulist_has(list, cpus[i])) {
                m |= (uint64_t)1 << node;
                break;
            }
        }
    }
    return m;
}
