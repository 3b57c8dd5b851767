/*
 * btl/llrdma's per-peer limits against the fake device (tests/unit/fake_btl.c):
 * processes with different size hints in one process.  Covers: smaller LL
 * buffers and no LL path (fragments routed to BW, never larger than the peer
 * takes); fragments of the sender's own limits larger than the peer takes,
 * split into pieces and joined (sizes around both limits, a burst into a
 * receiver that does not progress with packing on, every seam call failing
 * in turn, pieces beyond what the peer may send reported); ob1's limits never
 * lowered; prepare_src (ob1's pipeline fragments) to peers of both kinds.
 */
#include "fake_btl.h"

#include <stdlib.h>
#include <string.h>

#include "opal/datatype/opal_convertor.h"

#define LL LLRDMA_PATH_LL
#define BW LLRDMA_PATH_BW
#define HDR sizeof(mca_btl_llrdma_hdr_t)

/* ------------------------------------------------------ mixed hints */

/* Every SEND posted on a connection from i to j fits what j receives on
 * that path. */
static void check_fragment_sizes(void)
{
    for (int w = 0; w < fake.nsends && w < FAKE_MAX_WR; ++w) {
        if (IBV_WR_SEND != fake.sends[w].opcode) {
            continue;
        }
        for (int i = 0; i < fw_n; ++i) {
            for (int j = 0; j < fw_n; ++j) {
                for (int p = 0; p < LLRDMA_NPATHS; ++p) {
                    mca_btl_llrdma_conn_t *c = i == j ? NULL : fw_conn(i, j, p);
                    if (NULL != c && c->qp == fake.sends[w].qp) {
                        CHECK(fake.sends[w].length - HDR <= fw[j].m->lim.frag_max[p]);
                    }
                }
            }
        }
    }
}

static void test_mixed_hints(void)
{
    mca_btl_llrdma_endpoint_t *ab, *ac;
    mca_btl_llrdma_module_t *a;

    fw_begin();
    CHECK(0 == fw_add(16384, 0, 0)); /* A: LL up to 16K */
    CHECK(1 == fw_add(4096, 0, 0));  /* B: LL up to 4K */
    CHECK(2 == fw_add(0, 0, 0));     /* C: no LL path */
    fw_mesh();
    a = fw[0].m;
    ab = fw[0].ep[1];
    ac = fw[0].ep[2];
    CHECK(ab->use_path[LL] && ab->frag_max[LL] == fw[1].m->lim.frag_max[LL]);
    CHECK(ab->frag_max[LL] < a->lim.frag_max[LL]);
    CHECK(!ac->use_path[LL] && ac->use_path[BW] && 0 == ac->frag_max[LL]);
    /* ob1's module limits stay this process's own whatever the peers. */
    CHECK(a->super.btl_max_send_size == a->lim.max_send_size);
    CHECK(a->super.btl_eager_limit == a->lim.eager_limit);
    /* Sizes around each boundary, each way. */
    for (int j = 1; j < 3; ++j) {
        size_t sizes[] = {16, 300, 4000, 4200, 8000, 16000, 16400, 30000};
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
            if (sizes[k] <= a->super.btl_max_send_size) {
                (void)fw_send(0, j, sizes[k], sizes[k] > 4000);
            }
            if (sizes[k] <= fw[j].m->super.btl_max_send_size) {
                (void)fw_send(j, 0, sizes[k], sizes[k] > 4000);
            }
        }
    }
    fw_settle(300);
    fw_check_all_arrived();
    check_fragment_sizes();
    CHECK(0 == fake.len_errors);
    /* No LL connection with the process that has no LL path. */
    CHECK(NULL == fw_conn(0, 2, LL) && NULL == fw_conn(2, 0, LL));
    CHECK(fake_srq_posted(fw[0].m->path[LL].srq) == fw[0].m->path[LL].rq.posted);
    CHECK(fw[0].m->path[LL].rq.reserved == fw_conn(0, 1, LL)->allot);
    /* A fragment larger than the peer's LL buffers went to BW. */
    CHECK(fw[1].recv_max_len > ab->frag_max[LL]);
    CHECK(LLRDMA_PATH_BW == mca_btl_llrdma_endpoint_path_for(ab, ab->frag_max[LL] + 1));
    CHECK(-1 == mca_btl_llrdma_endpoint_path_for(ac, ac->frag_max[BW] + 1));
    fw_end(0);
}

