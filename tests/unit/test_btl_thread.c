/*
 * btl/llrdma with threads, against the fake device (tests/unit/fake_btl.c):
 *
 * - the fake's completion channel: no event unless the CQ is armed, one
 *   event per arming, moderation count and period honoured, events taken
 *   must be acknowledged before the CQ goes;
 * - btl_llrdma_progress_thread: with nobody calling the module's progress,
 *   its thread reaps the BW path's send completions (ob1's callbacks run)
 *   from CQ events; fewer events than completions with moderation, and
 *   the dump's progress fields say what was granted (with and without
 *   moderation on the device);
 * - several threads per process posting and polling at once (senders on
 *   both sides, connection set-up included, separate progress threads, the
 *   progress thread on one side): every message arrives once, in order per
 *   sender thread, bytes intact.  Built twice: with AddressSanitizer
 *   (test_btl_thread) and with ThreadSanitizer (test_btl_thread_tsan),
 *   which fails the program on any data race or lock-order inversion it
 *   sees; meanwhile an MPI_T reader sums the modules' size histograms, and
 *   every message is counted once, by its sender's module;
 * - every seam call failing in turn while a module with the progress thread
 *   is created and finalized: nothing leaks, the channel goes after its
 *   CQs.
 */
#include "fake_btl.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/runtime/opal.h"

#define LL LLRDMA_PATH_LL
#define BW LLRDMA_PATH_BW

/* ------------------------------------------------ the fake's events */

static void test_fake_events(void)
{
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq, *got = NULL;
    void *ctx = NULL;
    int tag = 0;

    fw_begin();
    ch = mca_btl_llrdma_verbs.create_comp_channel(&fake_ctx);
    CHECK(NULL != ch);
    cq = mca_btl_llrdma_verbs.create_cq(&fake_ctx, 64, &tag, ch, 0);
    CHECK(NULL != cq);

    /* Not armed: completions make no event. */
    fake_push_wc(cq, 2, IBV_WC_SUCCESS, 0, 1, IBV_WC_SEND);
    CHECK(0 != mca_btl_llrdma_verbs.get_cq_event(ch, &got, &ctx));
    CHECK(0 == fake_cq_events(cq));

    /* Armed: the next completion is one event, and disarms. */
    CHECK(0 == mca_btl_llrdma_verbs.req_notify_cq(cq, 0));
    CHECK(fake_cq_armed(cq));
    fake_push_wc(cq, 2, IBV_WC_SUCCESS, 0, 1, IBV_WC_SEND);
    fake_push_wc(cq, 2, IBV_WC_SUCCESS, 0, 1, IBV_WC_SEND);
    CHECK(1 == fake_cq_events(cq) && !fake_cq_armed(cq));
    CHECK(0 == mca_btl_llrdma_verbs.get_cq_event(ch, &got, &ctx));
    CHECK(got == cq && ctx == &tag);
    CHECK(0 != mca_btl_llrdma_verbs.get_cq_event(ch, &got, &ctx)); /* one only */

    /* Destroying it with the event not acknowledged is what blocks a real
     * ibv_destroy_cq forever: the fake counts it as misuse. */
    CHECK(0 != mca_btl_llrdma_verbs.destroy_cq(cq));
    CHECK(1 == fake.misuse);
    fake.misuse = 0;
    mca_btl_llrdma_verbs.ack_cq_events(cq, 1);
    /* A channel a CQ still uses cannot go (EBUSY on a real device). */
    CHECK(EBUSY == mca_btl_llrdma_verbs.destroy_comp_channel(ch));
    CHECK(1 == fake.misuse);
    fake.misuse = 0;
    CHECK(0 == mca_btl_llrdma_verbs.destroy_cq(cq));
    CHECK(0 == mca_btl_llrdma_verbs.destroy_comp_channel(ch));
    CHECK(0 == fake_live_objects());
    CHECK(0 == fake_faults());
}

