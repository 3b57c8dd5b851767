/*
 * The world of btl/llrdma modules of the unit tests (see fake_btl.h).
 */
#include "fake_btl.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llrdma_ompi_compat.h" /* the PMIx interface of this series */
#if LLRDMA_OMPI5
#include "opal/mca/accelerator/base/base.h"
#else
#include "opal/dss/dss_types.h"
#endif
#include "opal/mca/rcache/base/base.h"
#include "opal/memoryhooks/memory.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/runtime/opal.h"
#include "opal/runtime/opal_params.h"

#include "btl_llrdma_gpu.h"

int fw_failures, fw_checks;
/* ob1's view: the BTL calls up with no lock of its own held, from any
 * thread that progresses a module, so the recording takes this one. */
pthread_mutex_t fw_ob1_lock = PTHREAD_MUTEX_INITIALIZER;
fw_proc_t fw[FW_MAX];
int fw_n;
uint32_t fw_port_max_cqe, fw_port_max_srq_wr;

static opal_proc_t *procs[FW_MAX];
/* Raw peers (fw_raw_begin): names and modex records without a module. */
static opal_proc_t **raw_procs;
static int raw_n, raw_like;
#if !LLRDMA_OMPI5
static opal_pmix_base_module_get_fn_t saved_get;
#endif
static struct opal_proc_t *(*saved_for_name)(const opal_process_name_t name);

static int index_of(const struct mca_btl_base_module_t *btl)
{
    for (int i = 0; i < fw_n; ++i) {
        if (&fw[i].m->super == btl) {
            return i;
        }
    }
    printf("# a callback from an unknown module\n");
    abort();
}

/* ------------------------------------------------------ ob1's callbacks */

static void on_error(struct mca_btl_base_module_t *btl, int32_t flags, opal_proc_t *proc,
                     char *info)
{
    fw_proc_t *w = &fw[index_of(btl)];
    (void)flags;
    pthread_mutex_lock(&fw_ob1_lock);
    ++w->err_calls;
    w->err_proc = proc;
    snprintf(w->err_text, sizeof(w->err_text), "%s", NULL != info ? info : "");
    pthread_mutex_unlock(&fw_ob1_lock);
}

static void on_send_done(struct mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                         struct mca_btl_base_descriptor_t *des, int status)
{
    fw_proc_t *w = &fw[index_of(btl)];
    (void)ep;
    (void)des;
    pthread_mutex_lock(&fw_ob1_lock);
    ++w->cb_calls;
    if (OPAL_SUCCESS != status) {
        ++w->cb_errors;
    }
    pthread_mutex_unlock(&fw_ob1_lock);
}

static unsigned char pattern(uint32_t seq, size_t k)
{
    return (unsigned char)(seq * 7u + k * 13u + 1u);
}

static void on_recv_locked(struct mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                           const mca_btl_base_segment_t *segs);

static void recv_upcall(struct mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                        const mca_btl_base_segment_t *segs, size_t nsegs, void *cbdata)
{
    (void)nsegs;
    (void)cbdata;
    pthread_mutex_lock(&fw_ob1_lock);
    on_recv_locked(btl, tag, segs);
    pthread_mutex_unlock(&fw_ob1_lock);
}
/* ob1's receive callback, in this Open MPI series' signature. */
LLRDMA_BTL_RECV_ADAPTER(on_recv, recv_upcall)

