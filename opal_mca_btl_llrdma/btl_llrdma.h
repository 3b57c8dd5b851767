/*
 * btl/llrdma: RDMA BTL over rdma-core RC queue pairs whose transport profile
 * is fixed at start-up from the low-latency RDMA size hint (see
 * docs/btl-design.md).
 *
 * Each active verbs port becomes one module.  A module owns a protection
 * domain and, per path (low latency, bandwidth), a completion queue, a shared
 * receive queue with pre-posted buffers and a send fragment pool; the
 * endpoints' queue pairs are created lazily on first use over librdmacm.
 */
#ifndef MCA_BTL_LLRDMA_H
#define MCA_BTL_LLRDMA_H

#include "opal_config.h"

#include <netinet/in.h>
#include <pthread.h>
#include <unistd.h>

#include "opal/class/opal_hash_table.h"
#include "opal/mca/btl/base/base.h"
#include "opal/mca/btl/btl.h"
#include "opal/mca/rcache/rcache.h"
#include "llrdma_ompi_compat.h" /* opal_mutex_t */

#include "btl_llrdma_endpoint.h"
#include "btl_llrdma_frag.h"
#include "btl_llrdma_verbs.h"
#include "llrdma_btl_plan.h"
#include "llrdma_core.h"
#include "llrdma_hist.h"

BEGIN_C_DECLS

#define MCA_BTL_LLRDMA_MAX_PORTS 8

/* One usable (device, port), as discovery found it. */
typedef struct mca_btl_llrdma_port_t {
    char dev[64];
    int port;
    int link_layer; /* IBV_LINK_LAYER_INFINIBAND / _ETHERNET */
    int gid_index;  /* the GID whose address rdma_cm binds to */
    unsigned gid_type;
    struct in_addr ipv4;
    uint32_t max_cqe, max_srq_wr, max_qp_wr;
    int prefix_len;  /* netmask length of ipv4's interface; 0 unknown */
    char netdev[16]; /* that interface (IPoIB, or RoCE's Ethernet device); "" unknown */
    /* RDMA limits of the device and port, as ibv_query_device/port report them */
    uint32_t max_msg_sz;       /* largest RDMA work request */
    uint32_t max_rd_atom;      /* reads a QP answers at once (responder resources) */
    uint32_t max_init_rd_atom; /* reads a QP has outstanding (initiator depth) */
} mca_btl_llrdma_port_t;

/* Completion queues are never resized (ibv_resize_cq is optional).  A path
 * has one receive CQ as large as its SRQ (a receive completion needs a
 * posted buffer, so it cannot overrun whatever the windows promise) and one
 * send CQ whose room its connections share: a WR is posted only with room
 * for its completion (llrdma_sq_t.room), so a connection reserves nothing
 * and the CQs do not grow with peers. */
typedef struct mca_btl_llrdma_path_t {
    struct ibv_srq *srq;
    mca_btl_llrdma_pool_t recv_pool;
    mca_btl_llrdma_pool_t send_pool;
    uint32_t srq_depth;  /* capacity granted */
    llrdma_rq_pool_t rq; /* buffers posted and allotted to connections */
    uint32_t srq_armed;  /* SRQ limit armed now (0: none; the device disarms it on its event) */
    struct ibv_cq *rcq;  /* every receive of the path: srq_depth entries at least */
    struct ibv_cq *scq;  /* every send, put, get and credit write of the path */
    uint32_t scq_cqe;    /* its entries */
    uint32_t scq_room;   /* entries no posted WR may still need */
    /* 1 once a connection's QP exists on the path (never cleared): before
     * that its CQs cannot hold anything, and progress does not poll them.
     * Atomic: set under the module lock, read by progress without it. */
    int qp_made;
    int scq_starved;   /* a connection found no room: drain all once some is back */
    int cq_moderation; /* -1 not requested, 0 unsupported, 1 applied */
} mca_btl_llrdma_path_t;