/* Every wire SEND on a connection from i to j: no larger than j receives. */
static size_t max_wire_to(int i, int j)
{
    size_t most = 0;
    for (int w = 0; w < fake.nsends && w < FAKE_MAX_WR; ++w) {
        if (IBV_WR_SEND == fake.sends[w].opcode && NULL != fw_conn(i, j, BW) &&
            fake.sends[w].qp == fw_conn(i, j, BW)->qp && fake.sends[w].length > most) {
            most = fake.sends[w].length;
        }
    }
    return most;
}

/* A peer with a smaller hint receives smaller BW fragments.  The module's
 * limits (ob1's) stay the sender's own, never lowered mid-run for everyone:
 * a fragment larger than the peer takes goes in pieces that fit, back to
 * back, and the receiver hands ob1 one fragment.  Small messages queued
 * between the pieces never pack into a piece's buffer. */
static void test_split_for_smaller_peers(void)
{
    mca_btl_llrdma_module_t *a, *c;
    mca_btl_llrdma_endpoint_t *ac;
    size_t fit, own;
    uint64_t split0;

    fw_begin();
    CHECK(0 == fw_add(65536, 0, 0)); /* A: BW fragments of 128K */
    CHECK(1 == fw_add(0, 0, 0));     /* C: 64K */
    fw_mesh();
    a = fw[0].m;
    c = fw[1].m;
    ac = fw[0].ep[1];
    fit = ac->frag_max[BW];
    own = a->lim.frag_max[BW];
    CHECK(fit == c->lim.frag_max[BW] && own > fit);
    CHECK(a->super.btl_max_send_size == own && a->super.btl_eager_limit == own);
    /* Around the peer's limit and up to this side's own, each way. */
    {
        size_t sizes[] = {16, 300, 9000, fit - 1, fit, fit + 1, 100000, own - 8, own};
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
            CHECK(0 <= fw_send(0, 1, sizes[k], 1));
            if (sizes[k] <= c->super.btl_max_send_size) {
                CHECK(0 <= fw_send(1, 0, sizes[k], 1));
            }
        }
    }
    fw_settle(300);
    fw_check_all_arrived();
    CHECK(0 == fake.len_errors && 0 == fw[1].recv_bad && 0 == fw[0].recv_bad);
    CHECK(4 == a->split_frags && 4 == c->joined_frags);
    CHECK(0 == c->split_frags && 0 == a->joined_frags);
    CHECK(own == fw[1].recv_max_len);
    CHECK(max_wire_to(0, 1) <= fit + HDR);
    CHECK(max_wire_to(1, 0) <= fit + HDR);

    /* A burst into a receiver that does not progress: credits run out,
     * pieces wait with small messages between them, packing on. */
    split0 = a->split_frags;
    mca_btl_llrdma_component.coalesce = 1;
    for (int k = 0; k < 60; ++k) {
        fw_as(0);
        CHECK(0 <= fw_send(0, 1, k % 3 ? own - 8 * k : fit + 1 + k, 1));
        CHECK(0 <= fw_send(0, 1, 64 + k, 1));
        CHECK(0 <= fw_send(0, 1, 512, 1));
        fw_progress_one(0, 1);
    }
    CHECK(!opal_list_is_empty(&ac->pending[BW])); /* the window ran out */
    fw_settle(2000);
    fw_check_all_arrived();
    CHECK(60 == a->split_frags - split0);
    CHECK(0 == fake.len_errors && 0 == fw[1].recv_bad);
    CHECK(max_wire_to(0, 1) <= fit + HDR);
    fw_end(0);
}

/* Each seam call during a burst of split fragments fails in turn (a pool
 * that cannot grow, a post that fails): ob1 is told, a fragment whose
 * pieces could not all be had is refused whole and sent again, and nothing
 * leaks. */
