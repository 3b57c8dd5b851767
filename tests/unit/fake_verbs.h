/*
 * A fake verbs device behind btl/llrdma's seam (btl_llrdma_verbs.h) for unit
 * tests.  Objects are heap structs; the device enforces what a real one does
 * and records every violation so a test can assert that none happened:
 *
 * - send queue capacity per QP (max_send_wr): a post beyond the WRs not yet
 *   retired fails with ENOMEM (as mlx5).  A WR is retired when a completion
 *   of it or of a later signalled WR of the same QP has been polled;
 * - shared receive queue capacity (max_wr): post_srq_recv beyond fails;
 * - completion queue capacity: a completion that finds its CQ full is an
 *   overrun (a real device raises IBV_EVENT_CQ_ERR); it is recorded and lost;
 * - max_inline_data: IBV_SEND_INLINE above the QP's granted size fails
 *   with EINVAL;
 * - posting on a QP that is not connected fails with EINVAL;
 * - memory keys: local SGEs must lie in a registered MR; an RDMA write needs
 *   a remote MR with IBV_ACCESS_REMOTE_WRITE covering the range, an RDMA
 *   read one with IBV_ACCESS_REMOTE_READ (else IBV_WC_REM_ACCESS_ERR) and
 *   local SGEs with IBV_ACCESS_LOCAL_WRITE (else IBV_WC_LOC_PROT_ERR); a
 *   SEND larger than the receive buffer fails;
 * - RDMA reads need outstanding-read depth on both QPs (max_rd_atomic of
 *   the reader, max_dest_rd_atomic of the responder, as rdma_cm set them
 *   from the connection parameters; else IBV_WC_REM_INV_REQ_ERR); a
 *   connection parameter above the device's max_qp_(init_)rd_atom fails
 *   rdma_connect/rdma_accept with EINVAL, and an accept asking more than
 *   the request offered is a fault; a work request above the port's
 *   max_msg_sz fails with IBV_WC_LOC_LEN_ERR;
 * - receiver not ready: a SEND that finds no buffer in the peer's SRQ is an
 *   RNR event; the WR is held and retried (rnr_retry 7) or fails with
 *   IBV_WC_RNR_RETRY_EXC_ERR once the QP's rnr_retry count is used up;
 * - ibv_modify_qp to IBV_QPS_ERR (from any state) flushes every WR not
 *   completed yet with IBV_WC_WR_FLUSH_ERR at once, the wire held or not.
 *
 * rdma_cm is emulated (fake_rdmacm.c) between the modules of one process: listeners are
 * found by (address, port); rdma_connect delivers a connection request to
 * the listener's channel, rdma_accept/rdma_reject answer it (private data
 * included), the two QPs are wired together and a SEND consumes a buffer of
 * the peer QP's SRQ (bytes copied, a receive completion with byte_len and
 * qp_num on the peer's receive CQ).  Work requests execute on "the wire",
 * which runs at every poll_cq (or fake_pump), not at post time.
 *
 * Failure injection: the Nth seam call (counted over every entry) fails
 * when fake.fail_at == N.  Teardown entries never fail.
 */
#ifndef FAKE_VERBS_H
#define FAKE_VERBS_H

#include "btl_llrdma_verbs.h"

#define FAKE_MAX_WR 4096 /* entries of the post logs (a ring) */
#define FAKE_MAX_EV 256  /* events per channel */
#define FAKE_MAX_SGE 4

/* One posted send WR, as logged. */
typedef struct fake_wr {
    struct ibv_qp *qp;
    uint64_t wr_id;
    uint32_t length; /* all SGEs */
    unsigned flags;  /* IBV_SEND_* */
    enum ibv_wr_opcode opcode;
    void *addr; /* first SGE */
    uint64_t remote_addr;
    uint32_t rkey;
} fake_wr_t;

typedef struct fake_cqe {
    struct ibv_wc wc;
    struct fake_qp *qp; /* NULL: injected by the test */
    uint64_t seq;       /* send completions: the WR's position in its QP */
    int is_send;
} fake_cqe_t;

typedef struct fake_cq {
    struct ibv_cq cq;
    fake_cqe_t *e;
    uint32_t cap, head, count;
    uint32_t high; /* most completions ever waiting at once */
    int moderated; /* ibv_modify_cq applied */
    uint16_t mod_count, mod_period;
    /* completion events (fake_events.c) */
    struct fake_channel *channel; /* NULL: created without one */
    int armed;                    /* ibv_req_notify_cq since the last event */
    uint32_t since_arm;           /* completions since it was armed */
    uint64_t first_ns;            /* when the first of them came (moderation period) */
    uint32_t unacked;             /* events taken with get_cq_event, not acknowledged */
    uint64_t events;              /* events generated */
} fake_cq_t;