typedef struct mca_btl_llrdma_module_t {
    mca_btl_base_module_t super;
    /* Threads (docs/btl-design.md "Threads"): `lock` guards everything of the
     * module but its endpoint list and is never held while ob1 is called:
     * what ob1 must hear (send and RDMA completions, errors) is queued on
     * `done` under it and delivered after it is released, received
     * fragments are handed up between two holds of it.  `progressing` lets
     * one thread at a time poll the CQs and deliver (in order); ob1's
     * threads only try it (none blocks on a callback running elsewhere),
     * the progress thread waits for it, yielding.  `ep_lock` guards the
     * endpoint list only and is a leaf.
     * Order: lock, then ep_lock.  Both are taken only when
     * opal_using_threads(). */
    opal_mutex_t lock;
    opal_mutex_t ep_lock;
    int progressing;          /* the progress token (btl_llrdma_done.c) */
    opal_list_t done;         /* upcalls to deliver once the lock is released */
    uint32_t ndone;           /* its length, read without the lock (atomic) */
    opal_process_name_t self; /* this process, as it names itself to peers */
    mca_btl_llrdma_port_t port;
    struct ibv_context *ctx; /* librdmacm's context for the device: not owned */
    struct ibv_pd *pd;
    int path_used[LLRDMA_NPATHS];
    mca_btl_llrdma_path_t path[LLRDMA_NPATHS];
    const llrdma_profile_t *profile;
    llrdma_btl_granted_t granted;
    uint32_t inline_req[LLRDMA_NPATHS]; /* max_inline_data the device accepted in a request */
    /* The path's QPs are created for the work-request API (the probe QP
     * was; btl_llrdma_wr_api), and why not when they are not. */
    int wr_api[LLRDMA_NPATHS];
    char wr_api_why[LLRDMA_NPATHS][64];
    llrdma_btl_limits_t lim;
    struct rdma_event_channel *cm_channel;
    struct rdma_cm_id *listen_id;
    mca_btl_llrdma_addr_t addr; /* what peers connect to (addr.secret: its secret) */
    uint64_t foreign_rejects;   /* connect requests without it, rejected (said once) */
    /* Sends posted with a completion to come: [0] ob1 hears at it, [1] done
     * for ob1 at post (the BTL's own copy; said at finalize, verbose 5). */
    uint64_t sends_done_at_post[2];
    /* Fragments larger than their peer receives, sent in pieces / joined
     * from pieces (peers with other hints; said at finalize, verbose 5). */
    uint64_t split_frags, joined_frags;
    /* Sends that started a wait for the batching point alone (a busy send
     * queue, btl_llrdma_sq_batch; said at finalize, verbose 5). */
    uint64_t sq_batched;
    opal_list_t endpoints;
    opal_hash_table_t by_name; /* jobid << 32 | vpid -> endpoint: lookups by name stay O(1) */
    opal_list_t conns;         /* every connection, live or closed, until finalize */
    opal_hash_table_t by_qp;   /* qp_num -> connection, for receive completions */
    uint32_t rx_qp_num;        /* the last lookup in by_qp (module lock) */
    struct mca_btl_llrdma_conn_t *rx_conn;
    int connecting; /* connections in set-up: poll the CM channel on every progress */
    int retrying;   /* connection retries scheduled */
    int waiting;    /* endpoints with fragments and no connection or no credits */
    unsigned cm_tick;
    /* btl_llrdma_stuck.c: when progress last moved anything */
    uint64_t moved_ms;          /* 0: moved since the last look at the clock */
    unsigned quiet_polls;       /* progress calls without an event since then */
    unsigned stuck_dumps;       /* state dumps printed since it last moved */
    unsigned wd_polls;          /* progress calls since the watchdog read the clock */
    uint64_t wd_look_ms;        /* when it last looked at the connections */
    uint64_t wd_nudges;         /* connections nudged (said at level 0 the first time) */
    uint64_t wd_rnr_waits;      /* limits reached with a send that may wait in RNR: not failed */
    uint64_t stuck_completions; /* completions[] summed at the last look (the thread's too) */
    /* connections' credit words (btl_llrdma_frag.c) */
    struct mca_btl_llrdma_cword_page_t *cword_pages;
    uint64_t *cword_free;
    /* RDMA (btl_llrdma_rdma.c): registrations through Open MPI's grdma cache */
    mca_rcache_base_module_t *rcache;
    opal_list_t rdma_free;           /* spare RDMA operation descriptors */
    uint64_t rdma_outstanding;       /* put/get queued or posted, not completed */
    uint32_t rd_atomic_req;          /* outstanding reads asked of each BW connection */
    uint32_t dest_rd_atomic_req;     /* reads each BW connection answers at once */
    uint32_t rd_atomic_granted;      /* smallest initiator depth a connection got; 0 none yet */
    uint32_t dest_rd_atomic_granted; /* smallest responder depth a connection got */
    /* GPU memory (btl_llrdma_gpu.c) */
    llrdma_gpu_mode_t gpu_mode;
    char gpu_report[160];   /* "dmabuf", "peermem", "none (why)"; why, when gpu_error */
    int gpu_error;          /* btl_llrdma_gpu_rdma forced a mode the device lacks */
    uint64_t gpu_buffer_id; /* of the device buffer being registered (for reg_mem_cb) */
    uint64_t gpu_regs;      /* GPU memory registrations made (cache misses), said at finalize */
    /* Completion events and the progress thread (btl_llrdma_thread.c) */
    struct ibv_comp_channel *channel; /* the BW path's CQs report here; NULL: polled only */
    char thread_why[96];              /* why there is no progress thread ("" when there is) */
    int wake_fd;                      /* eventfd that stops the thread; -1 none */
    int thread_running;
    int thread_stop; /* finalize asks the thread to end (under the lock) */
    pthread_t thread;
    uint64_t completions[LLRDMA_NPATHS]; /* work completions polled per path */
    uint64_t events[LLRDMA_NPATHS];      /* completion events taken per path */
    int ll_idle_look;      /* the thread looks at LL when the application is idle: set once */
    uint64_t app_progress; /* progress calls by the application (relaxed atomic) */
    uint64_t thread_seen;  /* app_progress at the thread's last look */
    uint64_t thread_completions[LLRDMA_NPATHS]; /* of completions[]: taken by the thread */
    uint64_t thread_cpu_us;                     /* the thread's CPU time, when it ended */
    /* This module's fragment sizes and send waits, written under its lock
     * only (llrdma_hist_add_sw: no atomic read-modify-write, no line shared
     * with another port's threads); read live by MPI_T
     * (mca_btl_llrdma_hist_read), merged into the component's at destroy. */
    llrdma_hist_t hist;
    int failed; /* a module-wide fatal error was reported */
    /* Asynchronous events (btl_llrdma_async.c) */
    unsigned async_polls;  /* progress calls since the last look */
    uint64_t async_events; /* events handled */
    int port_down;         /* IBV_EVENT_PORT_ERR: every connection failed, sends refused */
    int running;           /* creation finished: errors now go to ob1 */
    mca_btl_base_module_error_cb_fn_t error_cb;
    /* Errors found before the PML registered error_cb (the progress thread
     * runs from creation on): kept, under the lock, and queued for delivery
     * when it registers. */
    opal_list_t held;
    /* sendi's sends by exact size (llrdma_hist_small_add_sw: one increment
     * each), folded into `hist` where it is read.  Last: 16 KiB. */
    llrdma_hist_small_t hist_small;
} mca_btl_llrdma_module_t;