static void test_split_failures(void)
{
    int refused = 0, n;

    for (n = 1; n < 400; ++n) {
        mca_btl_llrdma_module_t *a;
        uint64_t base;

        fw_begin();
        if (0 != fw_add(65536, 0, 0) || 1 != fw_add(0, 0, 0)) {
            CHECK(0);
            return;
        }
        fw_mesh();
        a = fw[0].m;
        (void)fw_send(0, 1, 16, 0); /* connect first: failures hit the split */
        fw_settle(100);
        base = fake.calls;
        fake.fail_at = base + n;
        for (int k = 0; k < 40; ++k) {
            mca_btl_base_descriptor_t *d = fw_alloc(0, 1, a->lim.frag_max[BW] - 8 * k, 1);
            int rc;
            if (NULL == d) {
                --fw[0].send_seq[1][1];
                continue;
            }
            rc = a->super.btl_send(&a->super, fw[0].ep[1], d, FW_TAG);
            if (OPAL_SUCCESS == rc) {
                ++fw[0].accepted;
            } else if (rc < 0) {
                /* ob1 frees a descriptor the BTL refused, and retries later. */
                --fw[0].send_seq[1][1];
                refused += OPAL_ERR_OUT_OF_RESOURCE == rc;
                a->super.btl_free(&a->super, d);
            }
        }
        fw_settle(2000);
        if (!fake.failed) {
            fw_end(0);
            break; /* every call of the burst was failed once */
        }
        if (0 == fw[0].err_calls) {
            /* Only a pool growth failed: every accepted fragment arrived. */
            CHECK(fw_sent(0, 1) == fw[0].send_seq[1][0] + fw[0].send_seq[1][1]);
            CHECK(0 == fw[1].recv_bad);
        }
        CHECK(fw[0].accepted == fw[0].cb_calls);
        fw_end(1);
    }
    /* The path named ran: some fragment was refused whole for want of a
     * piece, and the loop reached a burst with nothing left to fail. */
    printf("# split failures: %d seam calls failed in turn, %d fragments refused whole\n", n - 1,
           refused);
    CHECK(refused > 0 && n < 400);
}

/* ------------------------------------------------------ prepare_src */

#define PS_TAG 0x42
static unsigned char ps_src[300000], ps_dst[300000];
static size_t ps_got, ps_max;

/* Each fragment: 8 bytes of offset (the reserve), then data. */
static void piece_upcall(struct mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,
                         const mca_btl_base_segment_t *segs, size_t nsegs, void *cbdata)
{
    const unsigned char *p = segs[0].seg_addr.pval;
    size_t len = segs[0].seg_len;
    uint64_t off;
    (void)btl;
    (void)tag;
    (void)nsegs;
    (void)cbdata;
    memcpy(&off, p, 8);
    memcpy(ps_dst + off, p + 8, len - 8);
    ps_got += len - 8;
    ps_max = len > ps_max ? len : ps_max;
}
LLRDMA_BTL_RECV_ADAPTER(on_piece, piece_upcall)

static void stream(int i, int j, size_t total)
{
    mca_btl_llrdma_module_t *m = fw[i].m;
    opal_convertor_t *conv = fw_bytes_convertor(ps_src, total);
    size_t off = 0;

    fw_as(i);
    CHECK(NULL == m->super.btl_prepare_src(&m->super, fw[i].ep[j], conv, MCA_BTL_NO_ORDER,
                                           m->super.btl_max_send_size, &off,
                                           MCA_BTL_DES_FLAGS_BTL_OWNERSHIP));
    while (off < total) {
        size_t size = total - off;
        mca_btl_base_descriptor_t *d;
        fw_as(i);
        d = m->super.btl_prepare_src(&m->super, fw[i].ep[j], conv, MCA_BTL_NO_ORDER, 8, &size,
                                     MCA_BTL_DES_FLAGS_BTL_OWNERSHIP);
        if (NULL == d) {
            fw_progress(1); /* out of fragments: ob1 retries from progress */
            continue;
        }
        CHECK(size > 0 && size + 8 <= m->super.btl_max_send_size);
        CHECK(d->des_segments[0].seg_len == size + 8);
        memcpy(d->des_segments[0].seg_addr.pval, &(uint64_t){off}, 8);
        off += size;
        CHECK(OPAL_SUCCESS <= m->super.btl_send(&m->super, fw[i].ep[j], d, PS_TAG));
    }
    OBJ_RELEASE(conv);
}

