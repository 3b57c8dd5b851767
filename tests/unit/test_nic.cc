// Devices by locality (llrdma_nic.h, btl_llrdma_sysfs.h): the sysfs reader on fixture trees
// (tests/unit/fixtures/sysfs/*.tree, expanded into a temporary directory) and the decision on
// what it read.  No real multi-NIC node is needed: the trees describe them.
#define BOOST_TEST_MODULE nic
#include <boost/test/unit_test.hpp>

#include "btl_llrdma_sysfs.h"
#include "llrdma_nic.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace
{

// A fixture tree expanded under a fresh temporary directory, removed at the end.
struct Tree {
    fs::path root;
    explicit Tree(const std::string &name)
    {
        char tmpl[] = "/tmp/llrdma-sysfs-XXXXXX";
        BOOST_REQUIRE(mkdtemp(tmpl) != nullptr);
        root = tmpl;
        std::ifstream in(std::string(LLRDMA_TEST_SRCDIR) + "/tests/unit/fixtures/sysfs/" + name +
                         ".tree");
        BOOST_REQUIRE_MESSAGE(in, "fixture " << name << " missing");
        std::string line;
        while (std::getline(in, line)) {
            if (line.empty() || line[0] == '#')
                continue;
            std::istringstream ls(line);
            std::string kind, path, rest;
            ls >> kind >> path;
            std::getline(ls >> std::ws, rest);
            fs::path p = root / path;
            fs::create_directories(p.parent_path());
            if (kind == "file") {
                std::ofstream(p) << rest << "\n";
            } else if (kind == "link") {
                fs::create_symlink(rest, p);
            } else {
                BOOST_FAIL("bad fixture line: " << line);
            }
        }
    }
    ~Tree()
    {
        std::error_code ec;
        fs::remove_all(root, ec);
    }
    std::string str() const { return root.string(); }
    std::vector<llrdma_nic_dev_t> devices() const
    {
        std::vector<llrdma_nic_dev_t> d(32);
        d.resize(mca_btl_llrdma_sysfs_devices(str().c_str(), d.data(), 32));
        return d;
    }
};

struct Rank {
    llrdma_nic_rank_t r{};
    Rank() { r.gpu_numa = -1; }
    // The rank's GPU by bus id, as the glue resolves it.
    Rank &gpu(const Tree &t, const char *bus)
    {
        snprintf(r.gpu_bus_id, sizeof r.gpu_bus_id, "%s", bus);
        BOOST_REQUIRE(mca_btl_llrdma_sysfs_pci(t.str().c_str(), bus, r.gpu_pci_path,
                                               sizeof r.gpu_pci_path, &r.gpu_numa) == 0);
        return *this;
    }
    Rank &cpus(const Tree &t, std::vector<int> c)
    {
        r.cpu_nodes = mca_btl_llrdma_sysfs_cpu_nodes(t.str().c_str(), c.data(), (int)c.size());
        return *this;
    }
};

struct Result {
    int rc;
    std::string near, err;
    std::vector<llrdma_nic_choice_t> c;
    std::set<std::string> chosen;
};

Result run(const std::vector<llrdma_nic_dev_t> &d, const llrdma_nic_rank_t &r)
{
    Result out;
    char near[128], err[512];
    out.c.resize(d.size());
    out.rc = llrdma_nic_choose(d.data(), (int)d.size(), &r, out.c.data(), near, sizeof near, err,
                               sizeof err);
    out.near = near;
    out.err = err;
    for (size_t i = 0; i < d.size(); ++i)
        if (out.c[i].chosen)
            out.chosen.insert(d[i].name);
    return out;
}

size_t index_of(const std::vector<llrdma_nic_dev_t> &d, const std::string &name)
{
    for (size_t i = 0; i < d.size(); ++i)
        if (name == d[i].name)
            return i;
    BOOST_FAIL("no device " << name);
    return 0;
}

llrdma_nic_dev_t dev(const char *name, const char *path, int numa, uint32_t ports = 1)
{
    llrdma_nic_dev_t d{};
    snprintf(d.name, sizeof d.name, "%s", name);
    snprintf(d.pci_path, sizeof d.pci_path, "%s", path);
    d.numa_node = numa;
    d.active_ports = ports;
    return d;
}

// The DGX fixture's GPUs, in switch order (A: 0-1, B: 2-3, C: 4-5, D: 6-7).
const char *const kGpus[8] = {"0000:03:00.0", "0000:04:00.0", "0000:13:00.0", "0000:14:00.0",
                              "0000:83:00.0", "0000:84:00.0", "0000:C3:00.0", "0000:c4:00.0"};

} // namespace