static void test_fake_moderation(void)
{
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq, *got;
    struct ibv_modify_cq_attr ma = {.attr_mask = IBV_CQ_ATTR_MODERATE,
                                    .moderate = {.cq_count = 4, .cq_period = 60000}};
    void *ctx;
    uint64_t t0;

    fw_begin();
    ch = mca_btl_llrdma_verbs.create_comp_channel(&fake_ctx);
    cq = mca_btl_llrdma_verbs.create_cq(&fake_ctx, 64, NULL, ch, 0);
    CHECK(0 == mca_btl_llrdma_verbs.modify_cq(cq, &ma));
    CHECK(0 == mca_btl_llrdma_verbs.req_notify_cq(cq, 0));
    /* The count: three completions are no event, the fourth is. */
    for (int k = 0; k < 3; ++k) {
        fake_push_wc(cq, 2, IBV_WC_SUCCESS, 0, 1, IBV_WC_SEND);
    }
    (void)fake_pump();
    CHECK(0 == fake_cq_events(cq));
    fake_push_wc(cq, 2, IBV_WC_SUCCESS, 0, 1, IBV_WC_SEND);
    CHECK(1 == fake_cq_events(cq));
    CHECK(0 == mca_btl_llrdma_verbs.get_cq_event(ch, &got, &ctx));
    mca_btl_llrdma_verbs.ack_cq_events(got, 1);

    /* The period: one completion, then the period runs out. */
    ma.moderate.cq_count = 100;
    ma.moderate.cq_period = 50000; /* us */
    CHECK(0 == mca_btl_llrdma_verbs.modify_cq(cq, &ma));
    CHECK(0 == mca_btl_llrdma_verbs.req_notify_cq(cq, 0));
    t0 = mca_btl_llrdma_now_ms();
    fake_push_wc(cq, 2, IBV_WC_SUCCESS, 0, 1, IBV_WC_SEND);
    (void)fake_pump();
    /* Not yet, unless this thread lost the CPU for the whole period. */
    CHECK(1 == fake_cq_events(cq) || mca_btl_llrdma_now_ms() - t0 >= 50);
    usleep(60000);
    (void)fake_pump();
    CHECK(2 == fake_cq_events(cq));
    CHECK(0 == mca_btl_llrdma_verbs.get_cq_event(ch, &got, &ctx));
    mca_btl_llrdma_verbs.ack_cq_events(got, 1);
    CHECK(0 == mca_btl_llrdma_verbs.destroy_cq(cq));
    CHECK(0 == mca_btl_llrdma_verbs.destroy_comp_channel(ch));
    CHECK(0 == fake_live_objects() && 0 == fake_faults());
}

/* ------------------------------------------- the progress thread */

static int cb_calls_locked(int i)
{
    int n;
    pthread_mutex_lock(&fw_ob1_lock);
    n = fw[i].cb_calls;
    pthread_mutex_unlock(&fw_ob1_lock);
    return n;
}

static uint32_t received_locked(int j, int from)
{
    uint32_t n;
    pthread_mutex_lock(&fw_ob1_lock);
    n = fw[j].recv_from[from];
    pthread_mutex_unlock(&fw_ob1_lock);
    return n;
}

/* Process 0 has the progress thread; the test never progresses it. */
static void progress_thread_case(int moderation)
{
    const int n = 96;
    llrdma_device_info_t dev;
    char why[512];
    uint64_t comp, ev;

    fw_begin();
    fake_lock_install();
    fake.modify_cq_supported = moderation;
    mca_btl_llrdma_component.progress_thread = 1;
    CHECK(0 == fw_add(4096, 0, 0));
    mca_btl_llrdma_component.progress_thread = 0;
    CHECK(1 == fw_add(4096, 0, 0));
    CHECK(fw[0].m->thread_running && !fw[1].m->thread_running);
    memset(&dev, 0, sizeof(dev));
    (void)mca_btl_llrdma_module_granted(fw[0].m, &dev, why, sizeof(why));
    CHECK(0 == strcmp(dev.progress_bw, "event") && 0 == strcmp(dev.progress_ll, "poll"));
    if (moderation) {
        CHECK(16 == dev.cq_mod_count_granted && 8 == dev.cq_mod_usec_granted);
        CHECK(NULL != strstr(dev.progress_note, "one event per 16 completions"));
    } else {
        CHECK(0 == dev.cq_mod_count_granted && 0 == dev.cq_mod_usec_granted);
        CHECK(0 == strcmp(dev.progress_note,
                          "one event per completion (the device has no CQ moderation)"));
    }
    memset(&dev, 0, sizeof(dev));
    (void)mca_btl_llrdma_module_granted(fw[1].m, &dev, why, sizeof(why));
    CHECK(0 == strcmp(dev.progress_bw, "poll"));
    CHECK(0 == strcmp(dev.progress_note, "no progress thread (btl_llrdma_progress_thread=0)"));

    fw_mesh();
    /* 9000 bytes: above the 4K hint, the BW path; not inline, so every send
     * completes towards ob1 from a completion on process 0's BW CQ. */
    for (int k = 0; k < n; ++k) {
        CHECK(OPAL_SUCCESS == fw_send(0, 1, 9000, 0));
    }
    for (int r = 0; r < 200000 && (received_locked(1, 0) < (uint32_t)n || cb_calls_locked(0) < n);
         ++r) {
        fw_progress_one(1, 1); /* runs the wire; process 0 is left to its thread */
        if (0 == r % 64) {
            usleep(100);
        }
    }
    CHECK((uint32_t)n == received_locked(1, 0));
    CHECK(n == cb_calls_locked(0));
    if ((uint32_t)n != received_locked(1, 0)) {
        mca_btl_llrdma_conn_t *c0 = fw_conn(0, 1, BW), *c1 = fw_conn(1, 0, BW);
        printf("# stuck: 0->1 bw %s (state %d), 1->0 bw %s (state %d), connecting %d/%d, "
               "received %u, callbacks %d\n",
               NULL == c0 ? "none" : "conn", NULL == c0 ? -1 : (int)c0->state,
               NULL == c1 ? "none" : "conn", NULL == c1 ? -1 : (int)c1->state, fw[0].m->connecting,
               fw[1].m->connecting, received_locked(1, 0), cb_calls_locked(0));
    }
    MCA_BTL_LLRDMA_LOCK(fw[0].m);
    comp = fw[0].m->completions[BW];
    ev = fw[0].m->events[BW];
    MCA_BTL_LLRDMA_UNLOCK(fw[0].m);
    printf("# moderation %s: %llu BW completions, %llu events\n", moderation ? "on" : "off",
           (unsigned long long)comp, (unsigned long long)ev);
    CHECK(comp > 0 && ev > 0);
    CHECK(ev <= comp);
    CHECK(0 == fw[0].m->events[LL]); /* LL is never armed */
    fw_end(0);
    CHECK(0 == mca_btl_llrdma_component.hist.cq_events[LL]);
    CHECK(mca_btl_llrdma_component.hist.cq_events[BW] >= ev);
    memset(&mca_btl_llrdma_component.hist, 0, sizeof(mca_btl_llrdma_component.hist));
}