typedef struct mca_btl_llrdma_component_t {
    mca_btl_base_component_3_0_0_t super;

    /* MCA variables (registered in btl_llrdma_mca.c) */
    char *size_hint;     /* text; validated by the core, never by Open MPI */
    int size_hint_index; /* variable index, for source/file lookups */
    char *dump;          /* off | stderr | stdout | path pattern */
    int verbose;
    char *if_include; /* device[:port] list */
    char *if_exclude;
    char *device_policy; /* nearest | all | list (llrdma_nic.h) */
    char *devices;       /* policy list: device[:port] list */
    unsigned ovr_ll_sq_depth, ovr_bw_sq_depth, ovr_ll_inline, ovr_bw_signal;
    unsigned ovr_bw_cq_count, ovr_bw_cq_usec;
    int cm_timeout_ms;      /* rdma_cm address/route resolution */
    unsigned cm_poll_every; /* progress calls between CM polls when idle of set-ups */
    int connect_timeout_s;  /* a connection is retried this long before it fails */

    /* Fabric addressing (btl_llrdma_device.c) */
    int gid_index;      /* -1: choose; else this GID index on every RoCE port */
    char *roce_version; /* auto | 1 | 2 */

    /* Reliability and flow control (see docs/btl-design.md) */
    unsigned min_rnr_timer;    /* IB encoding 0..31 */
    unsigned rnr_retry;        /* 0..7, 7 = forever */
    unsigned retry_count;      /* transport retries, 0..7 */
    unsigned ack_timeout;      /* IB encoding 1..31; 0 = rdma_cm's choice */
    size_t recv_mem_max;       /* bytes of receive buffers per path before allotments shrink */
    int stall_warn_ms;         /* a peer without credits this long is reported (verbose 1) */
    int completion_timeout_ms; /* no completion this long fails the peer; 0 derived, -1 never */
    int coalesce;              /* pack messages behind a queued fragment (docs/btl-design.md) */
    int sq_batch;              /* past half a send queue, sends wait for its next completion */
    int wr_api;                /* sendi's inline post by ibv_wr_* where the provider has it */
    int progress_thread;       /* a thread per module sleeps on the BW CQs' events */
    int progress_thread_ll_idle_ms; /* the thread polls LL after this long without progress */
    char *fork_safe;                /* auto | yes | no */
    char *rdma;                     /* get | put | off: ob1's RDMA protocol (btl_llrdma_rdma.c) */
    char *gpu_rdma;                 /* auto | dmabuf | peermem | off (btl_llrdma_gpu.c) */

    int output;                  /* opal_output stream for verbose messages */
    llrdma_rank_config_t config; /* what took effect on this rank */
    /* Fragment sizes, send waits and CQ counts of the modules already
     * destroyed (llrdma_hist.h): the final dump; MPI_T adds the live ones. */
    llrdma_hist_t hist;

    int nports;
    mca_btl_llrdma_port_t ports[MCA_BTL_LLRDMA_MAX_PORTS];
    int nmodules;
    mca_btl_llrdma_module_t **modules;
} mca_btl_llrdma_component_t;

