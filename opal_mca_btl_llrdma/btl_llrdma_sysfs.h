/*
 * btl_llrdma_sysfs.h -- what btl/llrdma's device policy reads from sysfs
 * (docs/btl-design.md "Devices by locality"): each verbs device's PCI path
 * and NUMA node, a GPU's by its bus id, the NUMA nodes of a CPU set.  Only
 * libc, so the unit tests run it on fixture trees (tests/unit/test_nic).
 * `root` is the directory sysfs is under: "" or NULL for "/", else a fixture
 * tree (btl/llrdma passes $LLRDMA_SYSFS_ROOT).
 */
#ifndef BTL_LLRDMA_SYSFS_H
#define BTL_LLRDMA_SYSFS_H

#include <stddef.h>
#include <stdint.h>

#include "llrdma_nic.h"

#ifdef __cplusplus
extern "C" {
#endif

/* $LLRDMA_SYSFS_ROOT, else "" (the real /sys). */
const char *mca_btl_llrdma_sysfs_root(void);

/* d->name set: fill its pci_path ("" when sysfs has no PCI device for it),
 * numa_node (-1 unknown) and active_ports (ports/N/state says ACTIVE). */
void mca_btl_llrdma_sysfs_device(const char *root, llrdma_nic_dev_t *d);

/* Every device of class/infiniband, sorted by name, as above; at most max. */
int mca_btl_llrdma_sysfs_devices(const char *root, llrdma_nic_dev_t *out, int max);

/* A PCI device by bus id ("0000:1B:00.0", any case): its path below
 * /sys/devices and NUMA node.  -1 when sysfs does not have it. */
int mca_btl_llrdma_sysfs_pci(const char *root, const char *bus_id, char *path, size_t len,
                             int *numa);

/* The NUMA nodes (bit n, nodes 0..63) whose CPUs (nodeN/cpulist) include one
 * of cpus[0..ncpus); 0 when sysfs lists no node. */
uint64_t mca_btl_llrdma_sysfs_cpu_nodes(const char *root, const int *cpus, int ncpus);

#ifdef __cplusplus
}
#endif
#endif