static void on_recv_locked(struct mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                           const mca_btl_base_segment_t *segs)
{
    fw_proc_t *w = &fw[index_of(btl)];
    const unsigned char *p = segs[0].seg_addr.pval;
    size_t len = segs[0].seg_len;
    fw_msg_t h;
    int bad = 0;

    ++w->recv_calls;
    if (len > w->recv_max_len) {
        w->recv_max_len = len;
    }
    if (FW_TAG != tag || len < sizeof(h)) {
        ++w->recv_bad;
        return;
    }
    memcpy(&h, p, sizeof(h));
    if (FW_MAGIC != h.magic || h.from >= fw_n || h.cls >= FW_NCLS || h.len != len) {
        printf("# process %d: a message with a bad header (len %zu)\n", (int)(w - fw), len);
        ++w->recv_bad;
        return;
    }
    if (h.seq != w->recv_seq[h.from][h.cls]) {
        printf("# process %d: message %u of class %u from %u arrived, %u expected\n", (int)(w - fw),
               h.seq, h.cls, h.from, w->recv_seq[h.from][h.cls]);
        bad = 1;
    }
    for (size_t k = sizeof(h); k < len && !bad; ++k) {
        if (p[k] != pattern(h.seq, k)) {
            printf("# process %d: message %u from %u corrupt at byte %zu\n", (int)(w - fw), h.seq,
                   h.from, k);
            bad = 1;
        }
    }
    w->recv_bad += bad;
    w->recv_seq[h.from][h.cls] = h.seq + 1;
    ++w->recv_from[h.from];
}

/* Open MPI keeps 48 bytes per opened component (grdma, for the registration cache) until
 * opal_finalize, which a unit test does not run: not ours to free. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    /* 5.0.7's opal_show_help_vstring also keeps each help file's path. */
    return "leak:mca_base_component_repository_open\n"
           "leak:opal_os_path\n"; /* its frame (without frame pointers) */
}

/* ---------------------------------------------------------- opal hooks */

/* The modex: every module's address record, served by process name (all
 * of one job here).  4.1 reads it through the opal_pmix module's get, which
 * the harness replaces; 5.0's OPAL_MODEX_RECV calls PMIx_Get directly, so
 * the harness defines PMIx_Get (the executable's definition comes first in
 * symbol lookup; nothing else calls it in a unit test, PMIx never being
 * initialised). */
/* The address record of process (7, vpid): a module's, or for a raw peer a
 * copy of process raw_like's; NULL for none. */
static const mca_btl_llrdma_addr_t *record_of(uint32_t vpid)
{
    if (vpid >= FW_RAW_BASE && vpid < FW_RAW_BASE + (unsigned)raw_n && NULL != fw[raw_like].m) {
        return &fw[raw_like].m->addr;
    }
    for (int i = 0; i < fw_n; ++i) {
        if (NULL != fw[i].m && fw[i].proc->proc_name.vpid == (opal_vpid_t)vpid) {
            return &fw[i].m->addr;
        }
    }
    return NULL;
}

#if LLRDMA_OMPI5
pmix_status_t PMIx_Get(const pmix_proc_t *proc, const char key[], const pmix_info_t info[],
                       size_t ninfo, pmix_value_t **val)
{
    const mca_btl_llrdma_addr_t *a = record_of((uint32_t)proc->rank);
    (void)key;
    (void)info;
    (void)ninfo;
    *val = NULL;
    if (NULL == a) {
        return PMIX_ERR_NOT_FOUND;
    }
    pmix_value_t *kv = PMIx_Value_create(1);
    kv->type = PMIX_BYTE_OBJECT;
    kv->data.bo.bytes = malloc(sizeof(*a));
    memcpy(kv->data.bo.bytes, a, sizeof(*a));
    kv->data.bo.size = sizeof(*a);
    *val = kv;
    return PMIX_SUCCESS;
}
#else
static int modex_get(const opal_process_name_t *name, const char *key, opal_list_t *info,
                     opal_value_t **val)
{
    const mca_btl_llrdma_addr_t *a = 7 == name->jobid ? record_of(name->vpid) : NULL;
    (void)key;
    (void)info;
    *val = NULL;
    if (NULL == a) {
        return OPAL_ERR_NOT_FOUND;
    }
    opal_value_t *kv = OBJ_NEW(opal_value_t);
    kv->type = OPAL_BYTE_OBJECT;
    kv->data.bo.bytes = malloc(sizeof(*a));
    memcpy(kv->data.bo.bytes, a, sizeof(*a));
    kv->data.bo.size = (int)sizeof(*a);
    *val = kv;
    return OPAL_SUCCESS;
}
#endif

