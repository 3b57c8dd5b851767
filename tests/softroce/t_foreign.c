/*
 * t_foreign IP PORT none|wrong: a process outside the job asks a btl/llrdma
 * listener for a connection exactly as llrdma does (rdma_cm, a queue pair,
 * the request's magic, version and path), but without the listener's secret
 * ("none": 0) or with a made-up one ("wrong").  The listener must reject it
 * before setting anything up (docs/btl-design.md, "Who may connect").
 *
 * Exit 0 when rejected ("t_foreign: rejected"), 1 when the connection was
 * established, 2 on any other outcome (usage, no route, a timeout).
 * tests/softroce/test-btl-foreign.sh runs it against a running job.
 */
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btl_llrdma_hdr.h"

/* The next event on ch, which must be `want`; 0, else -1 (said). */
static int expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
                  enum rdma_cm_event_type *got)
{
    struct rdma_cm_event *ev;
    if (0 != rdma_get_cm_event(ch, &ev)) {
        perror("t_foreign: rdma_get_cm_event");
        return -1;
    }
    *got = ev->event;
    if (ev->event != want) {
        fprintf(stderr, "t_foreign: %s (status %d) instead of %s\n", rdma_event_str(ev->event),
                ev->status, rdma_event_str(want));
    }
    rdma_ack_cm_event(ev);
    return *got == want ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct rdma_event_channel *ch;
    struct rdma_cm_id *id;
    struct sockaddr_in dst;
    struct ibv_qp_init_attr qa;
    struct rdma_conn_param param;
    mca_btl_llrdma_conn_req_t req;
    enum rdma_cm_event_type got;

    if (4 != argc || (0 != strcmp(argv[3], "none") && 0 != strcmp(argv[3], "wrong"))) {
        fprintf(stderr, "usage: t_foreign IP PORT none|wrong\n");
        return 2;
    }
    alarm(60); /* nothing here may hang a test */
    memset(&dst, 0, sizeof(dst));
    dst.sin_family = AF_INET;
    dst.sin_port = htons((uint16_t)atoi(argv[2]));
    if (1 != inet_pton(AF_INET, argv[1], &dst.sin_addr)) {
        fprintf(stderr, "t_foreign: bad address %s\n", argv[1]);
        return 2;
    }
    ch = rdma_create_event_channel();
    if (NULL == ch || 0 != rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
        perror("t_foreign: rdma_create_id");
        return 2;
    }
    if (0 != rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) ||
        0 != expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, &got) || 0 != rdma_resolve_route(id, 2000) ||
        0 != expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, &got)) {
        return 2;
    }
    /* librdmacm makes the PD and CQs when none are given. */
    memset(&qa, 0, sizeof(qa));
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    if (0 != rdma_create_qp(id, NULL, &qa)) {
        perror("t_foreign: rdma_create_qp");
        return 2;
    }
    memset(&req, 0, sizeof(req));
    req.magic = MCA_BTL_LLRDMA_CONN_MAGIC;
    req.version = MCA_BTL_LLRDMA_CONN_VERSION;
    req.path = 1; /* BW, which every module has */
    req.jobid = 1;
    req.credits = 16;
    req.frag_max = 65536;
    req.secret = 0 == strcmp(argv[3], "none") ? 0 : 0x5ec7e75ec7e75ec7ull;
    memset(&param, 0, sizeof(param));
    param.private_data = &req;
    param.private_data_len = sizeof(req);
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    if (0 != rdma_connect(id, &param)) {
        perror("t_foreign: rdma_connect");
        return 2;
    }
    if (0 == expect(ch, RDMA_CM_EVENT_REJECTED, &got)) {
        printf("t_foreign: rejected (%s secret)\n", argv[3]);
        rdma_destroy_qp(id);
        rdma_destroy_id(id);
        rdma_destroy_event_channel(ch);
        return 0;
    }
    if (RDMA_CM_EVENT_ESTABLISHED == got) {
        printf("t_foreign: ESTABLISHED with %s secret\n", argv[3]);
        rdma_disconnect(id);
        return 1;
    }
    return 2;
}