BOOST_AUTO_TEST_CASE(reader_round_trips_the_fixture_trees)
{
    Tree t("cpu-2socket");
    auto d = t.devices();
    BOOST_REQUIRE_EQUAL(d.size(), 2u);
    BOOST_TEST(std::string(d[0].name) == "mlx5_0");
    BOOST_TEST(std::string(d[0].pci_path) == "pci0000:00/0000:00:02.0/0000:03:00.0");
    BOOST_TEST(d[0].numa_node == 0);
    BOOST_TEST(d[0].active_ports == 1u);
    BOOST_TEST(std::string(d[1].pci_path) == "pci0000:80/0000:80:02.0/0000:81:00.0");
    BOOST_TEST(d[1].numa_node == 1);
    int c0[] = {3}, c1[] = {17}, both[] = {15, 16}, none[] = {99};
    BOOST_TEST(mca_btl_llrdma_sysfs_cpu_nodes(t.str().c_str(), c0, 1) == 1u);
    BOOST_TEST(mca_btl_llrdma_sysfs_cpu_nodes(t.str().c_str(), c1, 1) == 2u);
    BOOST_TEST(mca_btl_llrdma_sysfs_cpu_nodes(t.str().c_str(), both, 2) == 3u);
    BOOST_TEST(mca_btl_llrdma_sysfs_cpu_nodes(t.str().c_str(), none, 1) == 0u);

    Tree n("no-numa");
    d = n.devices();
    BOOST_REQUIRE_EQUAL(d.size(), 1u);
    BOOST_TEST(d[0].numa_node == -1);
    BOOST_TEST(std::string(d[0].pci_path) == "pci0000:00/0000:00:02.0/0000:01:00.0");

    Tree g("dgx-h100");
    d = g.devices();
    BOOST_REQUIRE_EQUAL(d.size(), 9u);
    for (int i = 0; i < 8; ++i) {
        BOOST_TEST(d[i].name == "mlx5_" + std::to_string(i));
        BOOST_TEST(d[i].numa_node == (i < 4 ? 0 : 1));
        BOOST_TEST(d[i].active_ports == 1u);
    }
    BOOST_TEST(std::string(d[8].pci_path) == "pci0000:00/0000:00:05.0/0000:21:00.0");
    char path[LLRDMA_NIC_PATH_MAX];
    int numa = -2;
    BOOST_TEST(
        mca_btl_llrdma_sysfs_pci(g.str().c_str(), "0000:C3:00.0", path, sizeof path, &numa) == 0);
    BOOST_TEST(std::string(path) ==
               "pci0000:c0/0000:c0:01.0/0000:c1:00.0/0000:c2:00.0/0000:c3:00.0");
    BOOST_TEST(numa == 1);
    BOOST_TEST(
        mca_btl_llrdma_sysfs_pci(g.str().c_str(), "0000:99:00.0", path, sizeof path, &numa) == -1);
    // A device sysfs does not have reads as unknown, not as an error.
    llrdma_nic_dev_t x{};
    snprintf(x.name, sizeof x.name, "rxe0");
    mca_btl_llrdma_sysfs_device(g.str().c_str(), &x);
    BOOST_TEST(x.pci_path[0] == '\0');
    BOOST_TEST(x.numa_node == -1);
    BOOST_TEST(x.active_ports == 0u);
}

