// nic.cc -- which verbs devices a rank uses (llrdma_nic.h; docs/btl-design.md "Devices by
// locality").  Pure: PCI paths and NUMA nodes in, a distance class, a choice and a reason per
// device out.  The glue reads sysfs (btl_llrdma_sysfs.c); the unit tests feed fixture trees.
#include "llrdma_nic.h"

#include "llrdma_internal.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <strings.h>
#include <vector>

namespace
{

std::vector<std::string> split(const std::string &s, char sep)
{
    std::vector<std::string> out;
    size_t b = 0;
    while (b <= s.size()) {
        size_t e = s.find(sep, b);
        if (e == std::string::npos)
            e = s.size();
        std::string t = s.substr(b, e - b);
        // Spaces around entries are a typing accident, not part of a device name.
        size_t l = t.find_first_not_of(" \t"), r = t.find_last_not_of(" \t");
        if (l != std::string::npos)
            out.push_back(t.substr(l, r - l + 1));
        b = e + 1;
    }
    return out;
}

// "dev" -> (dev, 0); "dev:2" -> (dev, 2); a port that is not 1..32 -> -1.
std::pair<std::string, int> entry_of(const std::string &e)
{
    size_t c = e.rfind(':');
    if (c == std::string::npos)
        return {e, 0};
    std::string p = e.substr(c + 1);
    if (p.empty() || p.size() > 2 || p.find_first_not_of("0123456789") != std::string::npos)
        return {e, -1};
    int port = std::stoi(p);
    return {e.substr(0, c), port >= 1 && port <= 32 ? port : -1};
}

// Ports of `dev` a list allows: all when the device itself is named, else those named as
// dev:port; 0 when the list does not name it.
uint32_t list_ports(const std::vector<std::string> &list, const std::string &dev)
{
    uint32_t m = 0;
    for (const std::string &e : list) {
        auto [name, port] = entry_of(e);
        if (name != dev || port < 0)
            continue;
        m |= port == 0 ? 0xffffffffu : 1u << (port - 1);
    }
    return m;
}

std::string ports_text(uint32_t m)
{
    std::string s;
    for (int p = 1; p <= 32; ++p)
        if (m & (1u << (p - 1)))
            s += (s.empty() ? "" : ",") + std::to_string(p);
    return s;
}

std::vector<std::string> path_of(const char *p)
{
    return p[0] == '\0' ? std::vector<std::string>{} : split(p, '/');
}

std::string nodes_text(uint64_t m)
{
    std::string s;
    int n = 0;
    for (int i = 0; i < 64; ++i)
        if (m & (uint64_t{1} << i)) {
            s += (s.empty() ? "" : ",") + std::to_string(i);
            ++n;
        }
    return (n > 1 ? "nodes " : "node ") + s;
}

struct Graded {
    int cls;
    std::string why;
};

// The class of a usable device and why, seen from the rank's GPU (PCIe first, then NUMA) or
// from its CPU set.  A PCIe path starts at the host bridge ("pci0000:00"), then the root port,
// then bridges; the device is its last element.
Graded grade(const llrdma_nic_dev_t &d, const llrdma_nic_rank_t &r)
{
    const bool gpu = r.gpu_pci_path[0] != '\0';
    const std::string gname = std::string("GPU ") + r.gpu_bus_id;
    if (gpu && d.pci_path[0] != '\0') {
        auto g = path_of(r.gpu_pci_path), n = path_of(d.pci_path);
        size_t c = 0; // common ancestors (the devices themselves excluded)
        while (c + 1 < g.size() && c + 1 < n.size() && g[c] == n[c])
            ++c;
        // Ancestors at index 2 and below are inside a switch (index 0 is the host bridge,
        // 1 the root port).  Both at most two hops from a common ancestor there (device ->
        // downstream port -> upstream port): one switch, NCCL's PIX.
        if (c >= 3 && g.size() - c <= 2 && n.size() - c <= 2)
            return {LLRDMA_NIC_PIX, "same PCIe switch as " + gname};
        if (c >= 2)
            return {LLRDMA_NIC_PXB,
                    "same PCIe root port " + g[1] + " as " + gname + ", through several switches"};
        if (c == 1)
            return {LLRDMA_NIC_PHB, "same PCIe host bridge " + g[0] + " as " + gname};
    }
    // Other host bridge, or no PCI path: by NUMA node.  The GPU's node when known, else the
    // nodes of the rank's CPU set.
    const bool gnode = gpu && r.gpu_numa >= 0 && r.gpu_numa < 64;
    const uint64_t ref = gnode ? uint64_t{1} << r.gpu_numa : r.cpu_nodes;
    const std::string who = gnode ? gname + " on " + nodes_text(ref)
                            : gpu ? "rank on " + nodes_text(ref) + " (" + gname + "'s node unknown)"
                                  : "rank on " + nodes_text(ref);
    if (d.numa_node < 0 || d.numa_node >= 64)
        return {LLRDMA_NIC_UNKNOWN, d.pci_path[0] == '\0'
                                        ? std::string("no PCI device in sysfs (virtual device?)")
                                        : std::string("NUMA node unknown (sysfs numa_node -1)")};
    if (ref == 0)
        return {LLRDMA_NIC_UNKNOWN,
                "NUMA node " + std::to_string(d.numa_node) + ", the rank's NUMA node unknown"};
    if (ref & (uint64_t{1} << d.numa_node))
        return {LLRDMA_NIC_NODE, "same NUMA node " + std::to_string(d.numa_node) + " as " +
                                     (gnode ? gname : std::string("the rank")) +
                                     (gpu ? ", other host bridge" : "")};
    return {LLRDMA_NIC_SYS,
            "across sockets: NUMA node " + std::to_string(d.numa_node) + ", " + who};
}

std::string names_of(const llrdma_nic_dev_t *devs, int n)
{
    std::string s;
    for (int i = 0; i < n; ++i)
        s += (i ? ", " : "") + std::string(devs[i].name);
    return s.empty() ? "none" : s;
}

int choose(const llrdma_nic_dev_t *devs, int n, const llrdma_nic_rank_t &r,
           llrdma_nic_choice_t *out, std::string &near, std::string &err)
{
    const auto inc = r.include ? split(r.include, ',') : std::vector<std::string>{};
    const auto exc = r.exclude ? split(r.exclude, ',') : std::vector<std::string>{};
    const auto list = r.list ? split(r.list, ',') : std::vector<std::string>{};
    std::vector<Graded> g(n);
    std::vector<uint32_t> allowed(n);

    if (r.gpu_pci_path[0] != '\0')
        near = std::string("GPU ") + r.gpu_bus_id;
    else if (r.cpu_nodes != 0)
        near = "CPU set on NUMA " + nodes_text(r.cpu_nodes);
    else
        near = "CPU set, NUMA node unknown";

    if (r.policy == LLRDMA_NIC_LIST) {
        if (list.empty()) {
            err = "policy list names no device (btl_llrdma_devices is empty)";
            return LLRDMA_ERR_INVALID;
        }
        for (const std::string &e : list) {
            auto [name, port] = entry_of(e);
            const llrdma_nic_dev_t *d = nullptr;
            for (int i = 0; i < n; ++i)
                if (name == devs[i].name)
                    d = &devs[i];
            if (port < 0) {
                err = "'" + e + "' is not a device or device:port (port 1..32)";
                return LLRDMA_ERR_INVALID;
            }
            if (d == nullptr) {
                err = "'" + name +
                      "' is not a verbs device of this node (devices: " + names_of(devs, n) + ")";
                return LLRDMA_ERR_INVALID;
            }
            if (port > 0 && !(d->active_ports & (1u << (port - 1)))) {
                err = "port " + std::to_string(port) + " of " + name + " is not active" +
                      (d->active_ports ? " (active: " + ports_text(d->active_ports) + ")"
                                       : std::string(" (no active port)"));
                return LLRDMA_ERR_INVALID;
            }
        }
    }

    int best = LLRDMA_NIC_UNUSABLE;
    for (int i = 0; i < n; ++i) {
        const llrdma_nic_dev_t &d = devs[i];
        uint32_t ports = d.active_ports;
        if (!exc.empty())
            ports &= ~list_ports(exc, d.name);
        if (!inc.empty())
            ports &= list_ports(inc, d.name);
        allowed[i] = ports;
        if (!exc.empty() && list_ports(exc, d.name) == 0xffffffffu)
            g[i] = {LLRDMA_NIC_UNUSABLE, "excluded by btl_llrdma_if_exclude"};
        else if (!inc.empty() && list_ports(inc, d.name) == 0)
            g[i] = {LLRDMA_NIC_UNUSABLE, "not in btl_llrdma_if_include"};
        else if (d.active_ports == 0)
            g[i] = {LLRDMA_NIC_UNUSABLE, "no active port"};
        else if (ports == 0)
            g[i] = {LLRDMA_NIC_UNUSABLE, "its active ports are excluded by btl_llrdma_if_*"};
        else
            g[i] = grade(d, r);
        best = std::min(best, g[i].cls);
    }

    for (int i = 0; i < n; ++i) {
        llrdma_nic_choice_t &o = out[i];
        std::string why = g[i].why;
        o.cls = g[i].cls;
        o.chosen = 0;
        o.ports = 0;
        if (g[i].cls != LLRDMA_NIC_UNUSABLE) {
            switch (r.policy) {
            case LLRDMA_NIC_ALL:
                o.chosen = 1;
                o.ports = allowed[i];
                why = "policy all; " + why;
                break;
            case LLRDMA_NIC_LIST: {
                uint32_t named = list_ports(list, devs[i].name) & allowed[i];
                o.chosen = named != 0;
                o.ports = named;
                why = (o.chosen ? "named in btl_llrdma_devices; "
                                : "not named in btl_llrdma_devices; ") +
                      why;
                break;
            }
            default:
                o.chosen = g[i].cls == best;
                o.ports = o.chosen ? allowed[i] : 0;
                if (!o.chosen)
                    why = std::string("farther than ") + llrdma_nic_class_name(best) + ": " + why;
                break;
            }
        } else if (r.policy == LLRDMA_NIC_LIST && list_ports(list, devs[i].name) != 0) {
            err = "'" + std::string(devs[i].name) + "' is not usable: " + why;
            return LLRDMA_ERR_INVALID;
        }
        (void)llrdma::copy_out(why, o.reason, sizeof o.reason);
    }
    return LLRDMA_OK;
}

} // namespace

