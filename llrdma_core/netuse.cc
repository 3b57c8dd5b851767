// netuse.cc -- whether btl/llrdma carries a rank's traffic (llrdma_netuse.h).
// Pure: the glue (coll/llrdma at MPI_Init, llrdma-check) gathers the inputs.
#include "llrdma_netuse.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace
{

std::string or_unknown(const char *s, const char *fallback)
{
    return s && *s ? std::string(s) : std::string(fallback);
}

// "; btl_llrdma_size_hint=8K (environment) has no effect on it" where a knob was set.
std::string knob_clause(const llrdma_netuse_t &in, const char *what)
{
    if (in.knobs <= 0)
        return "";
    std::string k = or_unknown(in.knob, "a btl_llrdma knob");
    if (in.knobs > 1)
        k += " and " + std::to_string(in.knobs - 1) + " more btl_llrdma knob" +
             (in.knobs > 2 ? "s" : "");
    return "; " + k + " " + what;
}

} // namespace

extern "C" int llrdma_netuse_decide(const llrdma_netuse_t *in, char *msg, size_t len)
{
    if (!in || !msg || len == 0)
        return -1;
    std::string pml = or_unknown(in->pml, "unknown");
    std::string text;
    int v;
    if (pml != "ob1") {
        v = LLRDMA_NETUSE_NOT_OB1;
        text = "btl/llrdma carries nothing: the selected PML is " + pml +
               ", which drives the network itself (only pml/ob1 uses BTLs)" +
               knob_clause(*in, "has no effect on point-to-point traffic") +
               "; coll/llrdma still serves MPI_Allreduce. For btl/llrdma run with "
               "--mca pml ob1 (llrdma-run selects it unless you choose a PML)";
    } else if (in->remote_peers <= 0) {
        v = LLRDMA_NETUSE_ONE_NODE;
        if (in->local_llrdma > 0)
            text = "btl/llrdma carries traffic to " + std::to_string(in->local_llrdma) + " of " +
                   std::to_string(in->local_peers) + " peers on this node (none on other nodes)";
        else
            text = "all peers looked at run on this node: shared memory carries their traffic; "
                   "btl/llrdma serves peers on other nodes";
    } else if (in->remote_llrdma <= 0) {
        v = LLRDMA_NETUSE_NO_PEER;
        text = "btl/llrdma reaches none of the " + std::to_string(in->remote_peers) +
               " peers on other nodes looked at (btl/llrdma: " +
               or_unknown(in->btl_status, "status unknown") + "; they go over " +
               or_unknown(in->instead, "another BTL") + ")" +
               knob_clause(*in, "has no effect on them") +
               ". Check that an RDMA device is active on every node "
               "(btl_llrdma_verbose 10 says why it was left out) and that --mca btl does "
               "not exclude llrdma";
    } else if (in->remote_llrdma < in->remote_peers) {
        v = LLRDMA_NETUSE_PARTIAL;
        text = "btl/llrdma reaches " + std::to_string(in->remote_llrdma) + " of " +
               std::to_string(in->remote_peers) +
               " peers on other nodes looked at; the others go over " +
               or_unknown(in->instead, "another BTL");
    } else {
        v = LLRDMA_NETUSE_USED;
        text = "btl/llrdma carries traffic to all " + std::to_string(in->remote_peers) +
               " peers on other nodes looked at";
    }
    std::snprintf(msg, len, "%s", text.c_str());
    return v;
}

extern "C" int llrdma_netuse_warn(int verdict, int knobs)
{
    if (knobs <= 0)
        return 0;
    if (verdict == LLRDMA_NETUSE_NOT_OB1 || verdict == LLRDMA_NETUSE_NO_PEER)
        return 1;
    return verdict == LLRDMA_NETUSE_PARTIAL ? 2 : 0;
}