BOOST_AUTO_TEST_CASE(dgx_each_gpu_gets_the_nics_of_its_switch)
{
    Tree t("dgx-h100");
    auto d = t.devices();
    for (int g = 0; g < 8; ++g) {
        Rank k;
        k.gpu(t, kGpus[g]).cpus(t, {g < 4 ? 0 : 60});
        Result r = run(d, k.r);
        BOOST_REQUIRE(r.rc == LLRDMA_OK);
        int sw = g / 2;
        std::set<std::string> want = {"mlx5_" + std::to_string(2 * sw),
                                      "mlx5_" + std::to_string(2 * sw + 1)};
        BOOST_TEST(r.chosen == want, "GPU " << kGpus[g]);
        BOOST_TEST(r.near == std::string("GPU ") + kGpus[g]);
        for (int i = 0; i < 9; ++i) {
            // The classes the other devices get, by where they sit.
            int other_sw = i == 8 ? -1 : i / 2;
            int want_cls = other_sw == sw ? LLRDMA_NIC_PIX
                           : i == 8 || (sw < 2 && other_sw < 2)
                               ? (sw < 2 ? LLRDMA_NIC_PHB : LLRDMA_NIC_SYS)
                           : (sw >= 2 && other_sw >= 2) ? LLRDMA_NIC_NODE
                                                        : LLRDMA_NIC_SYS;
            BOOST_TEST(r.c[i].cls == want_cls, "GPU " << kGpus[g] << " " << d[i].name);
        }
        std::string why = r.c[2 * sw].reason;
        BOOST_TEST(why == std::string("same PCIe switch as GPU ") + kGpus[g]);
    }
    // Reasons of the farther classes.
    Rank k;
    k.gpu(t, "0000:03:00.0");
    Result r = run(d, k.r);
    BOOST_TEST(std::string(r.c[2].reason) ==
               "farther than PIX: same PCIe host bridge pci0000:00 as GPU 0000:03:00.0");
    BOOST_TEST(std::string(r.c[4].reason) ==
               "farther than PIX: across sockets: NUMA node 1, GPU 0000:03:00.0 on node 0");
    Rank k6;
    k6.gpu(t, "0000:c3:00.0");
    r = run(d, k6.r);
    BOOST_TEST(std::string(r.c[4].reason) ==
               "farther than PIX: same NUMA node 1 as GPU 0000:c3:00.0, other host bridge");
}