/* Process 0 has the thread and its application never calls progress (it
 * computes): LL messages from process 1 reach ob1 through the thread's idle
 * look at the LL path, and only through it (ll_idle 0: not before process 0
 * progresses itself). */
static void ll_idle_case(int ll_idle_ms)
{
    const int n = 20;
    uint64_t by_thread;
    int r;

    fw_begin();
    fake_lock_install();
    mca_btl_llrdma_component.progress_thread = 1;
    mca_btl_llrdma_component.progress_thread_ll_idle_ms = ll_idle_ms;
    CHECK(0 == fw_add(4096, 0, 0));
    mca_btl_llrdma_component.progress_thread = 0;
    CHECK(1 == fw_add(4096, 0, 0));
    CHECK(fw[0].m->thread_running);
    fw_mesh();
    for (int k = 0; k < n; ++k) {
        int rc = fw_send(1, 0, 100, 0);
        CHECK(OPAL_SUCCESS == rc || 1 == rc);
    }
    /* 2 s at most, or 300 ms when nothing may arrive. */
    for (r = 0; r < (ll_idle_ms > 0 ? 20000 : 3000) && received_locked(0, 1) < (uint32_t)n; ++r) {
        fw_progress_one(1, 1);
        usleep(100);
    }
    /* The thread counts its completions after handing them to ob1. */
    for (r = 0; r < (ll_idle_ms > 0 ? 20000 : 1); ++r) {
        MCA_BTL_LLRDMA_LOCK(fw[0].m);
        by_thread = fw[0].m->thread_completions[LL];
        MCA_BTL_LLRDMA_UNLOCK(fw[0].m);
        if (by_thread >= (uint64_t)n) {
            break;
        }
        usleep(100);
    }
    printf("# ll_idle %d ms: %u of %d LL messages received while the application computed, "
           "%llu LL completions by the thread\n",
           ll_idle_ms, received_locked(0, 1), n, (unsigned long long)by_thread);
    if (ll_idle_ms > 0) {
        CHECK((uint32_t)n == received_locked(0, 1));
        CHECK(by_thread >= (uint64_t)n);
        /* The application's progress calls are counted for the thread... */
        CHECK(fw[0].m->ll_idle_look);
        fw_progress_one(0, 3);
        CHECK(__atomic_load_n(&fw[0].m->app_progress, __ATOMIC_RELAXED) >= 3);
    } else {
        CHECK(0 == received_locked(0, 1));
        CHECK(0 == by_thread);
        for (r = 0; r < 20000 && received_locked(0, 1) < (uint32_t)n; ++r) {
            fw_progress(1); /* the application is back */
        }
        CHECK((uint32_t)n == received_locked(0, 1));
        CHECK(!fw[0].m->ll_idle_look);
        CHECK(0 == fw[0].m->app_progress);
    }
    /* ...and only when there is a look: no atomic on a hot path for nothing. */
    CHECK(!fw[1].m->ll_idle_look && 0 == fw[1].m->app_progress);
    fw_end(0);
    if (ll_idle_ms > 0) {
        CHECK(mca_btl_llrdma_component.hist.thread_completions[LL] >= (uint64_t)n);
        CHECK(mca_btl_llrdma_component.hist.thread_cpu_us > 0);
    }
    memset(&mca_btl_llrdma_component.hist, 0, sizeof(mca_btl_llrdma_component.hist));
}

static void test_progress_thread(void)
{
    progress_thread_case(1);
    progress_thread_case(0);
    ll_idle_case(1);
    ll_idle_case(0);
}

/* ------------------------------------------- several threads at once */

#define NT 3     /* sender threads per process */
#define NMSG 400 /* messages per sender thread */
static volatile int stop_progress;