static void test_prepare_src(void)
{
    for (size_t k = 0; k < sizeof(ps_src); ++k) {
        ps_src[k] = (unsigned char)(k * 31u + 7u);
    }
    mca_btl_base_active_message_trigger[PS_TAG].cbfunc = on_piece;
    fw_begin();
    /* 128K BW fragments between 0 and 1; process 2 takes 64K. */
    CHECK(0 == fw_add(65536, 16, 16) && 1 == fw_add(65536, 16, 16) && 2 == fw_add(8192, 16, 16));
    fw_add_procs(0, 1);
    memset(ps_dst, 0, sizeof(ps_dst));
    ps_got = ps_max = 0;
    stream(0, 1, sizeof(ps_src));
    fw_settle(300);
    CHECK(sizeof(ps_src) == ps_got && 0 == memcmp(ps_src, ps_dst, sizeof(ps_src)));
    CHECK(ps_max == fw[0].m->super.btl_max_send_size);
    CHECK(131072 == ps_max);
    /* A peer with smaller fragments leaves the module's limits alone: ob1's
     * 100000-byte fragment reaches it in pieces, joined before ob1 sees it. */
    fw_add_procs(0, 2);
    CHECK(131072 == fw[0].m->super.btl_max_send_size);
    CHECK(65536 == fw[2].m->lim.frag_max[BW]);
    memset(ps_dst, 0, sizeof(ps_dst));
    ps_got = ps_max = 0;
    stream(0, 2, 100000);
    fw_settle(300);
    CHECK(100000 == ps_got && 0 == memcmp(ps_src, ps_dst, 100000));
    CHECK(100000 + 8 == ps_max && 1 == fw[2].m->joined_frags);
    check_fragment_sizes();
    CHECK(0 == fw[0].err_calls && 0 == fake.rnr_events);
    fw_end(0);
    mca_btl_base_active_message_trigger[PS_TAG].cbfunc = NULL;
}

/* Pieces beyond what the peer may send (a corrupt or foreign stream; here
 * the receiver is told the sender sends at most 1000 bytes): the receiver
 * fails that peer once, naming it and why, and hands ob1 nothing of the
 * fragment, not even its tail. */
static void test_pieces_beyond_the_peer_limit(void)
{
    mca_btl_llrdma_conn_t *rc;
    uint32_t before;

    fw_begin();
    CHECK(0 == fw_add(65536, 0, 0) && 1 == fw_add(0, 0, 0));
    fw_mesh();
    CHECK(0 <= fw_send(0, 1, 16, 1)); /* connects BW (hint 0 has no LL path) */
    fw_settle(100);
    rc = fw_conn(1, 0, BW);
    CHECK(NULL != rc);
    if (NULL == rc) {
        fw_end(1);
        return;
    }
    rc->reasm.max = 1000;
    before = fw_sent(0, 1);
    CHECK(0 <= fw_send(0, 1, fw[0].m->lim.frag_max[BW], 1));
    fw_settle(300);
    CHECK(1 == fw[0].m->split_frags && 0 == fw[1].m->joined_frags);
    CHECK(fw_sent(0, 1) == before && 0 == fw[1].recv_bad);
    CHECK(1 == fw[1].err_calls);
    CHECK(NULL != strstr(fw[1].err_text, "a split fragment was refused") &&
          NULL != strstr(fw[1].err_text, "exceed the 1000 bytes the peer sends at most"));
    CHECK(LLRDMA_EP_FAILED == fw[1].ep[0]->state);
    fw_end(1);
}

int main(int argc, char **argv)
{
    int saved_stderr;

    if (0 != fw_init(&argc, &argv)) {
        return 2;
    }
    test_mixed_hints();
    test_split_for_smaller_peers();
    test_prepare_src();
    /* The expected transport errors print a user-facing message each. */
    saved_stderr = fw_stderr_off();
    test_split_failures();
    test_pieces_beyond_the_peer_limit();
    fw_stderr_on(saved_stderr);
    return fw_finish();
}
