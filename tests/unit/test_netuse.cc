#define BOOST_TEST_MODULE test_netuse
#include <boost/test/unit_test.hpp>

#include "llrdma_netuse.h"

#include <string>

namespace
{

struct Verdict {
    int v;
    std::string msg;
};

Verdict decide(const llrdma_netuse_t &in)
{
    char buf[1024];
    int v = llrdma_netuse_decide(&in, buf, sizeof buf);
    return {v, buf};
}

bool has(const std::string &s, const char *part)
{
    return s.find(part) != std::string::npos;
}

llrdma_netuse_t ob1(int remote, int remote_llrdma)
{
    llrdma_netuse_t in{};
    in.pml = "ob1";
    in.knobs = 1;
    in.knob = "btl_llrdma_size_hint=8K (environment)";
    in.local_peers = 3;
    in.remote_peers = remote;
    in.remote_llrdma = remote_llrdma;
    in.btl_status = "disqualified: no verbs device";
    in.instead = "tcp";
    return in;
}

} // namespace

BOOST_AUTO_TEST_CASE(another_pml_is_named_with_the_knob_and_what_to_set)
{
    llrdma_netuse_t in = ob1(4, 4);
    in.pml = "ucx";
    Verdict r = decide(in);
    BOOST_TEST(r.v == LLRDMA_NETUSE_NOT_OB1);
    BOOST_TEST(has(r.msg, "the selected PML is ucx"));
    BOOST_TEST(has(r.msg, "btl_llrdma_size_hint=8K (environment) has no effect"));
    BOOST_TEST(has(r.msg, "--mca pml ob1"));
    BOOST_TEST(has(r.msg, "llrdma-run"));
    BOOST_TEST(llrdma_netuse_warn(r.v, in.knobs) == 1);
    // Nothing asked of btl/llrdma: said when asked, never a warning.
    in.knobs = 0;
    r = decide(in);
    BOOST_TEST(r.v == LLRDMA_NETUSE_NOT_OB1);
    BOOST_TEST(!has(r.msg, "has no effect"));
    BOOST_TEST(llrdma_netuse_warn(r.v, in.knobs) == 0);
}

BOOST_AUTO_TEST_CASE(several_knobs_are_counted)
{
    llrdma_netuse_t in = ob1(2, 0);
    in.knobs = 3;
    Verdict r = decide(in);
    BOOST_TEST(r.v == LLRDMA_NETUSE_NO_PEER);
    BOOST_TEST(has(r.msg, "(environment) and 2 more btl_llrdma knobs has no effect"));
    in.knobs = 2;
    BOOST_TEST(has(decide(in).msg, "and 1 more btl_llrdma knob has"));
}

BOOST_AUTO_TEST_CASE(no_remote_peer_reached_names_the_status_and_the_btl_instead)
{
    llrdma_netuse_t in = ob1(5, 0);
    Verdict r = decide(in);
    BOOST_TEST(r.v == LLRDMA_NETUSE_NO_PEER);
    BOOST_TEST(has(r.msg, "none of the 5 peers on other nodes"));
    BOOST_TEST(has(r.msg, "disqualified: no verbs device"));
    BOOST_TEST(has(r.msg, "they go over tcp"));
    BOOST_TEST(llrdma_netuse_warn(r.v, in.knobs) == 1);
    in.btl_status = nullptr;
    in.instead = "";
    r = decide(in);
    BOOST_TEST(has(r.msg, "status unknown"));
    BOOST_TEST(has(r.msg, "another BTL"));
}

BOOST_AUTO_TEST_CASE(one_node_is_not_a_problem)
{
    llrdma_netuse_t in = ob1(0, 0);
    Verdict r = decide(in);
    BOOST_TEST(r.v == LLRDMA_NETUSE_ONE_NODE);
    BOOST_TEST(has(r.msg, "shared memory carries"));
    BOOST_TEST(llrdma_netuse_warn(r.v, in.knobs) == 0);
    // btl self,llrdma on one node (the Soft-RoCE tests): llrdma is used.
    in.local_llrdma = 3;
    r = decide(in);
    BOOST_TEST(r.v == LLRDMA_NETUSE_ONE_NODE);
    BOOST_TEST(has(r.msg, "to 3 of 3 peers on this node"));
}

BOOST_AUTO_TEST_CASE(partial_and_full_use)
{
    Verdict r = decide(ob1(4, 3));
    BOOST_TEST(r.v == LLRDMA_NETUSE_PARTIAL);
    BOOST_TEST(has(r.msg, "reaches 3 of 4 peers"));
    BOOST_TEST(llrdma_netuse_warn(r.v, 1) == 2);
    BOOST_TEST(llrdma_netuse_warn(r.v, 0) == 0);
    r = decide(ob1(4, 4));
    BOOST_TEST(r.v == LLRDMA_NETUSE_USED);
    BOOST_TEST(llrdma_netuse_warn(r.v, 1) == 0);
}

BOOST_AUTO_TEST_CASE(bad_arguments_and_short_buffers)
{
    llrdma_netuse_t in = ob1(1, 1);
    char buf[16];
    BOOST_TEST(llrdma_netuse_decide(nullptr, buf, sizeof buf) == -1);
    BOOST_TEST(llrdma_netuse_decide(&in, nullptr, 8) == -1);
    BOOST_TEST(llrdma_netuse_decide(&in, buf, 0) == -1);
    BOOST_TEST(llrdma_netuse_decide(&in, buf, sizeof buf) == LLRDMA_NETUSE_USED);
    BOOST_TEST(std::string(buf).size() == sizeof buf - 1); // cut, terminated
    in.pml = nullptr;
    BOOST_TEST(llrdma_netuse_decide(&in, buf, sizeof buf) == LLRDMA_NETUSE_NOT_OB1);
}