static struct opal_proc_t *proc_for_name(const opal_process_name_t name)
{
    if (7 == name.jobid && name.vpid >= FW_RAW_BASE && name.vpid < FW_RAW_BASE + (unsigned)raw_n) {
        return raw_procs[name.vpid - FW_RAW_BASE];
    }
    for (int i = 0; i < FW_MAX; ++i) {
        if (procs[i]->proc_name.jobid == name.jobid && procs[i]->proc_name.vpid == name.vpid) {
            return procs[i];
        }
    }
    return NULL;
}

int fw_init(int *argc, char ***argv)
{
    setenv("LLRDMA_HELPDIR", LLRDMA_TEST_SRCDIR "/common", 1);
    if (OPAL_SUCCESS != opal_init_util(argc, argv)) {
        fprintf(stderr, "opal_init_util failed\n");
        return -1;
    }
    for (int i = 0; i < FW_MAX; ++i) {
        procs[i] = OBJ_NEW(opal_proc_t);
        procs[i]->proc_name.jobid = 7;
        procs[i]->proc_name.vpid = (opal_vpid_t)i;
    }
    /* Registrations go through Open MPI's own grdma cache, as in a job; with
     * leave-pinned, so released registrations stay cached (what ob1 gets
     * once the memory hooks are in). */
    opal_leave_pinned = 1;
    (void)opal_mem_hooks_init(); /* opal_init does this in a job */
#if LLRDMA_OMPI5
    /* 5.0's convertor and registration cache ask the accelerator framework
     * about every buffer (opal_init does this in a job): the null one. */
    if (OPAL_SUCCESS != mca_base_framework_open(&opal_accelerator_base_framework, 0) ||
        OPAL_SUCCESS != opal_accelerator_base_select()) {
        fprintf(stderr, "cannot select an accelerator component (null)\n");
        return -1;
    }
#endif
    if (OPAL_SUCCESS != mca_base_framework_open(&opal_rcache_base_framework, 0)) {
        fprintf(stderr, "cannot open the rcache framework (grdma)\n");
        return -1;
    }
#if LLRDMA_OMPI5
    /* OPAL_MODEX_RECV converts the process name through this table. */
    opal_pmix_setup_nspace_tracker();
#else
    saved_get = opal_pmix.get;
    opal_pmix.get = modex_get;
#endif
    saved_for_name = opal_proc_for_name;
    opal_proc_for_name = proc_for_name;
    mca_btl_base_active_message_trigger[FW_TAG].cbfunc = on_recv;
    return 0;
}

void fw_fini(void)
{
    fake_uninstall();
    mca_btl_base_active_message_trigger[FW_TAG].cbfunc = NULL;
    opal_proc_local_set(NULL);
#if LLRDMA_OMPI5
    opal_pmix_finalize_nspace_tracker();
#else
    opal_pmix.get = saved_get;
#endif
    opal_proc_for_name = saved_for_name;
    for (int i = 0; i < FW_MAX; ++i) {
        OBJ_RELEASE(procs[i]);
    }
    (void)mca_base_framework_close(&opal_rcache_base_framework);
#if LLRDMA_OMPI5
    (void)mca_base_framework_close(&opal_accelerator_base_framework);
#endif
#if !LLRDMA_OMPI5
    (void)opal_mem_hooks_finalize(); /* 5.0: a cleanup of opal_finalize_util */
#endif
    opal_finalize_util();
}

/* ------------------------------------------------------------- world */

static char rdma_get[] = "get", gpu_auto[] = "auto";

int fw_cb_always;