BOOST_AUTO_TEST_CASE(dgx_storage_nic_and_policies)
{
    Tree t("dgx-h100");
    auto d = t.devices();
    const size_t storage = index_of(d, "mlx5_8");

    // A rank without a GPU on socket 0: every NIC of node 0 is equally near, the storage NIC
    // too; btl_llrdma_if_exclude is how it is kept out (as NCCL_IB_HCA=^mlx5_8 would be).
    Rank cpu;
    cpu.cpus(t, {0, 1, 2, 3});
    Result r = run(d, cpu.r);
    BOOST_TEST(r.near == "CPU set on NUMA node 0");
    BOOST_TEST(
        (r.chosen == std::set<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_8"}));
    cpu.r.exclude = "mlx5_8";
    r = run(d, cpu.r);
    BOOST_TEST((r.chosen == std::set<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}));
    BOOST_TEST(r.c[storage].cls == LLRDMA_NIC_UNUSABLE);
    BOOST_TEST(std::string(r.c[storage].reason) == "excluded by btl_llrdma_if_exclude");

    // all: every usable device, whatever its distance.
    Rank k;
    k.gpu(t, "0000:03:00.0");
    k.r.policy = LLRDMA_NIC_ALL;
    k.r.exclude = "mlx5_8";
    r = run(d, k.r);
    BOOST_TEST(r.chosen.size() == 8u);
    BOOST_TEST(std::string(r.c[7].reason).rfind("policy all; across sockets", 0) == 0);

    // A device whose ports are down is never used.
    auto down = d;
    down[0].active_ports = 0;
    k.r.policy = LLRDMA_NIC_NEAREST;
    k.r.exclude = nullptr;
    r = run(down, k.r);
    BOOST_TEST((r.chosen == std::set<std::string>{"mlx5_1"}));
    BOOST_TEST(std::string(r.c[0].reason) == "no active port");

    // if_include narrows what nearest chooses from.
    k.r.include = "mlx5_1,mlx5_2";
    r = run(d, k.r);
    BOOST_TEST((r.chosen == std::set<std::string>{"mlx5_1"}));
    BOOST_TEST(std::string(r.c[0].reason) == "not in btl_llrdma_if_include");
    k.r.include = "mlx5_2,mlx5_4";
    r = run(d, k.r);
    BOOST_TEST((r.chosen == std::set<std::string>{"mlx5_2"})); // PHB beats SYS
}

BOOST_AUTO_TEST_CASE(explicit_list)
{
    Tree t("dgx-h100");
    auto d = t.devices();
    Rank k;
    k.gpu(t, "0000:03:00.0");
    k.r.policy = LLRDMA_NIC_LIST;
    k.r.list = "mlx5_4, mlx5_7:1";
    Result r = run(d, k.r);
    BOOST_REQUIRE(r.rc == LLRDMA_OK);
    BOOST_TEST((r.chosen == std::set<std::string>{"mlx5_4", "mlx5_7"}));
    BOOST_TEST(r.c[7].ports == 1u);
    BOOST_TEST(std::string(r.c[4].reason).rfind("named in btl_llrdma_devices; across", 0) == 0);
    BOOST_TEST(std::string(r.c[0].reason) ==
               "not named in btl_llrdma_devices; same PCIe switch as GPU 0000:03:00.0");

    // An unknown name is an error naming it and the devices there are.
    k.r.list = "mlx5_0,mlx5_9";
    r = run(d, k.r);
    BOOST_TEST(r.rc == LLRDMA_ERR_INVALID);
    BOOST_TEST(r.err.find("'mlx5_9' is not a verbs device of this node (devices: mlx5_0, ") == 0,
               r.err);
    k.r.list = "mlx5_0:2";
    r = run(d, k.r);
    BOOST_TEST(r.rc == LLRDMA_ERR_INVALID);
    BOOST_TEST(r.err == "port 2 of mlx5_0 is not active (active: 1)");
    k.r.list = "mlx5_0:x";
    BOOST_TEST(run(d, k.r).rc == LLRDMA_ERR_INVALID);
    k.r.list = "";
    BOOST_TEST(run(d, k.r).rc == LLRDMA_ERR_INVALID);
    k.r.list = "mlx5_8";
    k.r.exclude = "mlx5_8";
    r = run(d, k.r);
    BOOST_TEST(r.rc == LLRDMA_ERR_INVALID);
    BOOST_TEST(r.err == "'mlx5_8' is not usable: excluded by btl_llrdma_if_exclude");
}

BOOST_AUTO_TEST_CASE(two_socket_cpu_node)
{
    Tree t("cpu-2socket");
    auto d = t.devices();
    Rank s0, s1, both;
    s0.cpus(t, {0, 1});
    s1.cpus(t, {20});
    both.cpus(t, {0, 31});
    Result r = run(d, s0.r);
    BOOST_TEST((r.chosen == std::set<std::string>{"mlx5_0"}));
    BOOST_TEST(r.c[0].cls == LLRDMA_NIC_NODE);
    BOOST_TEST(std::string(r.c[0].reason) == "same NUMA node 0 as the rank");
    BOOST_TEST(std::string(r.c[1].reason) ==
               "farther than NODE: across sockets: NUMA node 1, rank on node 0");
    r = run(d, s1.r);
    BOOST_TEST((r.chosen == std::set<std::string>{"mlx5_1"}));
    // A rank spanning both sockets is near both: both are rails.
    r = run(d, both.r);
    BOOST_TEST((r.chosen == std::set<std::string>{"mlx5_0", "mlx5_1"}));
    BOOST_TEST(r.near == "CPU set on NUMA nodes 0,1");
    // CPU set unknown: nothing to rank by, every device is used.
    Rank unknown;
    r = run(d, unknown.r);
    BOOST_TEST(r.chosen.size() == 2u);
    BOOST_TEST(r.c[0].cls == LLRDMA_NIC_UNKNOWN);
}

BOOST_AUTO_TEST_CASE(nic_without_numa_information)
{
    Tree t("no-numa");
    auto d = t.devices();
    Rank k;
    k.cpus(t, {0});
    Result r = run(d, k.r);
    BOOST_TEST((r.chosen == std::set<std::string>{"mlx5_0"}));
    BOOST_TEST(r.c[0].cls == LLRDMA_NIC_UNKNOWN);
    BOOST_TEST(std::string(r.c[0].reason) == "NUMA node unknown (sysfs numa_node -1)");
    // Beside a NIC known to be near it loses; beside one known to be far it wins.
    d.push_back(dev("mlx5_1", "pci0000:40/0000:40:01.0/0000:41:00.0", 0));
    r = run(d, k.r);
    BOOST_TEST((r.chosen == std::set<std::string>{"mlx5_1"}));
    d[1].numa_node = 1;
    r = run(d, k.r);
    BOOST_TEST((r.chosen == std::set<std::string>{"mlx5_0"}));
}

BOOST_AUTO_TEST_CASE(soft_roce_on_numa_attached_nics)
{
    // rxe has no device link: its place is its netdev's (a virtio NIC behind
    // a PCI expander bridge of each NUMA node, contrib/softroce-vm --numa 2
    // --ports 2); a rank on node i gets rxe i only, policy all both.
    Tree t("rxe-numa");
    auto d = t.devices();
    BOOST_REQUIRE(d.size() == 3u);
    size_t r0 = index_of(d, "rxe0"), r1 = index_of(d, "rxe1"), r2 = index_of(d, "rxe2");
    BOOST_TEST(d[r0].numa_node == 0);
    BOOST_TEST(d[r1].numa_node == 1);
    BOOST_TEST(std::string(d[r1].pci_path) == "pci0000:30/0000:30:00.0");
    BOOST_TEST(d[r2].numa_node == -1); // a dummy netdev: unknown
    BOOST_TEST(d[r2].pci_path[0] == '\0');
    d.erase(d.begin() + static_cast<long>(r2));
    for (int node : {0, 1}) {
        Rank k;
        k.cpus(t, {node});
        Result r = run(d, k.r);
        BOOST_REQUIRE(r.rc == LLRDMA_OK);
        BOOST_TEST((r.chosen == std::set<std::string>{"rxe" + std::to_string(node)}));
    }
}

BOOST_AUTO_TEST_CASE(pcie_classes_on_synthetic_paths)
{
    // Two levels of switches under one root port: PXB between the branches.
    std::vector<llrdma_nic_dev_t> d = {
        dev("pix", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", 0),
        dev("pxb",
            "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:02.0/0000:05:00.0/"
            "0000:06:00.0/0000:07:00.0",
            0),
        dev("rxe0", "", -1, 1)};
    llrdma_nic_rank_t r{};
    snprintf(r.gpu_pci_path, sizeof r.gpu_pci_path, "%s",
             "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0");
    snprintf(r.gpu_bus_id, sizeof r.gpu_bus_id, "0000:03:00.0");
    r.gpu_numa = 0;
    Result out = run(d, r);
    BOOST_TEST(out.c[0].cls == LLRDMA_NIC_PIX);
    BOOST_TEST(out.c[1].cls == LLRDMA_NIC_PXB);
    BOOST_TEST(std::string(out.c[1].reason) ==
               "farther than PIX: same PCIe root port 0000:00:01.0 as GPU 0000:03:00.0, through "
               "several switches");
    BOOST_TEST(out.c[2].cls == LLRDMA_NIC_UNKNOWN);
    BOOST_TEST(std::string(out.c[2].reason) ==
               "farther than PIX: no PCI device in sysfs (virtual device?)");
    // Soft-RoCE alone: its devices have no PCI path; all are used.
    std::vector<llrdma_nic_dev_t> rxe = {dev("rxe0", "", -1), dev("rxe1", "", -1)};
    BOOST_TEST(run(rxe, r).chosen.size() == 2u);
}

BOOST_AUTO_TEST_CASE(policy_and_list_parsing)
{
    int p = -1;
    BOOST_TEST(llrdma_nic_policy_parse(nullptr, &p) == LLRDMA_OK);
    BOOST_TEST(p == LLRDMA_NIC_NEAREST);
    BOOST_TEST(llrdma_nic_policy_parse("ALL", &p) == LLRDMA_OK);
    BOOST_TEST(p == LLRDMA_NIC_ALL);
    BOOST_TEST(llrdma_nic_policy_parse("list", &p) == LLRDMA_OK);
    BOOST_TEST(p == LLRDMA_NIC_LIST);
    BOOST_TEST(llrdma_nic_policy_parse("closest", &p) == LLRDMA_ERR_INVALID);
    BOOST_TEST(std::string(llrdma_nic_policy_name(LLRDMA_NIC_LIST)) == "list");
    BOOST_TEST(std::string(llrdma_nic_class_name(LLRDMA_NIC_SYS)) == "SYS");
    BOOST_TEST(llrdma_nic_list_names("mlx5_0,mlx5_1:2", "mlx5_0", 0) == 1);
    BOOST_TEST(llrdma_nic_list_names("mlx5_0,mlx5_1:2", "mlx5_0", 1) == 1);
    BOOST_TEST(llrdma_nic_list_names("mlx5_0,mlx5_1:2", "mlx5_1", 0) == 0);
    BOOST_TEST(llrdma_nic_list_names("mlx5_0,mlx5_1:2", "mlx5_1", 2) == 1);
    BOOST_TEST(llrdma_nic_list_names("mlx5_0,mlx5_1:2", "mlx5_1", 1) == 0);
    BOOST_TEST(llrdma_nic_list_names("mlx5_00", "mlx5_0", 0) == 0);
}
