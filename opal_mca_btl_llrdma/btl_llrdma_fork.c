/*
 * Fork safety of btl/llrdma (btl_llrdma_fork_safe; see docs/btl-design.md,
 * "Fork safety").  A child forked while the parent has registered memory
 * (Python data-loader workers, system()) must not take the parent's pinned
 * pages from the NIC.  Linux 5.13+ copies pinned pages into the child at
 * fork() and says so (rdma-core 35+: ibv_is_fork_initialized() ==
 * IBV_FORK_UNNEEDED); older kernels need ibv_fork_init(), which marks every
 * registration MADV_DONTFORK and must come before the first registration of
 * the process.
 */
#include "opal_config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "opal/util/output.h"

#include "btl_llrdma.h"
#include "llrdma_mca_common.h"

/* rdma-core's enum ibv_fork_status (declared by rdma-core 35+ only). */
enum { FORK_STATUS_DISABLED = 0, FORK_STATUS_ENABLED = 1, FORK_STATUS_UNNEEDED = 2 };

enum { FORK_AUTO, FORK_YES, FORK_NO };

static int parse_mode(const char *text, int *mode)
{
    if (NULL == text || 0 == strcasecmp(text, "auto")) {
        *mode = FORK_AUTO;
    } else if (0 == strcasecmp(text, "yes")) {
        *mode = FORK_YES;
    } else if (0 == strcasecmp(text, "no")) {
        *mode = FORK_NO;
    } else {
        return 0;
    }
    return 1;
}

void mca_btl_llrdma_fork_setup(llrdma_rank_config_t *cfg)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    char detail[1024];
    int mode, status, rc;

    if (!parse_mode(c->fork_safe, &mode)) {
        snprintf(detail, sizeof(detail), "'%s'", c->fork_safe);
        mca_btl_llrdma_bad_knob("fork_safe", detail, "not one of auto, yes, no");
        return;
    }
    if (FORK_NO == mode) {
        snprintf(cfg->fork_safe, sizeof(cfg->fork_safe), "off");
        opal_output_verbose(10, c->output, "btl:llrdma: fork safety off (btl_llrdma_fork_safe)");
        return;
    }
    status = mca_btl_llrdma_verbs.is_fork_initialized();
    if (FORK_AUTO == mode && FORK_STATUS_UNNEEDED == status) {
        /* ibv_fork_init would still mark every registration MADV_DONTFORK
         * in rdma-core before 2024 (rdma-core PR #1431; Debian 12 has 44): a
         * system call per registration and split mappings, for nothing. */
        snprintf(cfg->fork_safe, sizeof(cfg->fork_safe), "kernel");
        opal_output_verbose(10, c->output,
                            "btl:llrdma: fork safety from the kernel (copy-on-fork of pinned "
                            "pages); ibv_fork_init not needed");
        return;
    }
    if (FORK_STATUS_ENABLED == status) {
        /* RDMAV_FORK_SAFE, or another library of this process, did it. */
        snprintf(cfg->fork_safe, sizeof(cfg->fork_safe), "ibv_fork_init");
        opal_output_verbose(10, c->output, "btl:llrdma: ibv_fork_init already done");
        return;
    }
    rc = mca_btl_llrdma_verbs.fork_init();
    if (0 == rc) {
        snprintf(cfg->fork_safe, sizeof(cfg->fork_safe), "ibv_fork_init");
        opal_output_verbose(10, c->output, "btl:llrdma: ibv_fork_init done (%s; %s)",
                            FORK_YES == mode ? "btl_llrdma_fork_safe=yes" : "auto",
                            FORK_STATUS_UNNEEDED == status
                                ? "the kernel copies pinned pages on fork itself"
                            : status < 0 ? "this rdma-core cannot tell what the kernel does"
                                         : "the kernel reports no copy-on-fork of pinned pages");
        return;
    }
    snprintf(cfg->fork_safe, sizeof(cfg->fork_safe), "failed: %s", strerror(rc));
    snprintf(detail, sizeof(detail),
             "btl_llrdma_fork_safe = %s: ibv_fork_init() failed: %s%s; memory registered by "
             "this process is not protected if it calls fork()",
             FORK_YES == mode ? "yes" : "auto", strerror(rc),
             EINVAL == rc ? " (another component registered memory first)" : "");
    if (FORK_YES == mode) {
        llrdma_mca_fatal("fork safety failed", detail);
    } else {
        llrdma_mca_warn("fork safety failed", detail);
    }
}
