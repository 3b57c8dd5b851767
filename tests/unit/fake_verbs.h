/*
 * A fake verbs device behind btl/llrdma's seam (btl_llrdma_verbs.h) for unit
 * tests: objects are plain heap structs, posted work requests are recorded,
 * completions and rdma_cm events are injected by the test, and any call can
 * be made to fail: the Nth call of the seam (counted over every entry) fails
 * when fake.fail_at == N.
 */
#ifndef FAKE_VERBS_H
#define FAKE_VERBS_H

#include "btl_llrdma_verbs.h"

#define FAKE_MAX_WR 4096
#define FAKE_MAX_WC 256
#define FAKE_MAX_EV 64

typedef struct fake_wr {
    struct ibv_qp *qp;
    uint64_t wr_id;
    uint32_t length;
    unsigned flags; /* IBV_SEND_* */
    void *addr;
} fake_wr_t;

typedef struct fake_cq {
    struct ibv_cq cq;
    struct ibv_wc wc[FAKE_MAX_WC];
    int head, tail;
    int moderated; /* ibv_modify_cq applied */
    uint16_t mod_count, mod_period;
} fake_cq_t;

typedef struct fake_state {
    /* failure injection */
    long calls;   /* seam calls so far */
    long fail_at; /* 0: never */
    int failed;   /* the injected failure happened */
    const char *failed_fn;
    /* device behaviour */
    uint32_t max_inline;     /* create_qp fails above this */
    uint32_t inline_grant;   /* 0: grant what was asked */
    int modify_cq_supported; /* else EOPNOTSUPP */
    int post_send_errno;     /* nonzero: every post_send fails with it */
    int route_unreachable;   /* rdma_resolve_route ends in UNREACHABLE */
    /* what the BTL did */
    fake_wr_t sends[FAKE_MAX_WR];
    int nsends;
    uint64_t recvs[FAKE_MAX_WR]; /* wr_ids posted to any SRQ */
    int nrecvs;
    struct ibv_qp_init_attr last_qp_attr;
    int nqp_created;
    /* live objects, for leak checks */
    int live_pd, live_mr, live_cq, live_srq, live_qp, live_id, live_channel, live_event;
} fake_state_t;

extern fake_state_t fake;

/* Reset the state and install the fake table. */
void fake_install(void);
void fake_uninstall(void);
int fake_live_objects(void);

/* Queue a completion on a CQ; poll_cq returns it. */
void fake_push_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status, uint32_t byte_len,
                  uint32_t qp_num, enum ibv_wc_opcode opcode);
/* Queue an rdma_cm event for `id` on its channel. */
void fake_push_event(struct rdma_cm_id *id, enum rdma_cm_event_type type, int status);
/* The id of the most recently created active (non-listening) cm id. */
struct rdma_cm_id *fake_last_id(void);
/* Simulate a peer connecting to `listen_id` with this private data. */
struct rdma_cm_id *fake_connect_request(struct rdma_cm_id *listen_id, const void *pdata,
                                        uint8_t len);

#endif