LLRDMA_MODULE_DECLSPEC extern mca_btl_llrdma_component_t mca_btl_llrdma_component;

/* The counts so far: destroyed modules' and the live ones' (MPI_T). */
void mca_btl_llrdma_hist_read(llrdma_hist_t *out);

#define MCA_BTL_LLRDMA_LOCK(m) OPAL_THREAD_LOCK(&(m)->lock)
#define MCA_BTL_LLRDMA_UNLOCK(m) OPAL_THREAD_UNLOCK(&(m)->lock)

/* Template for every module; its limits are registered as btl_llrdma_* too. */
extern mca_btl_base_module_t mca_btl_llrdma_module_template;

/* btl_llrdma_mca.c */
int mca_btl_llrdma_register_params(void);

/* btl_llrdma_device.c: fill component.ports and cfg->device / ndevices /
 * btl_status from the verbs devices this rank may use.  Returns the number
 * of usable ports. */
int mca_btl_llrdma_discover(llrdma_rank_config_t *cfg);
/* Where btl_llrdma_<name> got its value, for error messages: "default",
 * "environment (OMPI_MCA_btl_llrdma_<name>; ...)", "file PATH:LINE", ... */
void mca_btl_llrdma_var_origin(const char *name, char *buf, size_t len);
/* Stop MPI_Init: "btl_llrdma_<name> = <value> (from <origin>): <why>". */
void mca_btl_llrdma_bad_knob(const char *name, const char *value, const char *why);
/* btl_llrdma_mca.c: range checks of the numeric connection knobs (a bad
 * value stops MPI_Init, naming it and where it came from). */
void mca_btl_llrdma_check_params(void);

