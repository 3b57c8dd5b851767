/*
 * btl/llrdma asynchronous progress (btl_llrdma_progress_thread): one thread
 * per module sleeps on the bandwidth path's completion channel and, on an
 * event, polls that path's CQs, which runs ob1's callbacks (RDMA reads
 * finishing, rendezvous fragments, FINs), posts what waited for send slots
 * and looks after connection set-up and credits, all under the module lock,
 * while the application's threads compute.  The low-latency path is never
 * armed: the application's threads busy-poll it (docs/btl-design.md
 * "Threads").  Only when the application has not called progress for
 * btl_llrdma_progress_thread_ll_idle ms (it computes) does the thread poll
 * the LL path too, on that period: ob1's rendezvous headers and FINs are
 * small and travel there, so without it a transfer above the hint could
 * not start or end while the application computes.
 *
 * Event protocol (verbs): arm the CQ (ibv_req_notify_cq) when it is
 * created; on an event take it (ibv_get_cq_event), acknowledge it, re-arm,
 * then poll until empty, so a completion that arrives between the poll and
 * the re-arm still raises the next event.  CQ moderation (the profile's
 * count and period, ibv_modify_cq in module.c) decides how many completions
 * make one event; on a device without moderation (rxe) each armed
 * completion is one.
 */
#include "opal_config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "opal/util/output.h"

#include "btl_llrdma.h"

/* Batches of completions one wake-up takes before it lets the lock go. */
#define LLRDMA_THREAD_ROUNDS 64
/* While connections are set up or sends wait for credits (which arrive by
 * RDMA write, with no completion on this side), the thread looks every
 * this many ms instead of sleeping until an event. */
#define LLRDMA_THREAD_TICK_MS 1

void mca_btl_llrdma_thread_channel(mca_btl_llrdma_module_t *m)
{
    int flags;

    m->wake_fd = -1;
    m->thread_running = 0;
    if (!mca_btl_llrdma_component.progress_thread) {
        snprintf(m->thread_why, sizeof(m->thread_why), "btl_llrdma_progress_thread=0");
        return;
    }
    m->channel = mca_btl_llrdma_verbs.create_comp_channel(m->ctx);
    if (NULL == m->channel) {
        snprintf(m->thread_why, sizeof(m->thread_why), "ibv_create_comp_channel failed: %s",
                 strerror(errno));
        return;
    }
    /* get_cq_event must not block under the module lock. */
    flags = fcntl(m->channel->fd, F_GETFL);
    (void)fcntl(m->channel->fd, F_SETFL, flags | O_NONBLOCK);
    m->thread_why[0] = '\0';
}

void mca_btl_llrdma_thread_channel_destroy(mca_btl_llrdma_module_t *m)
{
    if (NULL != m->channel) {
        (void)mca_btl_llrdma_verbs.destroy_comp_channel(m->channel);
        m->channel = NULL;
    }
}

/* Take every event waiting, acknowledge and re-arm.  Module lock held. */
static int take_events(mca_btl_llrdma_module_t *m)
{
    struct ibv_cq *cq;
    void *ctx;
    int n = 0;

    while (0 == mca_btl_llrdma_verbs.get_cq_event(m->channel, &cq, &ctx)) {
        mca_btl_llrdma_verbs.ack_cq_events(cq, 1);
        mca_btl_llrdma_path_arm(m, LLRDMA_PATH_BW, cq);
        ++m->events[LLRDMA_PATH_BW];
        ++n;
    }
    return n;
}

/* The LL path, when the application has not progressed since the last
 * look (it computes).  Progress token held. */
static void poll_ll_if_idle(mca_btl_llrdma_module_t *m)
{
    uint64_t seen = __atomic_load_n(&m->app_progress, __ATOMIC_RELAXED);
    int n;

    if (seen != m->thread_seen) {
        m->thread_seen = seen; /* the application polls LL itself */
        return;
    }
    n = mca_btl_llrdma_module_poll_path(m, LLRDMA_PATH_LL, LLRDMA_THREAD_ROUNDS);
    MCA_BTL_LLRDMA_LOCK(m);
    m->thread_completions[LLRDMA_PATH_LL] += (uint64_t)n;
    MCA_BTL_LLRDMA_UNLOCK(m);
}