void fw_begin(void)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;

    fake_install();
    memset(fw, 0, sizeof(fw));
    fw_cb_always = 0;
    fw_error_cb_late = 0;
    fw_n = 0;
    fw_port_max_cqe = 4096;
    fw_port_max_srq_wr = 4096;
    /* What btl_llrdma_mca.c registers, with a short CM timeout and the CM
     * channel polled on every progress call. */
    c->cm_timeout_ms = 100;
    c->cm_poll_every = 1;
    c->connect_timeout_s = 300;
    c->min_rnr_timer = 12;
    c->rnr_retry = 7;
    c->retry_count = 7;
    c->ack_timeout = 0;
    c->recv_mem_max = 32u << 20;
    c->stall_warn_ms = 2000;
    c->completion_timeout_ms = 0; /* derived: 60 s and more, never reached here */
    c->coalesce = 1;              /* the knob's default */
    c->sq_batch = 1;              /* the knob's default */
    c->wr_api = 1;                /* the knob's default */
    c->progress_thread = 0;
    c->progress_thread_ll_idle_ms = 10; /* the knob's default */
    c->rdma = rdma_get;
    c->gpu_rdma = gpu_auto;
    /* No libcuda: every buffer is host memory unless a test says otherwise. */
    memset(&mca_btl_llrdma_cuda, 0, sizeof(mca_btl_llrdma_cuda));
    mca_btl_llrdma_cuda.loaded = 1;
    c->nmodules = 0;
    c->modules = NULL;
}

int fw_raw_begin(int n, int like)
{
    raw_procs = calloc((size_t)n, sizeof(*raw_procs));
    if (NULL == raw_procs) {
        return -1;
    }
    for (int k = 0; k < n; ++k) {
        raw_procs[k] = OBJ_NEW(opal_proc_t);
        raw_procs[k]->proc_name.jobid = 7;
        raw_procs[k]->proc_name.vpid = (opal_vpid_t)(FW_RAW_BASE + k);
    }
    raw_n = n;
    raw_like = like;
    return 0;
}

void fw_raw_end(void)
{
    for (int k = 0; k < raw_n; ++k) {
        OBJ_RELEASE(raw_procs[k]);
    }
    free(raw_procs);
    raw_procs = NULL;
    raw_n = 0;
}

void fw_as(int i)
{
    opal_proc_local_set(fw[i].proc);
}

int fw_add(uint64_t hint, uint32_t ll_sq, uint32_t bw_sq)
{
    int i = fw_n;
    fw_proc_t *w = &fw[i];
    llrdma_profile_overrides_t o;

    if (fw_n >= FW_MAX) {
        return -1;
    }
    memset(w, 0, sizeof(*w));
    memset(&o, 0, sizeof(o));
    o.ll_sq_depth = ll_sq;
    o.bw_sq_depth = bw_sq;
    if (LLRDMA_OK != llrdma_profile_derive(hint, &o, &w->prof)) {
        fprintf(stderr, "cannot derive the profile of hint %llu\n", (unsigned long long)hint);
        exit(2);
    }
    w->proc = procs[i];
    snprintf(w->port.dev, sizeof(w->port.dev), "fake0");
    w->port.port = 1;
    w->port.link_layer = IBV_LINK_LAYER_ETHERNET;
    w->port.gid_index = 1;
    w->port.ipv4.s_addr = htonl(0x0a000001u + (uint32_t)i);
    w->port.max_cqe = fw_port_max_cqe;
    w->port.max_srq_wr = fw_port_max_srq_wr;
    w->port.max_qp_wr = 4096;
    w->port.max_msg_sz = fake.max_msg_sz;
    w->port.max_rd_atom = fake.max_rd_atom;
    w->port.max_init_rd_atom = fake.max_rd_atom;
    fw_n = i + 1; /* callbacks during creation know the module */
    fw_as(i);
    if (OPAL_SUCCESS != mca_btl_llrdma_module_create(&w->port, &w->prof, &w->m)) {
        w->m = NULL;
        fw_n = i;
        return -1;
    }
    if (!fw_error_cb_late) {
        fw_register_error(i);
    }
    return i;
}

int fw_error_cb_late;

void fw_register_error(int i)
{
    fw_as(i);
    fw[i].m->super.btl_register_error(&fw[i].m->super, on_error);
}

mca_btl_llrdma_endpoint_t *fw_add_procs(int i, int j)
{
    opal_proc_t *list[1] = {fw[j].proc};
    struct mca_btl_base_endpoint_t *peers[1] = {NULL};

    fw_as(i);
    if (OPAL_SUCCESS != fw[i].m->super.btl_add_procs(&fw[i].m->super, 1, list, peers, NULL)) {
        return NULL;
    }
    fw[i].ep[j] = peers[0];
    return peers[0];
}