typedef struct {
    int i, j, cls; /* classes cls (LL) and cls + 1 (BW): order holds per path */
    int accepted, done_inline, fails;
} sender_t;

static void *sender_main(void *arg)
{
    sender_t *s = arg;
    mca_btl_llrdma_module_t *m = fw[s->i].m;
    unsigned seed = (unsigned)(s->i * 31 + s->cls);

    for (int k = 0; k < NMSG; ++k) {
        /* Sizes on both paths of a 4K hint, most small. */
        size_t size = 0 == rand_r(&seed) % 4 ? 5000 + (size_t)(rand_r(&seed) % 4000)
                                             : 16 + (size_t)(rand_r(&seed) % 3000);
        mca_btl_base_descriptor_t *d = NULL;
        int rc;
        while (NULL == (d = m->super.btl_alloc(&m->super, fw[s->i].ep[s->j], MCA_BTL_NO_ORDER, size,
                                               MCA_BTL_DES_FLAGS_BTL_OWNERSHIP))) {
            (void)mca_btl_llrdma_module_progress(m); /* as ob1 would, from its progress */
        }
        fw_fill(s->i, s->j, d->des_segments[0].seg_addr.pval, size, s->cls + (size > 4096));
        d->des_cbfunc = NULL;
        rc = m->super.btl_send(&m->super, fw[s->i].ep[s->j], d, FW_TAG);
        if (OPAL_SUCCESS == rc) {
            ++s->accepted;
        } else if (1 == rc) {
            ++s->done_inline;
        } else {
            ++s->fails;
        }
        if (0 == k % 8) {
            (void)mca_btl_llrdma_module_progress(m);
        }
    }
    return NULL;
}

static void *progress_main(void *arg)
{
    mca_btl_llrdma_module_t *m = fw[(int)(intptr_t)arg].m;
    while (!__atomic_load_n(&stop_progress, __ATOMIC_ACQUIRE)) {
        (void)mca_btl_llrdma_module_progress(m);
    }
    return NULL;
}

/* What a test that stopped short saw, per connection of i to j. */
static void dump_conns(int i, int j)
{
    for (int p = 0; p < LLRDMA_NPATHS; ++p) {
        mca_btl_llrdma_conn_t *c = fw_conn(i, j, p);
        if (NULL == c) {
            printf("#  %d->%d path %d: no connection\n", i, j, p);
            continue;
        }
        printf("#  %d->%d path %d: state %d, %zu pending, sq %u/%u (unsignalled %u, owed %d), "
               "credit granted %u sent %llu seen %llu consumed %llu returned %llu word %llu owed "
               "%d, stalled %d, qp outstanding %u; module waiting %d, upcalls queued %u\n",
               i, j, p, (int)c->state, opal_list_get_size(&fw[i].ep[j]->pending[p]), c->sq.posted,
               c->sq.depth, c->sq.unsignalled, c->sq.owed, c->credit.granted,
               (unsigned long long)c->credit.sent, (unsigned long long)c->credit.seen,
               (unsigned long long)c->credit.consumed, (unsigned long long)c->credit.returned,
               (unsigned long long)c->credit_buf[0], c->credit_owed, 0 != c->stall_since,
               NULL != c->qp ? fake_qp_outstanding(c->qp) : 0, fw[i].m->waiting, fw[i].m->ndone);
        printf("#   module %d path %d: srq posted %u, cq waiting %u\n", i, p,
               fake_srq_posted(fw[i].m->path[p].srq), fake_cq_waiting(fw[i].m->path[p].rcq));
    }
}

/* Fragments counted on every path. */
static uint64_t frag_total(const llrdma_hist_t *h)
{
    uint64_t n = 0;
    for (int p = 0; p < LLRDMA_HIST_NPATHS; ++p) {
        for (int b = 0; b < LLRDMA_HIST_BUCKETS; ++b) {
            n += h->count[p][b];
        }
    }
    return n;
}

/* An MPI_T reader while the senders run: each read sums every module's
 * counts as they stand (each module's writer holds only its own lock; under
 * ThreadSanitizer a read racing a write fails the program), and the total
 * never goes down. */
static volatile int stop_reader;
static int reader_reads, reader_decreased;

static void *reader_main(void *arg)
{
    uint64_t last = 0;
    (void)arg;
    while (!__atomic_load_n(&stop_reader, __ATOMIC_ACQUIRE)) {
        llrdma_hist_t h;
        mca_btl_llrdma_hist_read(&h);
        reader_decreased += frag_total(&h) < last;
        last = frag_total(&h);
        ++reader_reads;
        usleep(50);
    }
    return NULL;
}