typedef struct fake_rwr {
    uint64_t wr_id;
    struct ibv_sge sge;
} fake_rwr_t;

typedef struct fake_srq {
    struct ibv_srq srq;
    uint32_t max_wr; /* granted */
    fake_rwr_t *q;
    uint32_t head, count;
    uint32_t low; /* fewest buffers ever posted once the first was taken */
    int used;
    uint32_t limit; /* armed SRQ limit, 0 = none (fires once, then 0 again) */
} fake_srq_t;

typedef struct fake_swr {
    uint64_t wr_id;
    enum ibv_wr_opcode opcode;
    unsigned flags;
    uint32_t length;
    int num_sge;
    struct ibv_sge sge[FAKE_MAX_SGE];
    unsigned char *inl; /* IBV_SEND_INLINE: the bytes, copied at post */
    uint64_t remote_addr;
    uint32_t rkey;
    int rnr_tries;
} fake_swr_t;

typedef struct fake_qp {
    struct ibv_qp qp;
    struct ibv_qp_init_attr attr; /* as granted */
    struct fake_qp *peer;         /* the connected QP; NULL when gone */
    struct fake_qp *next;         /* live QPs */
    int rts;                      /* connected: posts allowed */
    int error;                    /* error state: every WR flushes */
    enum ibv_wc_status fail_next; /* test: the next WR executed ends so */
    int rnr_retry;                /* 7 = forever */
    int retry_count;
    int min_rnr_timer; /* -1: never set with ibv_modify_qp */
    int ack_timeout;   /* as rdma_cm set it: the id's option, else rdma_cm's 18 */
    fake_swr_t *sq;
    uint64_t head, exec, tail; /* oldest not retired, next to run, next free */
    uint64_t sends_done, recvs_done, writes_done, reads_done;
    uint32_t max_rd_atomic, max_dest_rd_atomic; /* set by rdma_cm from the parameters */
    int ex; /* created for ibv_wr_send (send_ops_flags): qpx is its handle */
    struct ibv_qp_ex qpx;
    int wr_open;                /* inside ibv_wr_start .. wr_complete */
    int wr_built;               /* 1: wr_send called, 2: and its inline data */
    int wr_err;                 /* what wr_complete will return */
    struct ibv_send_wr wr_pend; /* the WR being built */
    struct ibv_sge wr_sge;
} fake_qp_t;

