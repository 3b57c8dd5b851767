/*
 * bench_ompi.c -- which coll component serves MPI_Allreduce on a
 * communicator.  Coll selection is internal to Open MPI (a disqualified
 * component silently leaves the call to the next one, e.g. coll/han on a
 * single node), so allreduce-compare reads the function pointer Open MPI
 * installed and names the shared object it lives in.  Likewise the BTLs
 * pml/ob1 uses towards a peer.  Compiled like the MCA components (Open MPI
 * 4.1 internal headers, ompi_config.h first).
 */
#define _GNU_SOURCE
#include "ompi_config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "ompi/communicator/communicator.h"
#include "ompi/mca/bml/bml.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/mca/pml/base/base.h"
#include "ompi/proc/proc.h"

#include "bench_ompi.h"

int bench_allreduce_component(MPI_Comm comm, char *name, size_t nlen, char *detail, size_t dlen)
{
    struct ompi_communicator_t *c = (struct ompi_communicator_t *)comm;
    Dl_info info;
    const char *file, *base, *p;
    void *fn;

    snprintf(name, nlen, "unknown");
    snprintf(detail, dlen, "?");
    if (NULL == c || NULL == c->c_coll || NULL == c->c_coll->coll_allreduce) {
        return -1;
    }
    fn = (void *)c->c_coll->coll_allreduce;
    if (0 == dladdr(fn, &info) || NULL == info.dli_fname) {
        return -1;
    }
    file = info.dli_fname;
    base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    snprintf(detail, dlen, "%s%s%s", base, info.dli_sname ? " " : "",
             info.dli_sname ? info.dli_sname : "");
    /* mca_coll_NAME.so (DSO component), else the symbol's ompi_coll_NAME_ /
     * mca_coll_NAME_ prefix (component linked into libmpi). */
    if (0 == strncmp(base, "mca_coll_", 9)) {
        p = base + 9;
        snprintf(name, nlen, "%.*s", (int)strcspn(p, "."), p);
        return 0;
    }
    if (NULL != info.dli_sname) {
        const char *s = info.dli_sname;
        if (0 == strncmp(s, "ompi_coll_", 10) || 0 == strncmp(s, "mca_coll_", 9)) {
            p = s + ('o' == s[0] ? 10 : 9);
            snprintf(name, nlen, "%.*s", (int)strcspn(p, "_"), p);
            return 0;
        }
    }
    return -1;
}

/* "vader" or "llrdma,tcp": the components of one BML array. */
static void btl_names(mca_bml_base_btl_array_t *arr, char *buf, size_t len)
{
    size_t n = mca_bml_base_btl_array_get_size(arr), used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; ++i) {
        mca_bml_base_btl_t *b = mca_bml_base_btl_array_get_index(arr, i);
        const char *name = (NULL != b && NULL != b->btl && NULL != b->btl->btl_component)
                               ? b->btl->btl_component->btl_version.mca_component_name
                               : "?";
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "," : "", name);
    }
    if ('\0' == buf[0]) {
        snprintf(buf, len, "-");
    }
}

void bench_peer_transport(MPI_Comm comm, int peer, char *buf, size_t len)
{
    const char *pml = mca_pml_base_selected_component.pmlm_version.mca_component_name;
    ompi_proc_t *proc;
    mca_bml_base_endpoint_t *ep;
    char eager[128], send[128], rdma[128];

    if (0 != strcmp(pml, "ob1")) {
        snprintf(buf, len, "pml=%s (no BTL in use: the pml drives the network itself)", pml);
        return;
    }
    proc = ompi_comm_peer_lookup((struct ompi_communicator_t *)comm, peer);
    ep = NULL != proc ? (mca_bml_base_endpoint_t *)proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_BML]
                      : NULL;
    if (NULL == ep) {
        snprintf(buf, len, "pml=ob1 btl=unknown (no endpoint yet)");
        return;
    }
    btl_names(&ep->btl_eager, eager, sizeof(eager));
    btl_names(&ep->btl_send, send, sizeof(send));
    btl_names(&ep->btl_rdma, rdma, sizeof(rdma));
    snprintf(buf, len, "pml=ob1 btl eager=%s send=%s rdma=%s", eager, send, rdma);
}