/* btl_llrdma_fork.c: apply btl_llrdma_fork_safe and record the outcome in
 * cfg->fork_safe.  Must run before any other verbs call of the process
 * (ibv_fork_init fails once memory was registered).  A bad value, or a
 * failure with "yes", stops MPI_Init with a message. */
void mca_btl_llrdma_fork_setup(llrdma_rank_config_t *cfg);

/* btl_llrdma_module.c */
int mca_btl_llrdma_module_create(const mca_btl_llrdma_port_t *port, const llrdma_profile_t *prof,
                                 mca_btl_llrdma_module_t **out);
/* Record in `dev` what this module's device granted; returns how many
 * profile values could not be applied as requested (and writes why to
 * `why`). */
int mca_btl_llrdma_module_granted(const mca_btl_llrdma_module_t *m, llrdma_device_info_t *dev,
                                  char *why, size_t whylen);
int mca_btl_llrdma_module_progress(mca_btl_llrdma_module_t *m);
/* btl_llrdma_path.c: a path's CQs, SRQ and pools.  Create (and on failure
 * nothing is left), probe what a QP of the path is granted, destroy. */
int mca_btl_llrdma_path_create(mca_btl_llrdma_module_t *m, int p);
int mca_btl_llrdma_path_probe(mca_btl_llrdma_module_t *m, int p);
void mca_btl_llrdma_path_destroy(mca_btl_llrdma_module_t *m, int p);
/* Give one more connection on its path its receive allotment (posting
 * buffers as needed).  Fills conn->allot; OPAL_ERR_OUT_OF_RESOURCE with
 * `why` when it cannot be had. */
int mca_btl_llrdma_path_reserve(mca_btl_llrdma_module_t *m, struct mca_btl_llrdma_conn_t *conn,
                                char *why, size_t whylen);
/* Return it when the connection goes. */
void mca_btl_llrdma_path_release(mca_btl_llrdma_module_t *m, struct mca_btl_llrdma_conn_t *conn);
/* IBV_EVENT_SRQ_LIMIT_REACHED on `srq`: grow that path's pool toward its
 * budget and re-arm (module lock held). */
void mca_btl_llrdma_path_srq_low(mca_btl_llrdma_module_t *m, struct ibv_srq *srq);
/* Give n receive buffers back to the path's shared receive queue in one
 * chained post; *posted: how many of them were (all, unless it failed). */
int mca_btl_llrdma_path_repost(mca_btl_llrdma_module_t *m, int path,
                               mca_btl_llrdma_frag_t *const *frags, int n, int *posted);
/* QP attributes for a path (shared by the probe QP and real connections). */
void mca_btl_llrdma_path_qp_attr(const mca_btl_llrdma_module_t *m, int path,
                                 struct ibv_qp_init_attr *attr);
/* The same for a QP sendi posts to by the work-request API (a SEND). */
void mca_btl_llrdma_path_qp_attr_ex(const mca_btl_llrdma_module_t *m, int path,
                                    struct ibv_qp_init_attr_ex *attr);
/* Arm a BW CQ for its next event on the module's channel (the progress
 * thread's); LL CQs are never armed. */
void mca_btl_llrdma_path_arm(mca_btl_llrdma_module_t *m, int p, struct ibv_cq *cq);
static inline const char *mca_btl_llrdma_path_name(int p)
{
    return LLRDMA_PATH_LL == p ? "ll" : "bw";
}
static inline const llrdma_path_profile_t *
mca_btl_llrdma_path_profile(const mca_btl_llrdma_module_t *m, int p)
{
    return LLRDMA_PATH_LL == p ? &m->profile->ll : &m->profile->bw;
}
/* Free slots of a connection's send queue, within its path's send-CQ room;
 * notes a connection held by the room alone, so that the path's next
 * completions drain every endpoint (module lock held).  Inline: every send
 * asks. */
static inline uint32_t mca_btl_llrdma_conn_slots(struct mca_btl_llrdma_conn_t *conn)
{
    uint32_t slots = llrdma_sq_free_slots(&conn->sq);
    if (0 == slots && conn->sq.posted < conn->sq.depth) {
        conn->endpoint->module->path[conn->path].scq_starved = 1;
    }
    return slots;
}