static void *progress_main(void *arg)
{
    mca_btl_llrdma_module_t *m = (mca_btl_llrdma_module_t *)arg;
    const int ll_idle = m->ll_idle_look ? mca_btl_llrdma_component.progress_thread_ll_idle_ms : 0;
    struct timespec cpu;

    for (;;) {
        /* CQ events, kicks, and connection events (a peer's request is
         * answered while the application computes). */
        struct pollfd fds[3] = {{.fd = m->channel->fd, .events = POLLIN},
                                {.fd = m->wake_fd, .events = POLLIN},
                                {.fd = m->cm_channel->fd, .events = POLLIN}};
        uint64_t kicks;
        int timeout, rc, stop, n;

        MCA_BTL_LLRDMA_LOCK(m);
        stop = m->thread_stop;
        timeout =
            m->connecting > 0 || m->retrying > 0 || m->waiting > 0 ? LLRDMA_THREAD_TICK_MS : -1;
        MCA_BTL_LLRDMA_UNLOCK(m);
        if (stop) {
            break; /* finalize */
        }
        if (ll_idle > 0 && (timeout < 0 || ll_idle < timeout)) {
            timeout = ll_idle;
        }
        rc = poll(fds, 3, timeout);
        if (rc < 0 && EINTR != errno) {
            opal_output(0, "btl:llrdma: %s:%d: the progress thread stops: poll failed: %s",
                        m->port.dev, m->port.port, strerror(errno));
            break;
        }
        if (rc > 0 && 0 != fds[1].revents) {
            (void)!read(m->wake_fd, &kicks, sizeof(kicks));
        }
        /* A wake-up on the idle timer alone costs the poll() and two CQ
         * polls (user space on rxe and mlx5): no system call for an event
         * channel or the CM unless their fds said so or set-ups, retries
         * or credit waits exist (measured: docs/benchmarks-softroce.md). */
        /* The application's progress holds the token for one pass at most
         * and never waits for it: wait here, yielding. */
        while (!mca_btl_llrdma_token_try(m)) {
            sched_yield();
        }
        MCA_BTL_LLRDMA_LOCK(m);
        if (rc > 0 && 0 != fds[0].revents) {
            (void)take_events(m);
        }
        MCA_BTL_LLRDMA_UNLOCK(m);
        n = mca_btl_llrdma_module_poll_path(m, LLRDMA_PATH_BW, LLRDMA_THREAD_ROUNDS);
        MCA_BTL_LLRDMA_LOCK(m);
        m->thread_completions[LLRDMA_PATH_BW] += (uint64_t)n;
        MCA_BTL_LLRDMA_UNLOCK(m);
        if (ll_idle > 0) {
            poll_ll_if_idle(m);
        }
        MCA_BTL_LLRDMA_LOCK(m);
        if ((rc > 0 && 0 != fds[2].revents) || m->connecting > 0 || m->retrying > 0 ||
            m->waiting > 0) {
            (void)mca_btl_llrdma_module_progress_control(m);
        }
        MCA_BTL_LLRDMA_UNLOCK(m);
        (void)mca_btl_llrdma_async_poll(m);
        (void)mca_btl_llrdma_done_run(m);
        mca_btl_llrdma_token_release(m);
        mca_btl_llrdma_done_kick(m);
    }
    /* What the thread cost, for the dump (RUSAGE_THREAD's clock). */
    if (0 == clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu)) {
        MCA_BTL_LLRDMA_LOCK(m);
        m->thread_cpu_us = (uint64_t)cpu.tv_sec * 1000000u + (uint64_t)cpu.tv_nsec / 1000u;
        MCA_BTL_LLRDMA_UNLOCK(m);
    }
    return NULL;
}

void mca_btl_llrdma_thread_start(mca_btl_llrdma_module_t *m)
{
    if (NULL == m->channel) {
        return;
    }
    m->thread_stop = 0;
    m->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m->wake_fd < 0) {
        snprintf(m->thread_why, sizeof(m->thread_why), "eventfd failed: %s", strerror(errno));
        return;
    }
    /* ob1's callbacks will run on the thread: Open MPI must take its locks
     * (as under MPI_THREAD_MULTIPLE; it never turns them off again). */
    if (!opal_using_threads()) { /* another module's thread may be reading it */
        opal_set_using_threads(true);
    }
    /* Set before the thread and the application's progress can read it. */
    m->ll_idle_look =
        m->path_used[LLRDMA_PATH_LL] && mca_btl_llrdma_component.progress_thread_ll_idle_ms > 0;
    if (0 != pthread_create(&m->thread, NULL, progress_main, m)) {
        snprintf(m->thread_why, sizeof(m->thread_why), "pthread_create failed");
        m->ll_idle_look = 0;
        close(m->wake_fd);
        m->wake_fd = -1;
        return;
    }
    m->thread_running = 1;
}

void mca_btl_llrdma_thread_stop(mca_btl_llrdma_module_t *m)
{
    struct ibv_cq *cq;
    void *ctx;
    uint64_t one = 1;

    if (m->thread_running) {
        MCA_BTL_LLRDMA_LOCK(m);
        m->thread_stop = 1;
        MCA_BTL_LLRDMA_UNLOCK(m);
        if (sizeof(one) != write(m->wake_fd, &one, sizeof(one))) {
            opal_output(0, "btl:llrdma: cannot wake the progress thread: %s", strerror(errno));
        }
        (void)pthread_join(m->thread, NULL);
        m->thread_running = 0;
    }
    if (m->wake_fd >= 0) {
        close(m->wake_fd);
        m->wake_fd = -1;
    }
    /* Events taken must be acknowledged before their CQ is destroyed. */
    while (NULL != m->channel && 0 == mca_btl_llrdma_verbs.get_cq_event(m->channel, &cq, &ctx)) {
        mca_btl_llrdma_verbs.ack_cq_events(cq, 1);
        ++m->events[LLRDMA_PATH_BW];
    }
}