void fw_mesh(void)
{
    for (int i = 0; i < fw_n; ++i) {
        for (int j = 0; j < fw_n; ++j) {
            if (i != j) {
                (void)fw_add_procs(i, j);
            }
        }
    }
}

void fw_progress_one(int i, int rounds)
{
    if (NULL == fw[i].m) {
        return;
    }
    fw_as(i);
    for (int r = 0; r < rounds; ++r) {
        (void)mca_btl_llrdma_module_progress(fw[i].m);
    }
}

void fw_progress(int rounds)
{
    for (int r = 0; r < rounds; ++r) {
        for (int i = 0; i < fw_n; ++i) {
            fw_progress_one(i, 1);
        }
    }
}

void fw_settle(int max)
{
    int idle = 0;
    for (int r = 0; r < max; ++r) {
        int count = 0;
        for (int i = 0; i < fw_n; ++i) {
            if (NULL != fw[i].m) {
                fw_as(i);
                count += mca_btl_llrdma_module_progress(fw[i].m);
            }
        }
        /* Twice idle: a CQ polled before the wire ran in the same round
         * (or whose poll failed) is looked at once more. */
        if (0 == count && 0 == fake_pump() && ++idle >= 2) {
            return;
        }
        if (0 != count) {
            idle = 0;
        }
    }
}

void fw_fill(int i, int j, void *buf, size_t size, int cls)
{
    fw_msg_t h = {.magic = FW_MAGIC,
                  .seq = fw[i].send_seq[j][cls]++,
                  .from = (uint16_t)i,
                  .cls = (uint16_t)cls,
                  .len = (uint32_t)size};
    unsigned char *p = buf;
    memcpy(p, &h, sizeof(h));
    for (size_t k = sizeof(h); k < size; ++k) {
        p[k] = pattern(h.seq, k);
    }
}

mca_btl_base_descriptor_t *fw_alloc(int i, int j, size_t size, int cls)
{
    mca_btl_llrdma_module_t *m = fw[i].m;
    mca_btl_base_descriptor_t *d;

    fw_as(i);
    d = m->super.btl_alloc(&m->super, fw[i].ep[j], MCA_BTL_NO_ORDER, size,
                           MCA_BTL_DES_FLAGS_BTL_OWNERSHIP |
                               (fw_cb_always ? MCA_BTL_DES_SEND_ALWAYS_CALLBACK : 0));
    if (NULL != d) {
        d->des_cbfunc = on_send_done;
        fw_fill(i, j, d->des_segments[0].seg_addr.pval, size, cls);
    }
    return d;
}

int fw_send(int i, int j, size_t size, int cls)
{
    mca_btl_base_descriptor_t *d = fw_alloc(i, j, size, cls);
    int rc;
    if (NULL == d) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    rc = fw[i].m->super.btl_send(&fw[i].m->super, fw[i].ep[j], d, FW_TAG);
    if (OPAL_SUCCESS == rc) {
        ++fw[i].accepted;
    } else if (1 == rc) {
        ++fw[i].inline_done;
    } else {
        --fw[i].send_seq[j][cls]; /* never sent */
    }
    return rc;
}

int fw_pair(uint64_t hint, uint32_t sq, int bw)
{
    fw_begin();
    /* One fragment per message, each posted while the queue has room, so
     * these tests can count fragments, credits and posts exactly;
     * tests that pack or batch turn those on (test_btl_pack.c). */
    mca_btl_llrdma_component.coalesce = 0;
    mca_btl_llrdma_component.sq_batch = 0;
    if (0 != fw_add(hint, sq, sq) || 1 != fw_add(hint, sq, sq)) {
        return -1;
    }
    fw_mesh();
    (void)fw_send(0, 1, 16, 0);
    if (bw) {
        (void)fw_send(0, 1, 30000, 1);
    }
    fw_settle(100);
    return NULL != fw_conn(1, 0, LLRDMA_PATH_LL) &&
                   LLRDMA_CONN_ESTABLISHED == fw_conn(0, 1, LLRDMA_PATH_LL)->state &&
                   (!bw || (NULL != fw_conn(1, 0, LLRDMA_PATH_BW) &&
                            LLRDMA_CONN_ESTABLISHED == fw_conn(0, 1, LLRDMA_PATH_BW)->state))
               ? 0
               : -1;
}

