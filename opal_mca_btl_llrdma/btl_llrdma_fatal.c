/*
 * btl/llrdma fatal errors: said once on stderr, then handed to ob1's error
 * callback through the upcall queue (btl_llrdma_done.c delivers it after
 * the module lock is released).  Below every other file of the module:
 * fragment pools, connection set-up and the progress path all report
 * through it, and it calls none of them.
 */
#include "opal_config.h"

#include <stdlib.h>
#include <string.h>

#include "btl_llrdma.h"
#include "llrdma_mca_common.h"

static void err_destruct(mca_btl_llrdma_err_t *e)
{
    if (NULL != e->proc) {
        OBJ_RELEASE(e->proc);
    }
    free(e->detail);
}

OBJ_CLASS_INSTANCE(mca_btl_llrdma_err_t, opal_list_item_t, NULL, err_destruct);

void mca_btl_llrdma_done_error(mca_btl_llrdma_module_t *m, opal_proc_t *proc, const char *detail)
{
    mca_btl_llrdma_err_t *e = OBJ_NEW(mca_btl_llrdma_err_t);

    if (NULL == e || NULL == (e->detail = strdup(detail))) {
        /* Without memory there is no job to save: the text is on stderr. */
        llrdma_mca_abort(detail);
        return;
    }
    if (NULL != proc) {
        OBJ_RETAIN(proc);
    }
    e->proc = proc;
    mca_btl_llrdma_done_queue(m, &e->super);
}

void mca_btl_llrdma_module_fatal(mca_btl_llrdma_module_t *m, opal_proc_t *proc, const char *detail)
{
    if (NULL == proc) {
        if (m->failed) {
            return;
        }
        m->failed = 1;
    }
    llrdma_mca_warn("transport error", detail);
    /* ob1's error callback runs once the module lock is released. */
    mca_btl_llrdma_done_error(m, proc, detail);
}