extern "C" const char *llrdma_nic_class_name(int cls)
{
    static const char *const names[] = {"PIX", "PXB", "PHB", "NODE", "UNKNOWN", "SYS", "-"};
    return cls >= 0 && cls <= LLRDMA_NIC_UNUSABLE ? names[cls] : "?";
}

extern "C" int llrdma_nic_policy_parse(const char *text, int *policy)
{
    if (policy == nullptr)
        return LLRDMA_ERR_INVALID;
    if (text == nullptr || strcasecmp(text, "nearest") == 0)
        *policy = LLRDMA_NIC_NEAREST;
    else if (strcasecmp(text, "all") == 0)
        *policy = LLRDMA_NIC_ALL;
    else if (strcasecmp(text, "list") == 0)
        *policy = LLRDMA_NIC_LIST;
    else
        return LLRDMA_ERR_INVALID;
    return LLRDMA_OK;
}

extern "C" const char *llrdma_nic_policy_name(int policy)
{
    return policy == LLRDMA_NIC_ALL ? "all" : policy == LLRDMA_NIC_LIST ? "list" : "nearest";
}

extern "C" int llrdma_nic_list_names(const char *list, const char *dev, int port)
{
    if (list == nullptr || dev == nullptr)
        return 0;
    try {
        uint32_t m = list_ports(split(list, ','), dev);
        return port <= 0 ? m == 0xffffffffu : port <= 32 && (m & (1u << (port - 1))) != 0;
    } catch (...) {
        return 0;
    }
}

extern "C" int llrdma_nic_choose(const llrdma_nic_dev_t *devs, int n, const llrdma_nic_rank_t *rank,
                                 llrdma_nic_choice_t *out, char *near, size_t nearlen, char *err,
                                 size_t errlen)
{
    if (err != nullptr && errlen > 0)
        err[0] = '\0';
    if ((devs == nullptr && n > 0) || n < 0 || rank == nullptr || (out == nullptr && n > 0))
        return LLRDMA_ERR_INVALID;
    try {
        std::string nr, e;
        int rc = choose(devs, n, *rank, out, nr, e);
        if (near != nullptr && nearlen > 0)
            (void)llrdma::copy_out(nr, near, nearlen);
        if (rc != LLRDMA_OK && err != nullptr && errlen > 0)
            (void)llrdma::copy_out(e, err, errlen);
        return rc;
    } catch (...) {
        return LLRDMA_ERR_INTERNAL;
    }
}