static void threads_case(int with_progress_thread)
{
    mca_btl_llrdma_component_t *c = &mca_btl_llrdma_component;
    mca_btl_llrdma_module_t *mods[2];
    pthread_t st[2 * NT], pt[2], rt;
    sender_t s[2 * NT];
    int total_fails = 0;
    llrdma_hist_t h;

    fw_begin();
    fake_lock_install();
    opal_set_using_threads(true); /* MPI_THREAD_MULTIPLE */
    mca_btl_llrdma_component.progress_thread = with_progress_thread;
    CHECK(0 == fw_add(4096, 16, 16)); /* shallow queues: sends wait, credits run out */
    mca_btl_llrdma_component.progress_thread = 0;
    CHECK(1 == fw_add(4096, 16, 16));
    fw_mesh();
    __atomic_store_n(&stop_progress, 0, __ATOMIC_RELEASE);
    /* The component lists the modules only for the reader (the two
     * processes' modules live in one here). */
    mods[0] = fw[0].m;
    mods[1] = fw[1].m;
    c->modules = mods;
    c->nmodules = 2;
    __atomic_store_n(&stop_reader, 0, __ATOMIC_RELEASE);
    reader_reads = reader_decreased = 0;
    pthread_create(&rt, NULL, reader_main, NULL);
    /* No connection yet: the senders' first messages set up both paths from
     * both sides at once. */
    for (int t = 0; t < 2 * NT; ++t) {
        s[t] = (sender_t){.i = t % 2, .j = 1 - t % 2, .cls = 2 * (t / 2)};
        pthread_create(&st[t], NULL, sender_main, &s[t]);
    }
    for (int i = 0; i < 2; ++i) {
        pthread_create(&pt[i], NULL, progress_main, (void *)(intptr_t)i);
    }
    for (int t = 0; t < 2 * NT; ++t) {
        pthread_join(st[t], NULL);
        total_fails += s[t].fails;
    }
    for (int r = 0;
         r < 100000 && (received_locked(1, 0) < NT * NMSG || received_locked(0, 1) < NT * NMSG);
         ++r) {
        usleep(100);
    }
    __atomic_store_n(&stop_progress, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; ++i) {
        pthread_join(pt[i], NULL);
    }
    __atomic_store_n(&stop_reader, 1, __ATOMIC_RELEASE);
    pthread_join(rt, NULL);
    /* Every message counted once, by the module that sent it; a read adds
     * what destroyed modules left in the component's histogram. */
    c->hist.count[LLRDMA_HIST_RDMA][0] = 5;
    mca_btl_llrdma_hist_read(&h);
    c->hist.count[LLRDMA_HIST_RDMA][0] = 0;
    CHECK(2 * NT * NMSG + 5 == frag_total(&h));
    for (int i = 0; i < 2; ++i) { /* sendi's sends in the small table, the rest in hist */
        llrdma_hist_t mh = fw[i].m->hist;
        llrdma_hist_small_fold(&mh, &fw[i].m->hist_small);
        CHECK(NT * NMSG == frag_total(&mh));
    }
    CHECK(reader_reads > 0 && 0 == reader_decreased);
    c->modules = NULL;
    c->nmodules = 0;
    CHECK(0 == total_fails);
    CHECK(NT * NMSG == received_locked(1, 0));
    CHECK(NT * NMSG == received_locked(0, 1));
    if (NT * NMSG != received_locked(1, 0) || NT * NMSG != received_locked(0, 1)) {
        printf("# stopped short (progress thread %s): %u of %d 0->1, %u of %d 1->0; progress "
               "token taken: %d %d\n",
               with_progress_thread ? "on" : "off", received_locked(1, 0), NT * NMSG,
               received_locked(0, 1), NT * NMSG, __atomic_load_n(&fw[0].m->progressing, 0),
               __atomic_load_n(&fw[1].m->progressing, 0));
        dump_conns(0, 1);
        dump_conns(1, 0);
    }
    for (int i = 0; i < 2; ++i) {
        CHECK(0 == fw[i].err_calls && 0 == fw[i].recv_bad);
        /* Exactly one connection per path survived the simultaneous set-up. */
        CHECK(mca_btl_llrdma_conn_up(fw_conn(i, 1 - i, LL)));
        CHECK(mca_btl_llrdma_conn_up(fw_conn(i, 1 - i, BW)));
        CHECK(fake_qp(fw_conn(i, 1 - i, LL)->qp)->peer == fake_qp(fw_conn(1 - i, i, LL)->qp));
        CHECK(fake_qp(fw_conn(i, 1 - i, BW)->qp)->peer == fake_qp(fw_conn(1 - i, i, BW)->qp));
    }
    MCA_BTL_LLRDMA_LOCK(fw[0].m); /* its progress thread still runs */
    printf("# threads (progress thread %s): %d messages each way; events on process 0: %llu "
           "for %llu BW completions\n",
           with_progress_thread ? "on" : "off", NT * NMSG, (unsigned long long)fw[0].m->events[BW],
           (unsigned long long)fw[0].m->completions[BW]);
    MCA_BTL_LLRDMA_UNLOCK(fw[0].m);
    fw_end(0);
    /* Destroying the modules merged their counts into the component's. */
    CHECK(2 * NT * NMSG == frag_total(&c->hist));
    opal_set_using_threads(false);
    memset(&mca_btl_llrdma_component.hist, 0, sizeof(mca_btl_llrdma_component.hist));
}