int fw_sendi(int i, int j, size_t size, size_t hdr, mca_btl_base_descriptor_t **des)
{
    mca_btl_llrdma_module_t *m = fw[i].m;
    static unsigned char msg[200000];
    int cls = size > 8000; /* LL and BW messages are not ordered with each other */
    opal_convertor_t *conv;
    int rc;

    fw_fill(i, j, msg, size, cls);
    conv = fw_bytes_convertor(msg + hdr, size - hdr);
    fw_as(i);
    /* ob1 reads it only when sendi fails (btl.h), and sendi's lanes leave
     * it alone on success: cleared, so one handed back anyway shows. */
    if (NULL != des) {
        *des = NULL;
    }
    rc = m->super.btl_sendi(&m->super, fw[i].ep[j], conv, msg, hdr, size - hdr, MCA_BTL_NO_ORDER,
                            MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, FW_TAG, des);
    OBJ_RELEASE(conv);
    if (OPAL_SUCCESS != rc) {
        --fw[i].send_seq[j][cls]; /* ob1 sends it another way */
    }
    return rc;
}

uint32_t fw_sent(int i, int j)
{
    return fw[j].recv_from[i];
}

void fw_end(int allow_faults)
{
    for (int i = 0; i < fw_n; ++i) {
        if (NULL != fw[i].m) {
            fw_as(i);
            fw[i].m->super.btl_finalize(&fw[i].m->super);
            fw[i].m = NULL;
        }
    }
    opal_proc_local_set(NULL);
    CHECK(0 == fake_live_objects());
    if (0 != fake_live_objects()) {
        printf("# live: pd %d mr %d cq %d srq %d qp %d id %d channel %d event %d\n", fake.live_pd,
               fake.live_mr, fake.live_cq, fake.live_srq, fake.live_qp, fake.live_id,
               fake.live_channel, fake.live_event);
    }
    if (!allow_faults) {
        CHECK(0 == fake_faults());
        if (0 != fake_faults()) {
            printf("# device faults: %d (last: %s)\n", fake_faults(), fake.last_fault);
        }
    }
    for (int i = 0; i < fw_n; ++i) {
        CHECK(0 == fw[i].recv_bad);
    }
}

/* Everything sent was received and called back, nobody saw an error. */
void fw_check_all_arrived(void)
{
    for (int i = 0; i < fw_n; ++i) {
        CHECK(0 == fw[i].err_calls);
        CHECK(fw[i].accepted == fw[i].cb_calls && 0 == fw[i].cb_errors);
        for (int j = 0; j < fw_n; ++j) {
            uint32_t sent = 0;
            for (int c = 0; c < FW_NCLS; ++c) {
                sent += fw[i].send_seq[j][c];
            }
            CHECK(sent == fw_sent(i, j));
            if (sent != fw_sent(i, j)) {
                printf("#   %d -> %d: %u sent, %u arrived\n", i, j, sent, fw_sent(i, j));
            }
        }
    }
}

opal_convertor_t *fw_bytes_convertor(const void *buf, size_t n)
{
    opal_convertor_t *conv = opal_convertor_create(opal_local_arch, 0);
    opal_convertor_prepare_for_send(conv, &opal_datatype_uint1, n, buf);
    return conv;
}

int fw_stderr_off(void)
{
    int saved, devnull;

    fflush(stderr);
    saved = dup(2);
    devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    close(devnull);
    return saved;
}

void fw_stderr_on(int saved)
{
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
}

int fw_finish(void)
{
    fw_fini();
    printf("%s: %d checks, %d failed\n", fw_failures ? "FAIL" : "PASS", fw_checks, fw_failures);
    return fw_failures ? 1 : 0;
}