typedef struct fake_state {
    /* failure injection */
    long calls;   /* seam calls so far */
    long fail_at; /* 0: never */
    int failed;   /* the injected failure happened */
    const char *failed_fn;
    /* device behaviour (set after fake_install) */
    uint32_t max_inline;     /* create_qp fails above this */
    uint32_t inline_grant;   /* 0: grant what was asked */
    uint32_t max_qp_wr;      /* create_qp fails above this */
    uint32_t max_srq_wr;     /* create_srq grants at most this */
    uint32_t max_cqe;        /* create_cq fails above this */
    int modify_cq_supported; /* else EOPNOTSUPP */
    uint32_t max_rd_atom;    /* device max_qp_rd_atom = max_qp_init_rd_atom */
    uint32_t max_msg_sz;     /* port max_msg_sz */
    /* GPU memory: dma-buf MRs 0 none (EOPNOTSUPP), 1 yes (fd -1: EBADF, fd >= 0
     * registers), 2 none (EPROTONOSUPPORT); peermem module loaded */
    int dmabuf, peermem;
    int ndmabuf_mrs;           /* dma-buf MRs registered */
    uint64_t last_iova;        /* of the last one */
    uint64_t last_dmabuf_size; /* the size of its fd (lseek SEEK_END, as the kernel sees it) */
    char last_dmabuf_link[64]; /* what /proc/self/fd/N names */
    int post_send_errno;       /* nonzero: every post_send and ibv_wr_complete fails with it */
    int no_wr_api;             /* the provider has no ibv_wr_* API: create_qp_ex fails */
    int qp_ex_errno;           /* nonzero: create_qp_ex fails with it (a provider's own refusal) */
    int nqp_ex_calls;          /* create_qp_ex calls, failed or not */
    int qp_errno;              /* nonzero: create_qp fails with it */
    int nqp_calls;             /* create_qp calls, failed or not */
    int port_state;            /* nonzero: query_port reports this enum ibv_port_state */
    int port_down_after;       /* nonzero: that many more queries see ACTIVE, then DOWN
                                  (a port whose state lags its failed work, as rxe's) */
    int route_unreachable;     /* rdma_resolve_route ends in UNREACHABLE */
    int refuse_connects;       /* the next n rdma_connect find no listener */
    int wire_hold;             /* posted WRs wait until cleared */
    int cm_hold;               /* CM messages between processes wait for fake_cm_deliver */
    int srq_fail_wr;           /* n > 0: the next post_srq_recv fails at its n-th WR (ENOMEM,
                                *bad = it), as a chain that fills a real SRQ midway */
    /* what the BTL did */
    fake_wr_t sends[FAKE_MAX_WR];
    int nsends;
    int nsend_posts;             /* post_send calls that got through to the wire (a chain is one),
                                    and ibv_wr_complete calls */
    int nwr_posts;               /* ibv_wr_complete calls that got through */
    uint64_t recvs[FAKE_MAX_WR]; /* wr_ids posted to any SRQ */
    int nrecvs;
    struct ibv_qp_init_attr last_qp_attr;
    int nreads, nwrites; /* RDMA reads and writes executed */
    int nqp_created;
    int nconnects, naccepts, nrejects, nmodify_qp;
    int nerr_qp; /* QPs moved to the error state with ibv_modify_qp */
    /* limits the device enforced (a correct BTL never hits one) */
    int sq_overflows;     /* post_send beyond max_send_wr (ENOMEM) */
    int srq_overflows;    /* post_srq_recv beyond max_wr (ENOMEM) */
    int inline_overflows; /* IBV_SEND_INLINE above the granted size (EINVAL) */
    int bad_posts;        /* other rejected posts (not connected, opcode, SGEs) */
    int cq_overruns;      /* a completion found its CQ full */
    int rnr_events;       /* SENDs that found no receive buffer (once per WR) */
    int rnr_naks;         /* every attempt that found none */
    int access_errors;    /* RDMA write or read with a bad rkey, range or access */
    int rd_atomic_errors; /* RDMA read on a QP pair without read depth */
    int len_errors;       /* SEND larger than the receive buffer */
    int prot_errors;      /* local SGE outside a registered MR */
    int misuse;           /* destroying an object still in use, ... */
    char last_fault[256]; /* what the last of these was */
    /* live objects, for leak checks */
    int live_pd, live_mr, live_cq, live_srq, live_qp, live_id, live_channel, live_event;
    int live_comp_channel;
    /* completion events */
    uint64_t nevents;       /* generated on any CQ */
    uint64_t narms;         /* ibv_req_notify_cq calls */
    int comp_channel_fails; /* test: the next n create_comp_channel fail */
    /* asynchronous events (fake_push_async) */
    int live_async;     /* taken with get_async_event, not acknowledged */
    int async_taken;    /* taken in all */
    int async_overflow; /* pushed while the queue was full (a test error) */
} fake_state_t;

extern fake_state_t fake;

/* The fake's entries (a test may wrap one in mca_btl_llrdma_verbs). */
extern mca_btl_llrdma_verbs_ops_t fake_ops;

/* Reset the state and install the fake table. */
void fake_install(void);
void fake_uninstall(void);
int fake_live_objects(void);
/* Every enforced limit or fault the BTL ran into (0 for a correct BTL);
 * RNR events count.  Failures injected with fail_at do not. */
int fake_faults(void);

/* Run the wire: execute posted WRs.  Returns how many ran. */
int fake_pump(void);
/* Queue a completion on a CQ (no QP behind it); poll_cq returns it. */
void fake_push_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status, uint32_t byte_len,
                  uint32_t qp_num, enum ibv_wc_opcode opcode);
/* The next WR executed on `qp` completes with `status` and the QP enters
 * the error state (later WRs flush), as when the peer stops answering. */
void fake_qp_fail(struct ibv_qp *qp, enum ibv_wc_status status);
/* Wire two QPs together (ready to send), outside rdma_cm. */
void fake_connect_pair(struct ibv_qp *a, struct ibv_qp *b);
/* A SEND from a raw peer arriving on `qp`: consumes a buffer of its SRQ.
 * Returns 0, or -1 when no buffer was posted (an RNR event). */
