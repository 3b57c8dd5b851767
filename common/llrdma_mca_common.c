/*
 * Shared MCA glue for btl/llrdma and coll/llrdma (see llrdma_mca_common.h).
 */
#include "opal_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/constants.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_vari.h"
#include "opal/mca/pmix/pmix.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"
#include "opal/util/show_help.h"

#include "llrdma_mca_common.h"

#ifndef LLRDMA_HELPDIR
#error "LLRDMA_HELPDIR must be defined by the build"
#endif

static llrdma_source_t map_source(mca_base_var_source_t s)
{
    switch (s) {
    case MCA_BASE_VAR_SOURCE_DEFAULT:
        return LLRDMA_SRC_DEFAULT;
    case MCA_BASE_VAR_SOURCE_ENV:
        return LLRDMA_SRC_ENV;
    case MCA_BASE_VAR_SOURCE_FILE:
        return LLRDMA_SRC_FILE;
    case MCA_BASE_VAR_SOURCE_OVERRIDE:
        return LLRDMA_SRC_OVERRIDE;
    default:
        return LLRDMA_SRC_OTHER; /* command line (singleton), MPI_T set */
    }
}

int llrdma_mca_hint_inputs(int var_index, const char *var_name, llrdma_hint_inputs_t *in)
{
    const char **value = NULL;
    mca_base_var_source_t source = MCA_BASE_VAR_SOURCE_DEFAULT;
    const char *file = NULL;
    const mca_base_var_t *var = NULL;
    int rc;

    memset(in, 0, sizeof(*in));
    in->mca_name = var_name;
    in->alias_text = getenv("RDMA_LOW_LATENCY_HINT");
    if (var_index < 0) {
        return OPAL_ERR_NOT_FOUND;
    }
    /* The value argument is really a pointer to the variable's storage. */
    rc = mca_base_var_get_value(var_index, &value, &source, &file);
    if (OPAL_SUCCESS != rc) {
        return rc;
    }
    in->mca_text = (NULL != value) ? *value : NULL;
    in->mca_source = map_source(source);
    in->mca_file = file;
    if (MCA_BASE_VAR_SOURCE_FILE == source && OPAL_SUCCESS == mca_base_var_get(var_index, &var) &&
        NULL != var && NULL != var->mbv_file_value) {
        in->mca_line = ((const mca_base_var_file_value_t *)var->mbv_file_value)->mbvfv_lineno;
    }
    return OPAL_SUCCESS;
}

void llrdma_mca_help_init(void)
{
    static int done = 0;
    if (!done) {
        /* LLRDMA_HELPDIR in the environment: an uninstalled build tree. */
        const char *dir = getenv("LLRDMA_HELPDIR");
        opal_show_help_add_dir(NULL != dir ? dir : LLRDMA_HELPDIR);
        done = 1;
    }
}

static void report(const char *topic, const char *detail)
{
    llrdma_mca_help_init();
    opal_show_help(LLRDMA_HELP_FILE, topic, true, opal_process_info.nodename, (int)getpid(),
                   detail);
    opal_output(0, "llrdma: %s: %s", topic, detail);
}

void llrdma_mca_fatal(const char *topic, const char *detail)
{
    report(topic, detail);
    llrdma_mca_abort(detail);
}

void llrdma_mca_abort(const char *detail)
{
    if (NULL != opal_pmix.abort) {
        opal_pmix.abort(1, detail, NULL);
    }
    /* PMIx abort returns only when there is no launcher to ask. */
    _exit(1);
}

void llrdma_mca_warn(const char *topic, const char *detail)
{
    report(topic, detail);
}

void llrdma_mca_fill_identity(llrdma_rank_config_t *cfg)
{
    opal_proc_t *me = opal_proc_local_get();
    cfg->rank = (NULL != me) ? (int)me->proc_name.vpid : -1;
    cfg->size = -1; /* the opal layer does not know the job size; coll fills it */
    snprintf(cfg->host, sizeof(cfg->host), "%s",
             (NULL != opal_process_info.nodename) ? opal_process_info.nodename : "?");
    cfg->pid = (long)getpid();
}

int llrdma_mca_dump(const char *spec, const llrdma_rank_config_t *cfg)
{
    char json[8192];
    char path[4096];
    FILE *fp;
    int rc;

    if (NULL == spec || '\0' == spec[0] || 0 == strcmp(spec, "off") || 0 == strcmp(spec, "0")) {
        return OPAL_SUCCESS;
    }
    rc = llrdma_config_to_json(cfg, json, sizeof(json));
    if (LLRDMA_OK != rc) {
        opal_output(0, "llrdma: cannot format the configuration dump (%d)", rc);
        return OPAL_ERROR;
    }
    if (0 == strcmp(spec, "stderr") || 0 == strcmp(spec, "stdout")) {
        fp = ('e' == spec[3]) ? stderr : stdout;
        fprintf(fp, "%s\n", json);
        fflush(fp);
        return OPAL_SUCCESS;
    }
    rc = llrdma_expand_path(spec, cfg->rank, cfg->host, cfg->pid, path, sizeof(path));
    if (LLRDMA_OK != rc) {
        char detail[4352];
        snprintf(detail, sizeof(detail),
                 "btl_llrdma_dump = '%s': not a valid path pattern (use %%r, %%h, %%p, %%%%)",
                 spec);
        llrdma_mca_warn("dump failed", detail);
        return OPAL_ERR_BAD_PARAM;
    }
    fp = fopen(path, "a");
    if (NULL == fp) {
        char detail[4352];
        snprintf(detail, sizeof(detail), "btl_llrdma_dump: cannot open '%s': %s", path,
                 strerror(errno));
        llrdma_mca_warn("dump failed", detail);
        return OPAL_ERR_FILE_OPEN_FAILURE;
    }
    fprintf(fp, "%s\n", json);
    fclose(fp);
    return OPAL_SUCCESS;
}
