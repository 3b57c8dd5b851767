/*
 * llrdma_nic.h -- which verbs devices a rank of btl/llrdma uses (issue 27,
 * docs/btl-design.md "Devices by locality"; C API of llrdma_core/nic.cc).
 *
 * Pure: the caller describes each device (its PCI path from the host bridge,
 * its NUMA node, its active ports) and the rank (its GPU's PCI path, or the
 * NUMA nodes of its CPU set); the decision grades every device by distance,
 * in the classes NCCL and hwloc use, and picks: under "nearest" every usable
 * device of the smallest class (equally near devices are rails, ob1 stripes
 * over them), under "all" every usable device, under "list" the named ones.
 * The sysfs reading is the glue's (opal_mca_btl_llrdma/btl_llrdma_sysfs.c).
 */
#ifndef LLRDMA_NIC_H
#define LLRDMA_NIC_H

#include <stddef.h>
#include <stdint.h>

#include "llrdma_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Distance classes, nearest first (the order "nearest" ranks by).  A device
 * whose NUMA node sysfs does not know ranks after a known-near one and
 * before a known-far one. */
typedef enum {
    LLRDMA_NIC_PIX = 0,     /* under the same PCIe switch as the GPU */
    LLRDMA_NIC_PXB = 1,     /* same PCIe root port, through several switches */
    LLRDMA_NIC_PHB = 2,     /* same host bridge (root complex), other root port */
    LLRDMA_NIC_NODE = 3,    /* same NUMA node, other host bridge */
    LLRDMA_NIC_UNKNOWN = 4, /* NUMA node unknown (numa_node -1, or no PCI device) */
    LLRDMA_NIC_SYS = 5,     /* across sockets: another NUMA node */
    LLRDMA_NIC_UNUSABLE = 6 /* excluded, or no active port: never chosen */
} llrdma_nic_class_t;

/* "PIX", "PXB", "PHB", "NODE", "UNKNOWN", "SYS", "-" (unusable). */
const char *llrdma_nic_class_name(int cls);

/* btl_llrdma_device_policy. */
typedef enum {
    LLRDMA_NIC_NEAREST = 0,
    LLRDMA_NIC_ALL = 1,
    LLRDMA_NIC_LIST = 2
} llrdma_nic_policy_t;

/* "nearest" | "all" | "list" (case-insensitive); NULL is nearest.
 * LLRDMA_ERR_INVALID for anything else. */
int llrdma_nic_policy_parse(const char *text, int *policy);
const char *llrdma_nic_policy_name(int policy);

#define LLRDMA_NIC_PATH_MAX 256

/* One verbs device as the glue (or a fixture) sees it. */
typedef struct {
    char name[64];
    /* Its PCI path below /sys/devices: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:05:00.0"
     * (host bridge, root port, bridges, the device); "" when it has no PCI
     * device (Soft-RoCE, a virtual function sysfs hides). */
    char pci_path[LLRDMA_NIC_PATH_MAX];
    int numa_node;         /* -1 unknown */
    uint32_t active_ports; /* bit p-1 set: port p is ACTIVE (ports 1..32) */
} llrdma_nic_dev_t;

/* The rank and the knobs. */
typedef struct {
    int policy;          /* LLRDMA_NIC_* policy */
    const char *list;    /* policy list: "dev,dev:port,..." (btl_llrdma_devices) */
    const char *include; /* btl_llrdma_if_include ("dev,dev:port"), NULL none */
    const char *exclude; /* btl_llrdma_if_exclude, NULL none */
    /* The rank's GPU: its PCI path as above and its bus id ("0000:1b:00.0")
     * for the reasons; "" when the rank has no GPU.  gpu_numa -1 unknown. */
    char gpu_pci_path[LLRDMA_NIC_PATH_MAX];
    char gpu_bus_id[32];
    int gpu_numa;
    /* NUMA nodes the rank's CPU set touches (bit n: node n, nodes 0..63);
     * 0 unknown.  Used without a GPU, or when the GPU's node is unknown. */
    uint64_t cpu_nodes;
} llrdma_nic_rank_t;

/* The decision about one device (index-parallel to the input). */
typedef struct {
    int cls;        /* llrdma_nic_class_t */
    int chosen;     /* 1: its modules are created */
    uint32_t ports; /* ports to use (bit p-1): active ports the knobs allow */
    char reason[LLRDMA_NIC_REASON_MAX];
} llrdma_nic_choice_t;

/* Grade and choose.  Unknown names in rank->list (or a named device that is
 * not usable, or a port it does not have active) are LLRDMA_ERR_INVALID with
 * `err` naming the entry and the devices there are; an empty choice is not an
 * error (the glue says "no usable device").  `near` (may be NULL) receives
 * what distances were measured from: "GPU 0000:1b:00.0", "NUMA node 0", ... */
int llrdma_nic_choose(const llrdma_nic_dev_t *devs, int n, const llrdma_nic_rank_t *rank,
                      llrdma_nic_choice_t *out, char *near, size_t nearlen, char *err,
                      size_t errlen);

/* Does a "dev,dev:port" list name device `dev` (port 0) or its port `port`? */
int llrdma_nic_list_names(const char *list, const char *dev, int port);

#ifdef __cplusplus
}
#endif
#endif
