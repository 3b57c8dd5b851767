/*
 * Every btl/llrdma MCA variable, with help text and info level.  Defaults are
 * not repeated in the help text: ompi_info prints them.
 */
#include "opal_config.h"

#include <string.h>

#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/util/output.h"

#include <stdio.h>

#include "btl_llrdma.h"
#include "llrdma_nic.h"

static int reg_string(const char *name, const char *help, int level, char **storage,
                      const char *deflt)
{
    *storage = (char *)deflt;
    return mca_base_component_var_register(&mca_btl_llrdma_component.super.btl_version, name, help,
                                           MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, level,
                                           MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static int reg_var(const char *name, const char *help, int level, mca_base_var_type_t type,
                   void *storage)
{
    return mca_base_component_var_register(&mca_btl_llrdma_component.super.btl_version, name, help,
                                           type, NULL, 0, 0, level, MCA_BASE_VAR_SCOPE_READONLY,
                                           storage);
}

static int reg_uint(const char *name, const char *help, int level, unsigned *storage,
                    unsigned deflt)
{
    *storage = deflt;
    return reg_var(name, help, level, MCA_BASE_VAR_TYPE_UNSIGNED_INT, storage);
}

static int reg_int(const char *name, const char *help, int level, int *storage, int deflt)
{
    *storage = deflt;
    return reg_var(name, help, level, MCA_BASE_VAR_TYPE_INT, storage);
}

/* MPI_T performance variables over the histograms (llrdma_hist.h):
 * btl_llrdma_{ll,bw,rdma}_frag_count and _frag_bytes, arrays of
 * LLRDMA_HIST_BUCKETS log2 buckets, and _send_waits, one count.  Each module
 * counts its own sends under its lock; a read sums the destroyed modules'
 * counts (the component's) and every live module's, read as they are now.
 * ctx encodes which variable: path * 3 + kind. */
static int pvar_bind_array(struct mca_base_pvar_t *pvar, mca_base_pvar_event_t event, void *obj,
                           int *count)
{
    (void)pvar;
    (void)obj;
    if (MCA_BASE_PVAR_HANDLE_BIND == event) {
        *count = LLRDMA_HIST_BUCKETS;
    }
    return OPAL_SUCCESS;
}

static int pvar_bind_one(struct mca_base_pvar_t *pvar, mca_base_pvar_event_t event, void *obj,
                         int *count)
{
    (void)pvar;
    (void)obj;
    if (MCA_BASE_PVAR_HANDLE_BIND == event) {
        *count = 1;
    }
    return OPAL_SUCCESS;
}

void mca_btl_llrdma_hist_read(llrdma_hist_t *out)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;

    *out = c->hist;
    for (int i = 0; i < c->nmodules && NULL != c->modules; ++i) {
        if (NULL != c->modules[i]) {
            llrdma_hist_merge_live(out, &c->modules[i]->hist);
            llrdma_hist_small_fold(out, &c->modules[i]->hist_small);
        }
    }
}

static int pvar_read(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    const int which = (int)(intptr_t)pvar->ctx, p = which / 3, kind = which % 3;
    llrdma_hist_t h;

    (void)obj;
    mca_btl_llrdma_hist_read(&h);
    if (2 == kind) {
        memcpy(value, &h.waits[p], sizeof(uint64_t));
    } else {
        memcpy(value, 0 == kind ? h.count[p] : h.bytes[p], LLRDMA_HIST_BUCKETS * sizeof(uint64_t));
    }
    return OPAL_SUCCESS;
}

static void register_pvars(void)
{
    static const char *const path[LLRDMA_HIST_NPATHS] = {"ll", "bw", "rdma"};
    char name[64], help[512];

    for (int p = 0; p < LLRDMA_HIST_NPATHS; ++p) {
        for (int k = 0; k < 3; ++k) {
            static const char *const what[] = {"frag_count", "frag_bytes", "send_waits"};
            snprintf(name, sizeof(name), "%s_%s", path[p], what[k]);
            snprintf(help, sizeof(help),
                     2 == k ? "Sends on the %s path that waited for a send-queue slot or a "
                              "credit (queued behind the connection's pending fragments)"
                            : "Fragments sent on the %s path per log2 size bucket (%s): "
                              "bucket b holds those the low-latency path of a hint of 2^b "
                              "carries (payload in (2^(b-1), 2^b] after 64 header bytes)",
                     path[p], 0 == k ? "count" : "bytes");
            (void)mca_base_component_pvar_register(
                &mca_btl_llrdma_component.super.btl_version, name, help, OPAL_INFO_LVL_4,
                MCA_BASE_PVAR_CLASS_COUNTER, MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL,
                MCA_BASE_VAR_BIND_NO_OBJECT,
                MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, pvar_read, NULL,
                2 == k ? pvar_bind_one : pvar_bind_array, (void *)(intptr_t)(p * 3 + k));
        }
    }
}

int mca_btl_llrdma_register_params(void)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    mca_btl_base_module_t *m = &mca_btl_llrdma_module_template;
    int idx;

    /* A string, not a size_t: Open MPI turns "abc" into 0 silently; the core
     * parses it and rejects bad text with a message naming its source. */
    idx = reg_string("size_hint",
                     "Low-latency RDMA size hint: messages up to this many bytes use the "
                     "low-latency profile, larger ones the bandwidth profile (fixed at "
                     "MPI_Init). Accepts 16384, 16K, 16KiB, 2M, 0x4000; 0 = no hint. "
                     "Lower-precedence alias: environment variable RDMA_LOW_LATENCY_HINT. "
                     "Also read by coll/llrdma",
                     OPAL_INFO_LVL_3, &c->size_hint, "0");
    if (idx < 0) {
        return idx;
    }
    c->size_hint_index = idx;

    (void)reg_string("dump",
                     "Write this rank's effective configuration as one JSON line: off, "
                     "stderr, stdout, or a file path pattern (%r rank, %h host, %p pid); "
                     "files are appended to",
                     OPAL_INFO_LVL_4, &c->dump, "off");

    c->verbose = 0;
    (void)mca_base_component_var_register(&c->super.btl_version, "verbose",
                                          "Verbosity of btl/llrdma (0: errors only, 10: "
                                          "decisions, 100: everything)",
                                          MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_5,
                                          MCA_BASE_VAR_SCOPE_LOCAL, &c->verbose);

    (void)reg_string("if_include",
                     "Comma-separated verbs devices (or device:port) to use; mutually "
                     "exclusive with btl_llrdma_if_exclude",
                     OPAL_INFO_LVL_3, &c->if_include, NULL);
    (void)reg_string("if_exclude", "Comma-separated verbs devices (or device:port) never to use",
                     OPAL_INFO_LVL_3, &c->if_exclude, NULL);
    (void)reg_string("device_policy",
                     "Which of the devices left by if_include/if_exclude this rank uses: "
                     "nearest (those closest to the rank's GPU, by PCIe switch, root port, "
                     "host bridge, NUMA node; without a GPU to its CPU set's NUMA nodes; "
                     "equally near devices are all used, as rails), all, or list (exactly "
                     "btl_llrdma_devices). Each rank's dump and llrdma-check say which and why",
                     OPAL_INFO_LVL_3, &c->device_policy, "nearest");
    (void)reg_string("devices",
                     "With btl_llrdma_device_policy list: comma-separated verbs devices (or "
                     "device:port) to use; a name this node lacks stops MPI_Init",
                     OPAL_INFO_LVL_3, &c->devices, NULL);

    /* Overrides of single derived profile fields (0 = derive from the hint). */
    (void)reg_uint("ll_sq_depth", "Override: low-latency send queue depth (0 = from the hint)",
                   OPAL_INFO_LVL_6, &c->ovr_ll_sq_depth, 0);
    (void)reg_uint("bw_sq_depth", "Override: bandwidth send queue depth (0 = from the hint)",
                   OPAL_INFO_LVL_6, &c->ovr_bw_sq_depth, 0);
    (void)reg_uint("ll_inline", "Override: low-latency inline bytes requested (0 = from the hint)",
                   OPAL_INFO_LVL_6, &c->ovr_ll_inline, 0);
    (void)reg_uint("bw_signal_interval",
                   "Override: bandwidth path, signal one send work request in N (0 = from the "
                   "hint). Independent of completion-event moderation",
                   OPAL_INFO_LVL_6, &c->ovr_bw_signal, 0);
    (void)reg_uint("bw_cq_moderation_count",
                   "Override: bandwidth path, completions per CQ event (ibv_modify_cq "
                   "cq_count; 0 = from the hint)",
                   OPAL_INFO_LVL_6, &c->ovr_bw_cq_count, 0);
    (void)reg_uint("bw_cq_moderation_usec",
                   "Override: bandwidth path, CQ event period in microseconds (ibv_modify_cq "
                   "cq_period; 0 = from the hint)",
                   OPAL_INFO_LVL_6, &c->ovr_bw_cq_usec, 0);

    (void)reg_int("cm_timeout",
                  "Milliseconds rdma_cm may take to resolve a peer's address or route when a "
                  "connection is set up",
                  OPAL_INFO_LVL_6, &c->cm_timeout_ms, 2000);
    (void)reg_uint(
        "cm_poll_every",
        "Progress calls between two looks at the rdma_cm event channel while no connection "
        "of this rank is being set up (each look is a system call; a peer's first "
        "connection request waits for it)",
        OPAL_INFO_LVL_6, &c->cm_poll_every, 64);

    (void)reg_int(
        "connect_timeout",
        "Seconds a connection to a peer is retried (a peer busy outside MPI cannot answer) "
        "before the peer is reported unreachable",
        OPAL_INFO_LVL_6, &c->connect_timeout_s, 300);

    /* Fabric addressing */
    (void)reg_int(
        "gid_index",
        "RoCE: use this GID table index on every port (-1: the IPv4-mapped GID of the "
        "preferred RoCE version). Its GID must be IPv4-mapped (rdma_cm binds to its address)",
        OPAL_INFO_LVL_5, &c->gid_index, -1);
    (void)reg_string("roce_version",
                     "RoCE: which GID type to use when choosing the GID: auto (v2, else v1), "
                     "1 or 2",
                     OPAL_INFO_LVL_5, &c->roce_version, "auto");

    /* Reliability and flow control */
    (void)reg_uint(
        "min_rnr_timer",
        "Receiver-not-ready back-off a receiver asks of its senders (IB encoding 0-31; 12 = "
        "0.64 ms, 0 = 655 ms). Met only when many peers' windows land at once (see "
        "recv_mem_max)",
        OPAL_INFO_LVL_6, &c->min_rnr_timer, 12);
    (void)reg_uint(
        "rnr_retry",
        "Receiver-not-ready retries before a send fails (0-7, 7 = retry forever). Below 7 "
        "the receive windows are never overcommitted (see recv_mem_max)",
        OPAL_INFO_LVL_6, &c->rnr_retry, 7);
    (void)reg_uint("retry_count",
                   "Transport retries (lost packets, no acknowledgement) before a send fails (0-7)",
                   OPAL_INFO_LVL_6, &c->retry_count, 7);
    (void)reg_uint(
        "ack_timeout",
        "How long a sender waits for an acknowledgement before it retransmits (IB "
        "encoding 1-31: 4.096 us x 2^N, e.g. 14 = 67 ms, 18 = 1.07 s; 0 = leave it to "
        "rdma_cm). On links that drop packets each loss stalls its queue pair this long; "
        "too short on a congested fabric retransmits needlessly",
        OPAL_INFO_LVL_6, &c->ack_timeout, 0);
    c->recv_mem_max = 32u << 20;
    (void)reg_var(
        "recv_mem_max",
        "Bytes of pre-posted receive buffers per path and port, whatever the number of peers. "
        "With rnr_retry 7 (the default) every peer gets a burst window of credits (what it may "
        "send while this process computes: up to 512 buffers or 8 MiB of them, at most half "
        "of this): buffers back the windows one for one up to half of this, then the windows "
        "share them and the SRQ limit event adds more up to this (a send finding none is "
        "retried by the NIC). With rnr_retry below 7 each peer is allotted its profile's "
        "window of buffers of its own until this is reached; later peers get the minimum "
        "allotment",
        OPAL_INFO_LVL_5, MCA_BASE_VAR_TYPE_SIZE_T, &c->recv_mem_max);
    (void)reg_int(
        "stall_warn",
        "Milliseconds a send may wait for credits from a peer that does not progress before "
        "this is reported (verbose level 1); sending resumes when the peer does. Also how "
        "long a module with work outstanding may stand still before it prints its state per "
        "peer (verbose level 1; 0 turns that off)",
        OPAL_INFO_LVL_6, &c->stall_warn_ms, 2000);
    (void)reg_int(
        "completion_timeout",
        "Milliseconds a connection may hold work requests with none completing before its "
        "peer is declared unreachable: the error is reported (ob1 ends the job naming the "
        "peer) and the queue pair's work is flushed back with an error. A live peer's NIC "
        "answers within the queue pair's retry budget whatever its process does, so this "
        "only catches a device or driver that stopped. Once that budget has passed (at most "
        "half this limit) one more work request is posted on the queue pair, which restarts "
        "one that stopped sending (seen with Soft-RoCE). 0: four times that budget (ACK "
        "timeout x (retry count + 1)), at least 60 s; -1: never (no nudge either)",
        OPAL_INFO_LVL_6, &c->completion_timeout_ms, 0);
    (void)reg_int("coalesce",
                  "On a connected path, copy a message that must queue (no credit or send "
                  "slot) behind the fragment queued before it, or into a new BTL fragment if "
                  "at least four such fit the peer's buffer, so it completes at once and a "
                  "busy peer gets many messages per receive buffer and credit (1 on, 0 off)",
                  OPAL_INFO_LVL_6, &c->coalesce, 1);
    (void)reg_int("sq_batch",
                  "Once half a connection's send queue is posted and not yet completed, send "
                  "further messages to that peer together: each waits (packed behind the one "
                  "before it where coalescing allows) until the queue's next completion, "
                  "which posts them as one chain of work requests.  A burst the wire cannot "
                  "take at once then costs a work request and a doorbell per batch instead of "
                  "per message; what waits goes at the sender's next progress, as any queued "
                  "message (1 on, 0 off)",
                  OPAL_INFO_LVL_6, &c->sq_batch, 1);
    (void)reg_int("wr_api",
                  "Post small inline sends (sendi) with rdma-core's work-request API "
                  "(ibv_wr_send on a QP created with rdma_create_qp_ex) where the provider "
                  "has it: it fills its queue entry from the arguments instead of parsing a "
                  "work request (rxe: 37 fewer user-space instructions per 8-byte send, "
                  "docs/benchmarks-softroce.md).  Every other post, and every post on a "
                  "provider without the API, uses ibv_post_send; the dump's device.post_api "
                  "says which took effect (1 on, 0 off)",
                  OPAL_INFO_LVL_6, &c->wr_api, 1);
    (void)reg_int("progress_thread",
                  "An asynchronous progress thread per port that sleeps on the bandwidth "
                  "path's completion channel (CQ armed, the profile's CQ moderation) and "
                  "advances that path's completions, RDMA operations and waiting fragments "
                  "while the application computes (1 on, 0 off).  The low-latency path stays "
                  "busy-polled by the application's threads.  Turns on Open MPI's thread "
                  "safety (as MPI_THREAD_MULTIPLE does) because ob1's callbacks then run on "
                  "that thread",
                  OPAL_INFO_LVL_4, &c->progress_thread, 0);
    (void)reg_int("progress_thread_ll_idle",
                  "With the progress thread on: when the application has not called Open "
                  "MPI's progress for this many milliseconds (it computes), the thread also "
                  "polls the low-latency path, so ob1's rendezvous headers and FINs, which are "
                  "small and travel there, are answered while the application computes.  "
                  "0: the low-latency path is left to the application's threads",
                  OPAL_INFO_LVL_5, &c->progress_thread_ll_idle_ms, 10);
    (void)reg_string("rdma",
                     "RDMA protocol offered to ob1 for large contiguous messages: get (the "
                     "receiver reads the sender's buffer, RGET), put (the sender writes into "
                     "the receiver's buffer after a rendezvous, RPUT), off (send/receive only)",
                     OPAL_INFO_LVL_5, &c->rdma, "get");
    (void)reg_string("gpu_rdma",
                     "How GPU memory is registered for RDMA: auto (dma-buf if the device has "
                     "dma-buf MRs, else peermem if nvidia_peermem is loaded, else none: "
                     "callers stage through host memory), dmabuf, peermem (either one or "
                     "MPI_Init stops), off",
                     OPAL_INFO_LVL_5, &c->gpu_rdma, "auto");
    (void)reg_string("fork_safe",
                     "Make registered memory safe across fork() (Python data-loader workers): "
                     "auto (only where the kernel does not already), yes (always call "
                     "ibv_fork_init), no",
                     OPAL_INFO_LVL_5, &c->fork_safe, "auto");

    /* Generic BTL limits (exclusivity, latency, ...) as btl_llrdma_*.  The
     * eager limit, rendezvous eager limit and max send size are derived from
     * the profile in each module and replace these (see docs/btl-design.md). */
    m->btl_exclusivity = MCA_BTL_EXCLUSIVITY_DEFAULT;
    m->btl_eager_limit = 12 * 1024;
    m->btl_rndv_eager_limit = 12 * 1024;
    m->btl_max_send_size = 64 * 1024;
    m->btl_latency = 1;
    m->btl_bandwidth = 10000;
    m->btl_flags = MCA_BTL_FLAGS_SEND;
    register_pvars();
    return mca_btl_base_param_register(&c->super.btl_version, m);
}