static void test_threads(void)
{
    threads_case(0);
    threads_case(1);
}

/* ------------------------------- callbacks that call another module */

/* ob1's ACK handler schedules over every BTL of the peer: a callback from
 * one module sends on another.  Here each relay message received on one
 * module is answered, from inside its callback, by a send on the other
 * module, while one thread progresses each module.  With a module lock held
 * across callbacks, thread X (in m0's callback, holding m0) waits for m1
 * while thread Y (in m1's callback, holding m1) waits for m0: a deadlock,
 * caught by the watchdog below, and reported by ThreadSanitizer as a
 * lock-order inversion even when the threads happen to miss each other. */
#define RELAY_TAG (FW_TAG + 1)
#define RELAY_CHAINS 8
#define RELAY_HOPS 300

typedef struct relay_msg {
    uint32_t magic, hops;
} relay_msg_t;

static size_t relay_size;
static int relay_received[2], relay_sent[2], relay_from_cb[2], relay_failed, relay_deferred;
static volatile int relay_stop;

/* Hops whose fragment could not be had yet, per sending process: a send
 * pool runs dry when the module's completions wait for its own progress
 * thread (descheduled on a loaded machine), and ob1 then queues the request
 * and retries from progress (mca_pml_ob1_process_pending); so does this. */
#define RELAY_WAIT_MAX (2 * RELAY_CHAINS)
static pthread_mutex_t relay_wait_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t relay_wait[2][RELAY_WAIT_MAX];
static int relay_nwait[2];

static int module_index(const struct mca_btl_base_module_t *btl)
{
    return &fw[0].m->super == btl ? 0 : 1;
}