/* Whether conn's send queue is at its batching point (btl_llrdma_sq_batch):
 * a send then waits for the queue's next completion instead of going alone. */
static inline int mca_btl_llrdma_conn_batching(const struct mca_btl_llrdma_conn_t *conn)
{
    return conn->sq.posted >= mca_btl_llrdma_conn_batch_at(conn, mca_btl_llrdma_component.sq_batch);
}

/* Whether a message of `bytes` may be posted on path p of `ep` now:
 * connected, nothing queued ahead, a send slot below the batching point
 * (btl_llrdma_sq_batch), and a credit above its pack floor (sendi's full
 * lane and its out-of-line path ask this). */
static inline int mca_btl_llrdma_endpoint_post_now(mca_btl_llrdma_endpoint_t *ep, int p,
                                                   struct mca_btl_llrdma_conn_t *conn, size_t bytes)
{
    return mca_btl_llrdma_conn_up(conn) && opal_list_is_empty(&ep->pending[p]) &&
           mca_btl_llrdma_conn_slots(conn) > 0 && !mca_btl_llrdma_conn_batching(conn) &&
           mca_btl_llrdma_conn_credits(conn) >
               mca_btl_llrdma_conn_pack_floor(conn, mca_btl_llrdma_component.coalesce,
                                              ep->frag_max[p], bytes);
}

/* btl_llrdma_progress.c: poll path p's CQs until they are empty (or
 * `rounds` batches); the caller holds the progress token, not the lock.
 * Returns completions. */
int mca_btl_llrdma_module_poll_path(mca_btl_llrdma_module_t *m, int p, int rounds);
/* Connection set-up, retries and credit waits (progress minus the CQs);
 * module lock held (upcalls it causes are queued). */
int mca_btl_llrdma_module_progress_control(mca_btl_llrdma_module_t *m);

/* btl_llrdma_thread.c: the completion channel (before the BW CQs exist),
 * the thread (once the module is complete), and stopping it (before the
 * CQs go).  A channel or thread that cannot be had leaves the path polled,
 * with the reason in m->thread_why. */
void mca_btl_llrdma_thread_channel(mca_btl_llrdma_module_t *m);
void mca_btl_llrdma_thread_start(mca_btl_llrdma_module_t *m);
void mca_btl_llrdma_thread_stop(mca_btl_llrdma_module_t *m);
/* Wake the thread to look again (sends now wait for credits, a retry was
 * scheduled): those come without a CQ or CM event.  Inline: the post path
 * and connection set-up call it, below the thread's file. */
static inline void mca_btl_llrdma_thread_kick(mca_btl_llrdma_module_t *m)
{
    uint64_t one = 1;
    if (m->thread_running) {
        (void)!write(m->wake_fd, &one, sizeof(one));
    }
}
void mca_btl_llrdma_thread_channel_destroy(mca_btl_llrdma_module_t *m);

/* btl_llrdma_done.c: the upcall queue and the progress token.  Queueing
 * happens under the module lock; delivery with no lock held, by the token's
 * holder, in the order queued.  A send fragment is queued only when ob1
 * asked for its callback (else it goes back to its pool at once); an RDMA
 * operation always (ob1's completion function, then the descriptor is
 * recycled); an error with its text (ob1's error callback). */
void mca_btl_llrdma_done_frag(mca_btl_llrdma_module_t *m, mca_btl_llrdma_frag_t *frag, int status);
struct mca_btl_llrdma_rdma_op_t;
void mca_btl_llrdma_done_rdma(mca_btl_llrdma_module_t *m, struct mca_btl_llrdma_rdma_op_t *op,
                              int status);
/* Queue one item (a fragment, an operation or an error) under the lock. */
static inline void mca_btl_llrdma_done_queue(mca_btl_llrdma_module_t *m, opal_list_item_t *item)
{
    opal_list_append(&m->done, item);
    __atomic_store_n(&m->ndone, m->ndone + 1, __ATOMIC_RELEASE);
}

/* btl_llrdma_fatal.c: an error for ob1's error callback, queued like the
 * rest; `proc` retained (NULL: the module as a whole). */