static void check_max(const char *name, unsigned value, unsigned max, const char *what)
{
    char v[32], why[160];
    if (value <= max) {
        return;
    }
    snprintf(v, sizeof(v), "%u", value);
    snprintf(why, sizeof(why), "%s: at most %u", what, max);
    mca_btl_llrdma_bad_knob(name, v, why);
}

static void check_min(const char *name, int value, int min, const char *what)
{
    char v[32], why[160];
    if (value >= min) {
        return;
    }
    snprintf(v, sizeof(v), "%d", value);
    snprintf(why, sizeof(why), "%s: at least %d", what, min);
    mca_btl_llrdma_bad_knob(name, v, why);
}

/* The knobs whose help says "1 on, 0 off". */
static void check_on_off(const char *name, int value)
{
    char v[32];
    if (0 == value || 1 == value) {
        return;
    }
    snprintf(v, sizeof(v), "%d", value);
    mca_btl_llrdma_bad_knob(name, v, "1 (on) or 0 (off)");
}

void mca_btl_llrdma_check_params(void)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    check_on_off("coalesce", c->coalesce);
    check_on_off("sq_batch", c->sq_batch);
    check_on_off("wr_api", c->wr_api);
    check_on_off("progress_thread", c->progress_thread);
    check_max("min_rnr_timer", c->min_rnr_timer, 31, "a 5-bit IB RNR timer code");
    check_max("rnr_retry", c->rnr_retry, 7, "a 3-bit retry count (7 = forever)");
    check_max("retry_count", c->retry_count, 7, "a 3-bit retry count");
    check_max("ack_timeout", c->ack_timeout, 31, "a 5-bit IB timeout code (0 = rdma_cm's)");
    check_min("connect_timeout", c->connect_timeout_s, 1, "seconds");
    check_min("cm_timeout", c->cm_timeout_ms, 1, "milliseconds");
    check_min("stall_warn", c->stall_warn_ms, 0, "milliseconds");
    check_min("completion_timeout", c->completion_timeout_ms, -1,
              "milliseconds, 0 (derived) or -1 (never)");
    check_min("progress_thread_ll_idle", c->progress_thread_ll_idle_ms, 0, "milliseconds");
    if (NULL == c->rdma || (0 != strcmp(c->rdma, "get") && 0 != strcmp(c->rdma, "put") &&
                            0 != strcmp(c->rdma, "off"))) {
        char v[160];
        snprintf(v, sizeof(v), "'%.150s'", NULL != c->rdma ? c->rdma : "");
        mca_btl_llrdma_bad_knob("rdma", v, "not one of get, put, off");
    }
    {
        int policy;
        char v[160];
        if (LLRDMA_OK != llrdma_nic_policy_parse(c->device_policy, &policy)) {
            snprintf(v, sizeof(v), "'%.150s'", c->device_policy);
            mca_btl_llrdma_bad_knob("device_policy", v, "not one of nearest, all, list");
        }
        if (LLRDMA_NIC_LIST == policy && (NULL == c->devices || '\0' == c->devices[0])) {
            snprintf(v, sizeof(v), "'%.150s'", c->device_policy);
            mca_btl_llrdma_bad_knob("device_policy", v,
                                    "list needs btl_llrdma_devices (device or device:port, "
                                    "comma-separated)");
        }
        if (LLRDMA_NIC_LIST != policy && NULL != c->devices && '\0' != c->devices[0]) {
            snprintf(v, sizeof(v), "'%.150s'", c->devices);
            mca_btl_llrdma_bad_knob("devices", v,
                                    "applies to btl_llrdma_device_policy list only; set that "
                                    "too (or use btl_llrdma_if_include to narrow nearest)");
        }
    }
    {
        llrdma_gpu_knob_t k;
        if (LLRDMA_OK != llrdma_gpu_knob_parse(c->gpu_rdma, &k)) {
            char v[160];
            snprintf(v, sizeof(v), "'%.150s'", NULL != c->gpu_rdma ? c->gpu_rdma : "");
            mca_btl_llrdma_bad_knob("gpu_rdma", v, "not one of auto, dmabuf, peermem, off");
        }
    }
}