int fake_inject_recv(struct ibv_qp *qp, const void *data, uint32_t len);
uint32_t fake_srq_posted(struct ibv_srq *srq);
uint32_t fake_cq_waiting(struct ibv_cq *cq);
/* Send WRs posted on `qp` and not retired yet. */
uint32_t fake_qp_outstanding(struct ibv_qp *qp);
static inline fake_qp_t *fake_qp(struct ibv_qp *qp)
{
    return (fake_qp_t *)qp;
}

/* CM messages held in flight (fake.cm_hold), and delivering them: the
 * oldest one to the `which`-th destination channel among them (modulo their
 * number), or every one when which < 0.  Returns how many were delivered. */
int fake_cm_in_flight(void);
int fake_cm_deliver(int which);
/* Queue an rdma_cm event for `id` on its channel. */
void fake_push_event(struct rdma_cm_id *id, enum rdma_cm_event_type type, int status);
/* The id of the most recently created active (non-listening) cm id. */
struct rdma_cm_id *fake_last_id(void);
/* A raw peer connecting to `listen_id` with this private data (no QP behind
 * it: an accept establishes the passive side only). */
struct rdma_cm_id *fake_connect_request(struct rdma_cm_id *listen_id, const void *pdata,
                                        uint8_t len);

/* Queue an asynchronous event of the device (get_async_event returns it,
 * oldest first); element: the port number, QP, CQ or SRQ it names. */
void fake_push_async_port(enum ibv_event_type type, int port);
void fake_push_async_qp(enum ibv_event_type type, struct ibv_qp *qp);
void fake_push_async_cq(enum ibv_event_type type, struct ibv_cq *cq);
void fake_push_async_srq(enum ibv_event_type type, struct ibv_srq *srq);
int fake_async_waiting(void);

/* Completion events (fake_events.c): a channel is a pipe whose read end is
 * the channel's fd; an armed CQ on a channel queues one event when a
 * completion arrives (with moderation: when mod_count completions have
 * arrived since it was armed, or mod_period usec after the first of them,
 * checked at every pump) and is disarmed.  No event without arming.  Taking
 * an event (get_cq_event) reads one byte; destroying a CQ with events not
 * acknowledged, or a channel that a CQ still uses, is a fault (a real device
 * blocks or refuses). */
uint64_t fake_cq_events(struct ibv_cq *cq);
int fake_cq_armed(struct ibv_cq *cq);
/* Serialise every entry of mca_btl_llrdma_verbs with one mutex, so that
 * threads can use the fake (a real device's provider locks per queue). */
void fake_lock_install(void);

/* ---- shared by fake_verbs.c and fake_rdmacm.c, not for tests */
void fake_events_install(mca_btl_llrdma_verbs_ops_t *ops);
void fake_cq_completion_added(fake_cq_t *f);
void fake_cq_channel_attach(fake_cq_t *f);
void fake_events_tick(void);
int fake_cq_destroy_check(fake_cq_t *f);
/* The call counter is atomic: entries that the lock layer (fake_events.c)
 * does not serialise, e.g. set-up calls of one process, may run while
 * another process's progress thread polls. */
#define FAKE_FAIL_POINT()                                                                          \
    (__atomic_add_fetch(&fake.calls, 1, __ATOMIC_RELAXED) == fake.fail_at                          \
         ? (fake.failed_fn = __func__, fake.failed = 1)                                            \
         : 0)
extern struct ibv_context fake_ctx;
void fake_fault(int *counter, const char *fmt, ...);
struct ibv_qp *fake_new_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a);
/* As ibv_create_qp_ex (NULL with errno set; EOPNOTSUPP with fake.no_wr_api). */
/* The lock layer's lock, taken by ibv_wr_start and released by
 * ibv_wr_complete / wr_abort (NULL without the layer). */
extern void (*fake_wr_lock)(void), (*fake_wr_unlock)(void);
struct ibv_qp *fake_new_qp_ex(struct ibv_qp_init_attr_ex *a);
int fake_destroy_qp(struct ibv_qp *qp);
void fake_unwire(fake_qp_t *q);
/* The QP enters the error state (IBV_EVENT_QP_LAST_WQE_REACHED once, on an SRQ). */
void fake_qp_enter_error(fake_qp_t *q);
/* Reset the rdma_cm state and fill the table's rdma_cm entries. */
void fake_cm_install(mca_btl_llrdma_verbs_ops_t *ops);

#endif