/* From process `from` to the other one, on from's module. */
static int relay_send(int from, uint32_t hops)
{
    mca_btl_llrdma_module_t *m = fw[from].m;
    mca_btl_base_descriptor_t *d;
    relay_msg_t h = {.magic = FW_MAGIC, .hops = hops};
    int rc;

    d = m->super.btl_alloc(&m->super, fw[from].ep[1 - from], MCA_BTL_NO_ORDER, relay_size,
                           MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
    if (NULL == d) {
        return 1; /* no fragment now: retry from progress */
    }
    memset(d->des_segments[0].seg_addr.pval, 0x5a, relay_size);
    memcpy(d->des_segments[0].seg_addr.pval, &h, sizeof(h));
    d->des_cbfunc = NULL;
    rc = m->super.btl_send(&m->super, fw[from].ep[1 - from], d, RELAY_TAG);
    return OPAL_SUCCESS == rc || 1 == rc ? 0 : -1;
}

static void relay_hop(int from, uint32_t hops);

static void relay_upcall(struct mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                         const mca_btl_base_segment_t *segs, size_t nsegs, void *cbdata)
{
    int r = module_index(btl);
    relay_msg_t h;
    (void)tag;
    (void)nsegs;
    (void)cbdata;
    memcpy(&h, segs[0].seg_addr.pval, sizeof(h));
    __atomic_add_fetch(&relay_received[r], 1, __ATOMIC_RELAXED);
    if (FW_MAGIC != h.magic || segs[0].seg_len != relay_size) {
        __atomic_add_fetch(&relay_failed, 1, __ATOMIC_RELAXED);
        return;
    }
    if (h.hops > 0) {
        /* Received on module r (process r, from the other one): answer on
         * the other module, to process r. */
        relay_hop(1 - r, h.hops - 1);
    }
}
LLRDMA_BTL_RECV_ADAPTER(on_relay, relay_upcall)

/* Send one hop from process `from`, or keep it for relay_retry. */
static void relay_hop(int from, uint32_t hops)
{
    int rc = relay_send(from, hops);
    if (0 == rc) {
        __atomic_add_fetch(&relay_sent[from], 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&relay_from_cb[from], 1, __ATOMIC_RELAXED);
        return;
    }
    if (rc < 0) {
        __atomic_add_fetch(&relay_failed, 1, __ATOMIC_RELAXED);
        return;
    }
    pthread_mutex_lock(&relay_wait_lock);
    if (relay_nwait[from] < RELAY_WAIT_MAX) {
        relay_wait[from][relay_nwait[from]++] = hops;
        __atomic_add_fetch(&relay_deferred, 1, __ATOMIC_RELAXED);
    } else {
        /* More waiting hops than chains: the test is wrong. */
        __atomic_add_fetch(&relay_failed, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&relay_wait_lock);
}

/* The waiting hops of process `from`, until one cannot go yet.  Sent
 * without relay_wait_lock: a send may deliver upcalls. */
static void relay_retry(int from)
{
    for (;;) {
        uint32_t hops;
        int rc;
        pthread_mutex_lock(&relay_wait_lock);
        if (0 == relay_nwait[from]) {
            pthread_mutex_unlock(&relay_wait_lock);
            return;
        }
        hops = relay_wait[from][--relay_nwait[from]];
        pthread_mutex_unlock(&relay_wait_lock);
        rc = relay_send(from, hops);
        pthread_mutex_lock(&relay_wait_lock);
        if (1 == rc && relay_nwait[from] < RELAY_WAIT_MAX) {
            relay_wait[from][relay_nwait[from]++] = hops;
        } else if (0 == rc) {
            __atomic_add_fetch(&relay_sent[from], 1, __ATOMIC_RELAXED);
        } else {
            __atomic_add_fetch(&relay_failed, 1, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&relay_wait_lock);
        if (1 == rc) {
            return;
        }
    }
}

static void *relay_progress(void *arg)
{
    int i = (int)(intptr_t)arg;
    mca_btl_llrdma_module_t *m = fw[i].m;
    while (!__atomic_load_n(&relay_stop, __ATOMIC_ACQUIRE)) {
        (void)mca_btl_llrdma_module_progress(m);
        relay_retry(i); /* as ob1's progress retries what waited for resources */
    }
    return NULL;
}

/* Both paths established on both sides (data can arrive before the passive
 * side has seen its ESTABLISHED event). */
static int all_up(void)
{
    int up = 1;
    for (int i = 0; i < 2; ++i) {
        MCA_BTL_LLRDMA_LOCK(fw[i].m);
        up = up && mca_btl_llrdma_conn_up(fw_conn(i, 1 - i, LL)) &&
             mca_btl_llrdma_conn_up(fw_conn(i, 1 - i, BW));
        MCA_BTL_LLRDMA_UNLOCK(fw[i].m);
    }
    return up;
}

static void cross_module_case(size_t size, int with_progress_thread)
{
    const int want = 2 * RELAY_CHAINS * (RELAY_HOPS + 1);
    pthread_t pt[2];
    int got = 0;

    fw_begin();
    fake_lock_install();
    opal_set_using_threads(true);
    mca_btl_llrdma_component.progress_thread = with_progress_thread;
    CHECK(0 == fw_add(4096, 0, 0));
    CHECK(1 == fw_add(4096, 0, 0));
    mca_btl_llrdma_component.progress_thread = 0;
    fw_mesh();
    /* Both paths connected before the threads start. */
    for (int i = 0; i < 2; ++i) {
        CHECK(0 <= fw_send(i, 1 - i, 100, 0));
        CHECK(0 <= fw_send(i, 1 - i, 9000, 1));
    }
    /* Through the modules only (the seam's lock): their threads may run,
     * and hold the progress token while the machine deschedules them, so
     * the limit is time (30 s), not a count of calls that found it taken. */
    for (uint64_t t0 = mca_btl_llrdma_now_ms();
         (received_locked(1, 0) < 2 || received_locked(0, 1) < 2 || !all_up()) &&
         mca_btl_llrdma_now_ms() - t0 < 30000;) {
        fw_progress(1);
        usleep(50);
    }
    for (int i = 0; i < 2; ++i) {
        CHECK(mca_btl_llrdma_conn_up(fw_conn(i, 1 - i, LL)));
        CHECK(mca_btl_llrdma_conn_up(fw_conn(i, 1 - i, BW)));
    }
    relay_size = size;
    memset(relay_received, 0, sizeof(relay_received));
    memset(relay_sent, 0, sizeof(relay_sent));
    memset(relay_from_cb, 0, sizeof(relay_from_cb));
    memset(relay_nwait, 0, sizeof(relay_nwait));
    relay_failed = relay_deferred = 0;
    mca_btl_base_active_message_trigger[RELAY_TAG].cbfunc = on_relay;
    __atomic_store_n(&relay_stop, 0, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; ++i) {
        pthread_create(&pt[i], NULL, relay_progress, (void *)(intptr_t)i);
    }
    /* Chains in both directions: messages arrive on both modules, so both
     * threads call into the other module from a callback. */
    for (int c = 0; c < RELAY_CHAINS; ++c) {
        for (int i = 0; i < 2; ++i) {
            CHECK(0 == relay_send(i, RELAY_HOPS));
        }
    }
    /* A deadlock stops every relay; a loaded machine (4 spinning threads on
     * 2 CPUs next to a guest) only slows them: the verdict is 10 s without
     * one more relay, or 300 s in all. */
    for (uint64_t t0 = mca_btl_llrdma_now_ms(), moved = t0, now = t0;
         now - moved < 10000 && now - t0 < 300000; now = mca_btl_llrdma_now_ms()) {
        int n = __atomic_load_n(&relay_received[0], __ATOMIC_RELAXED) +
                __atomic_load_n(&relay_received[1], __ATOMIC_RELAXED);
        if (n >= want) {
            got = n;
            break;
        }
        if (n != got) {
            got = n;
            moved = now;
        }
        usleep(100);
    }
    if (got < want) {
        /* The threads hold each other's module: nothing can be joined. */
        printf("# cross-module callbacks (%zu bytes, progress thread %s): %d of %d relays "
               "received, none in the last 10 s (or 300 s in all): deadlock (%d hops failed, "
               "%d waiting for a fragment)\n",
               size, with_progress_thread ? "on" : "off", got, want,
               __atomic_load_n(&relay_failed, __ATOMIC_RELAXED), relay_nwait[0] + relay_nwait[1]);
        printf("FAIL: a callback that sends on another module deadlocked\n");
        fflush(stdout);
        _exit(1);
    }
    __atomic_store_n(&relay_stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; ++i) {
        pthread_join(pt[i], NULL);
    }
    /* A hop is counted after its send returns, possibly after its receiver
     * counted it, and the modules' own progress threads still run: read the
     * counters atomically, once the last counts have landed (10 s at most). */
    int sent[2], from_cb[2];
    for (int r = 0; r < 100000; ++r) {
        sent[0] = __atomic_load_n(&relay_sent[0], __ATOMIC_ACQUIRE);
        sent[1] = __atomic_load_n(&relay_sent[1], __ATOMIC_ACQUIRE);
        if (sent[0] + sent[1] >= 2 * RELAY_CHAINS * RELAY_HOPS) {
            break;
        }
        usleep(100);
    }
    for (int i = 0; i < 2; ++i) {
        from_cb[i] = __atomic_load_n(&relay_from_cb[i], __ATOMIC_ACQUIRE);
    }
    printf("# cross-module callbacks (%zu bytes, progress thread %s): %d relays, %d and %d sent "
           "as answers on modules 0 and 1 (%d waited for a fragment, as ob1 would)\n",
           size, with_progress_thread ? "on" : "off", got, sent[0], sent[1],
           __atomic_load_n(&relay_deferred, __ATOMIC_ACQUIRE));
    CHECK(want == got);
    CHECK(0 == __atomic_load_n(&relay_failed, __ATOMIC_ACQUIRE));
    /* Both directions ran: each module was called from the other's callback. */
    CHECK(RELAY_CHAINS * RELAY_HOPS == sent[0]);
    CHECK(RELAY_CHAINS * RELAY_HOPS == sent[1]);
    CHECK(from_cb[0] > RELAY_CHAINS * RELAY_HOPS / 2);
    CHECK(from_cb[1] > RELAY_CHAINS * RELAY_HOPS / 2);
    for (int i = 0; i < 2; ++i) {
        CHECK(0 == fw[i].err_calls);
    }
    /* After fw_end: the modules' progress threads read the table until they
     * stop (ThreadSanitizer saw the clear race with deliver); every chain
     * has ended, so nothing arrives meanwhile. */
    fw_end(0);
    mca_btl_base_active_message_trigger[RELAY_TAG].cbfunc = NULL;
    opal_set_using_threads(false);
    memset(&mca_btl_llrdma_component.hist, 0, sizeof(mca_btl_llrdma_component.hist));
}

static void test_cross_module_callbacks(void)
{
    cross_module_case(64, 0);   /* LL, inline */
    cross_module_case(9000, 0); /* BW: send completions too */
    cross_module_case(9000, 1); /* BW callbacks from the modules' progress threads */
}

/* ------------------------------------------------- failure injection */

static void test_fail_every_call(void)
{
    int points = 0;
    for (long at = 1; at < 1000; ++at) {
        int i;
        fw_begin();
        mca_btl_llrdma_component.progress_thread = 1;
        fake.fail_at = at;
        i = fw_add(4096, 0, 0);
        if (!fake.failed) {
            if (0 == i) {
                fw_end(1);
            }
            break; /* every call of creation has been failed once */
        }
        ++points;
        if (0 == i) {
            /* Survived the failure (a channel that could not be had leaves
             * the path polled, and says why). */
            CHECK(fw[0].m->thread_running || '\0' != fw[0].m->thread_why[0]);
        }
        fw_end(1);
        CHECK(0 == fake_live_objects());
    }
    printf("# %d failure points during creation with the progress thread\n", points);
    CHECK(points > 20);
    /* No channel at all: the module works, polled, and says why. */
    fw_begin();
    mca_btl_llrdma_component.progress_thread = 1;
    fake.comp_channel_fails = 1;
    CHECK(0 == fw_add(4096, 0, 0));
    CHECK(!fw[0].m->thread_running);
    CHECK(NULL != strstr(fw[0].m->thread_why, "ibv_create_comp_channel failed"));
    fw_end(0);
}

int main(int argc, char **argv)
{
    if (0 != fw_init(&argc, &argv)) {
        return 2;
    }
    test_fake_events();
    test_fake_moderation();
    test_progress_thread();
    test_threads();
    test_cross_module_callbacks();
    test_fail_every_call();
    fw_fini();
    printf("%s: %d checks, %d failed\n", 0 == fw_failures ? "PASS" : "FAIL", fw_checks,
           fw_failures);
    return 0 == fw_failures ? 0 : 1;
}