typedef struct mca_btl_llrdma_err_t {
    opal_list_item_t super;
    opal_proc_t *proc;
    char *detail;
} mca_btl_llrdma_err_t;
OBJ_CLASS_DECLARATION(mca_btl_llrdma_err_t);
void mca_btl_llrdma_done_error(mca_btl_llrdma_module_t *m, opal_proc_t *proc, const char *detail);
/* A fatal error of the module not tied to one peer (or with `proc` named): report it once
 * and hand it to ob1's error callback. */
void mca_btl_llrdma_module_fatal(mca_btl_llrdma_module_t *m, opal_proc_t *proc, const char *detail);
/* Deliver what is queued (token held, lock not held); returns how many. */
int mca_btl_llrdma_done_run(mca_btl_llrdma_module_t *m);
/* After an entry that may have queued upcalls (lock released): deliver
 * them when no other thread progresses the module (it will, else). */
void mca_btl_llrdma_done_kick(mca_btl_llrdma_module_t *m);
/* Finalize: drop what was never delivered (ob1 is gone). */
void mca_btl_llrdma_done_drop(mca_btl_llrdma_module_t *m);
int mca_btl_llrdma_token_try(mca_btl_llrdma_module_t *m);
void mca_btl_llrdma_token_release(mca_btl_llrdma_module_t *m);
static inline int mca_btl_llrdma_done_pending(mca_btl_llrdma_module_t *m)
{
    return 0 != __atomic_load_n(&m->ndone, __ATOMIC_ACQUIRE);
}

/* btl_llrdma_async.c: read the device's asynchronous events (every 256th
 * call) and handle each in the module it names, under that module's lock;
 * the caller holds m's progress token and no lock.  Returns how many were
 * handled. */
int mca_btl_llrdma_async_poll(mca_btl_llrdma_module_t *m);

/* btl_llrdma_stuck.c: called by every progress pass (moved: it did
 * something); prints the module's per-endpoint state at verbose level 1 when
 * work is outstanding and nothing has moved for btl_llrdma_stall_warn ms. */
void mca_btl_llrdma_stuck_check(mca_btl_llrdma_module_t *m, int moved);
void mca_btl_llrdma_stuck_dump(mca_btl_llrdma_module_t *m, uint64_t quiet_ms, int busy);
/* The completion watchdog (every progress call, under the module lock). */
void mca_btl_llrdma_wd_check(mca_btl_llrdma_module_t *m);
/* The completion watchdog's limit for a connection whose QP went to RTS with
 * this ACK timeout (IB encoding) and retry count; 0: not watched. */
uint64_t mca_btl_llrdma_wd_limit_ms(unsigned qp_timeout, unsigned qp_retry);
/* When the watchdog nudges such a connection (one WR more, see
 * mca_btl_llrdma_conn_nudge): after the retry budget, at most half the limit. */
uint64_t mca_btl_llrdma_wd_nudge_ms(unsigned qp_timeout, unsigned qp_retry, uint64_t limit_ms);

/* btl_llrdma_rdma.c: registration, put/get/flush (docs/btl-design.md "RDMA"). */
void mca_btl_llrdma_rdma_init(mca_btl_llrdma_module_t *m);
void mca_btl_llrdma_rdma_fini(mca_btl_llrdma_module_t *m);

/* The endpoint after `prev` in the module's list (the first when prev is
 * NULL; NULL at the end).  Endpoints are removed only at finalize, so a
 * walk that holds the module lock (not the list's) stays valid. */
mca_btl_llrdma_endpoint_t *mca_btl_llrdma_endpoint_next(mca_btl_llrdma_module_t *m,
                                                        mca_btl_llrdma_endpoint_t *prev);
/* Endpoint lookup by process name, creating it for a connection request from
 * a process ob1 has not added (yet). */
mca_btl_llrdma_endpoint_t *mca_btl_llrdma_endpoint_lookup(mca_btl_llrdma_module_t *m,
                                                          const opal_process_name_t *name,
                                                          int create);

END_C_DECLS
#endif
