/*
 * The BTL's own share of one small send, for callgrind: the fake world of
 * fake_btl.c (two modules at one hint, connected), then ITERS sendi calls of
 * a 16-byte header (the size of ob1's match header, rounded) and an 8-byte
 * contiguous payload from process 0 to process 1, the receiver progressed
 * every 16 sends (in recv_progress, for callgrind to collect the receive
 * side apart).  Every message is checked by the receiving callback; the
 * program fails unless all arrived.  Built without sanitizers (unlike the
 * unit tests) so that instruction counts mean what they do in a real build.
 * Not a test: contrib/bench/sendi-fake-cost.sh runs it under callgrind and
 * subtracts the fake device's work (its post; its poll, which also moves
 * the data; its receive repost), which real providers replace with their
 * own, and the test's receive callback.
 *
 * Usage: sendi_cost [ITERS [HINT]]
 */
#include "fake_btl.h"

#include <stdlib.h>
#include <string.h>

#include "opal/datatype/opal_convertor.h"

static uint32_t received_in_progress;

/* The receiver's progress: what the BTL does per received message. */
static __attribute__((noinline)) void recv_progress(void)
{
    uint32_t before = fw_sent(0, 1);
    fw_progress_one(1, 1);
    received_in_progress += fw_sent(0, 1) - before;
}

int main(int argc, char **argv)
{
    const int iters = argc > 1 ? atoi(argv[1]) : 2000;
    const uint64_t hint = argc > 2 ? strtoull(argv[2], NULL, 0) : 8192;
    unsigned char msg[24];
    opal_convertor_t *conv;
    mca_btl_llrdma_module_t *m;
    long calls = 0, busy = 0;

    if (0 != fw_init(&argc, &argv)) {
        return 2;
    }
    fw_begin();
    if (0 != fw_add(hint, 0, 0) || 1 != fw_add(hint, 0, 0)) {
        return 2;
    }
    fw_mesh();
    (void)fw_send(0, 1, 16, 0); /* connects */
    fw_settle(100);
    m = fw[0].m;
    for (int i = 0; i < iters; ++i) {
        mca_btl_base_descriptor_t *des = NULL;
        int rc;
        fw_fill(0, 1, msg, sizeof(msg), 0);
        conv = opal_convertor_create(opal_local_arch, 0);
        opal_convertor_prepare_for_send(conv, &opal_datatype_uint1, 8, msg + 16);
        fw_as(0);
        for (;;) {
            ++calls;
            rc = m->super.btl_sendi(&m->super, fw[0].ep[1], conv, msg, 16, 8, MCA_BTL_NO_ORDER,
                                    MCA_BTL_DES_FLAGS_BTL_OWNERSHIP, FW_TAG, &des);
            if (OPAL_SUCCESS == rc) {
                break;
            }
            ++busy;
            if (NULL != des) {
                m->super.btl_free(&m->super, des);
                des = NULL;
            }
            fw_progress(1);
            fw_as(0);
        }
        OBJ_RELEASE(conv);
        if (15 == i % 16) {
            recv_progress();
            fw_progress_one(0, 1); /* send completions */
        }
    }
    fw_settle(1000);
    printf("sendi_cost: hint %llu: %d messages, %ld sendi calls (%ld busy), %u arrived, %d bad, "
           "%u received in recv_progress\n",
           (unsigned long long)hint, iters, calls, busy, fw_sent(0, 1) - 1, fw[1].recv_bad,
           received_in_progress);
    if ((int)fw_sent(0, 1) - 1 != iters || 0 != fw[1].recv_bad) {
        printf("sendi_cost: FAIL\n");
        return 1;
    }
    fw_end(0);
    fw_fini();
    return 0;
}
