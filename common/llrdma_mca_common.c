/*
 * Shared MCA glue for btl/llrdma and coll/llrdma (see llrdma_mca_common.h).
 */
#include "opal_config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/constants.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_vari.h"
#include "llrdma_ompi_compat.h" /* the PMIx interface of this series */
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

/* Where the messages go.  opal_show_help() from a rank travels through
 * PMIx_Log to the PMIx server thread of its daemon, which relays it to
 * mpirun with orte_rml.send_buffer_nb().  For ranks on mpirun's own node that
 * is a send to self, and Open MPI 4.1's send-to-self frees the buffer on
 * mpirun's event thread while the PMIx thread still copies it (a
 * use-after-free in orte_rml_oob_send_buffer_nb, shown by valgrind): the
 * message is lost and mpirun prints "ORTE_ERROR_LOG: Data unpack would read
 * past end of buffer in file util/show_help.c".  So the rank renders the help
 * text itself and writes it to its stderr, which mpirun forwards like any
 * other output; the full text is printed once per node and topic. */
static void write_stderr(const char *text)
{
    size_t left = strlen(text);
    while (left > 0) {
        ssize_t n = write(STDERR_FILENO, text, left);
        if (n < 0 && EINTR == errno) {
            continue;
        }
        if (n <= 0) {
            return;
        }
        text += n;
        left -= (size_t)n;
    }
}

/* 1 if this process is the first of its job on this node to report `topic`
 * (and `key`, if given): a marker file named for the job in the parent of the
 * job's session directory (the launcher's, removed when the launcher ends).
 * Not in the job's own directory: when the first rank aborts, the launcher
 * empties and removes that one while the others still report, and a rank
 * still in MPI_Init creates it again, so its marker would be new (strace
 * showed both; CI printed the whole text twice).  Without a session
 * directory every process reports. */
static int first_on_node(const char *topic, const char *key)
{
    const char *dir = opal_process_info.job_session_dir;
    const char *job, *slash;
    char name[200], path[4096];
    size_t n = 0;
    int fd, dirlen;

    if (NULL == dir) {
        return 1;
    }
    slash = strrchr(dir, '/');
    if (NULL != slash && slash != dir && '\0' != slash[1]) {
        dirlen = (int)(slash - dir);
        job = slash + 1;
    } else {
        dirlen = (int)strlen(dir);
        job = "";
    }
    for (const char *t = job; '\0' != *t && n < 40; ++t) {
        name[n++] = isalnum((unsigned char)*t) ? *t : '_';
    }
    name[n++] = '-';
    for (const char *t = topic; '\0' != *t && n < 120; ++t) {
        name[n++] = isalnum((unsigned char)*t) ? *t : '_';
    }
    for (const char *t = key; NULL != t && '\0' != *t && n < sizeof(name) - 2; ++t) {
        name[n++] = isalnum((unsigned char)*t) ? *t : '_';
    }
    name[n] = '\0';
    if ((size_t)snprintf(path, sizeof(path), "%.*s/llrdma-reported-%s", dirlen, dir, name) >=
        sizeof(path)) {
        return 1;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        close(fd);
        return 1;
    }
    /* ENOENT: the launcher's directory is gone, so the job is being torn
     * down, which a process that reported first and aborted started. */
    return (EEXIST == errno || ENOENT == errno) ? 0 : 1;
}

static void print_line(const char *topic, const char *detail)
{
    const char *host = NULL != opal_process_info.nodename ? opal_process_info.nodename : "?";
    size_t len = strlen(topic) + strlen(host) + strlen(detail) + 64;
    char *line = malloc(len);

    if (NULL == line) {
        return;
    }
    /* One write: lines of different ranks stay whole. */
    snprintf(line, len, "llrdma: %s (host %s, PID %d): %s\n", topic, host, (int)getpid(), detail);
    write_stderr(line);
    free(line);
}

/* The help text; one line when the help file cannot be read. */
static void print_help(const char *topic, const char *detail)
{
    const char *host = NULL != opal_process_info.nodename ? opal_process_info.nodename : "?";
    char *text;

    llrdma_mca_help_init();
    text = opal_show_help_string(LLRDMA_HELP_FILE, topic, true, host, (int)getpid(), detail);
    if (NULL == text) {
        print_line(topic, detail);
        return;
    }
    write_stderr(text);
    free(text);
}

/* 1 when this process printed the whole text (the first of its node). */
static int report(const char *topic, const char *detail)
{
    if (first_on_node(topic, NULL)) {
        print_help(topic, detail);
        return 1;
    }
    /* Another process of this node printed the explanation. */
    print_line(topic, detail);
    return 0;
}

void llrdma_mca_fatal(const char *topic, const char *detail)
{
    if (!report(topic, detail)) {
        /* The first process of this node is printing the whole text: an
         * abort from here could end the job before that text left it (seen
         * about once in 16 four-rank jobs).  Its own abort comes first. */
        sleep(LLRDMA_FATAL_GRACE_S);
    }
    llrdma_mca_abort(detail);
}

void llrdma_mca_abort(const char *detail)
{
    llrdma_job_abort(detail);
    /* PMIx abort returns only when there is no launcher to ask. */
    _exit(1);
}

void llrdma_mca_warn(const char *topic, const char *detail)
{
    (void)report(topic, detail);
}

int llrdma_mca_warn_once(const char *topic, const char *key, const char *detail)
{
    if (!first_on_node(topic, key)) {
        return 0;
    }
    print_help(topic, detail);
    return 1;
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

static int dump_off(const char *spec)
{
    return NULL == spec || '\0' == spec[0] || 0 == strcmp(spec, "off") || 0 == strcmp(spec, "0");
}

/* One JSON line where `spec` says. */
static int dump_line(const char *spec, const llrdma_rank_config_t *cfg, const char *json)
{
    char path[4096];
    FILE *fp;
    int rc;

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

int llrdma_mca_dump(const char *spec, const llrdma_rank_config_t *cfg)
{
    char json[8192];
    int rc;

    if (dump_off(spec)) {
        return OPAL_SUCCESS;
    }
    rc = llrdma_config_to_json(cfg, json, sizeof(json));
    if (LLRDMA_OK != rc) {
        opal_output(0, "llrdma: cannot format the configuration dump (%d)", rc);
        return OPAL_ERROR;
    }
    return dump_line(spec, cfg, json);
}

int llrdma_mca_dump_stats(const char *spec, const llrdma_rank_config_t *cfg,
                          const llrdma_hist_t *hist)
{
    char *json;
    int rc;

    if (dump_off(spec)) {
        return OPAL_SUCCESS;
    }
    json = malloc(LLRDMA_STATS_JSON_MAX);
    if (NULL == json) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    rc = llrdma_stats_to_json(cfg, hist, json, LLRDMA_STATS_JSON_MAX);
    if (LLRDMA_OK != rc) {
        opal_output(0, "llrdma: cannot format the statistics dump (%d)", rc);
        free(json);
        return OPAL_ERROR;
    }
    rc = dump_line(spec, cfg, json);
    free(json);
    return rc;
}
