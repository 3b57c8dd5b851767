/*
 * btl/llrdma failures against the fake device (tests/unit/fake_btl.c): the
 * failure-injection sweeps and the error that comes before ob1 listens.
 *
 * Covers: every seam call failing in turn during module creation (nothing
 * left behind) and during connection set-up, post, poll, receive and credit
 * return (reported to ob1 or absorbed, never leaked, never a device fault),
 * and an error the progress thread finds before ob1 registers its error
 * callback (kept, delivered once at registration).  The rest of the module
 * and its connections: test_btl_fake.c.  Built with AddressSanitizer (leak
 * checking on).
 */
#include "fake_btl.h"

#include <stdio.h>
#include <string.h>

/* Fail the Nth seam call of module creation for every N: each failure must
 * leave nothing behind. */
static void test_every_create_failure(void)
{
    long n;
    int ok = 0;

    for (n = 1; n < 1000 && !ok; ++n) {
        fw_begin();
        fake.fail_at = n;
        if (fw_add(8192, 0, 0) < 0) {
            CHECK(fake.failed);
        } else {
            ok = !fake.failed;
        }
        fw_end(0);
    }
    CHECK(ok);
    printf("# module creation: %ld failure points, each cleaned up\n", n - 2);
}

/* Fail the Nth seam call after creation, during connection set-up (both
 * sides, both at once), post, poll, receive and credit return: the failure
 * must reach an error callback or be absorbed (then every message arrives),
 * never leak, never make the device see a fault. */
static void test_every_data_path_failure(void)
{
    long n, base;
    int ok = 0, reported = 0, absorbed = 0;

    for (n = 1; n < 3000 && !ok; ++n) {
        fw_begin();
        mca_btl_llrdma_component.connect_timeout_s = 0; /* no time-based retries */
        CHECK(0 == fw_add(8192, 8, 8) && 1 == fw_add(8192, 8, 8));
        fw_mesh();
        base = fake.calls;
        fake.fail_at = base + n;
        (void)fw_send(0, 1, 16, 0);
        (void)fw_send(1, 0, 16, 0);
        (void)fw_send(0, 1, 1000, 0);
        (void)fw_send(0, 1, 20000, 1);
        (void)fw_send(1, 0, 3000, 0);
        for (int i = 0; i < 12; ++i) {
            (void)fw_send(0, 1, 100, 0); /* past the credit threshold: a credit write */
        }
        fw_settle(300);
        if (!fake.failed) {
            ok = 1;
            CHECK(0 == fw[0].err_calls && 0 == fw[1].err_calls);
            CHECK(15 == fw_sent(0, 1) && 2 == fw_sent(1, 0));
        } else if (fw[0].err_calls + fw[1].err_calls > 0) {
            ++reported;
        } else {
            ++absorbed;
            /* Absorbed (e.g. a failed look at the CM channel): then nothing may be lost. */
            CHECK(15 == fw_sent(0, 1) && 2 == fw_sent(1, 0));
            if (15 != fw_sent(0, 1) || 2 != fw_sent(1, 0)) {
                printf("#   after failing %s (call %ld): %u and %u messages arrived\n",
                       fake.failed_fn, n, fw_sent(0, 1), fw_sent(1, 0));
            }
        }
        for (int i = 0; i < 2; ++i) {
            CHECK(fw[i].accepted == fw[i].cb_calls);
            if (fw[i].accepted != fw[i].cb_calls) {
                printf("#   after failing %s (call %ld): process %d: %d callbacks for %d sends\n",
                       fake.failed_fn, n, i, fw[i].cb_calls, fw[i].accepted);
            }
        }
        fw_end(0);
    }
    CHECK(ok);
    printf("# data path: %ld failure points, %d reported to ob1, %d absorbed, none leaked\n", n - 2,
           reported, absorbed);
}

/* The progress thread runs from the module's creation on; an error it
 * finds before ob1 registers its callback (add_procs) is kept, not fatal
 * (the process used to abort), and reaches the callback once registered,
 * once.  A module finalized with one still kept releases it (fw_end: no
 * leak). */
static void test_error_before_registration(void)
{
    mca_btl_llrdma_module_t *m;

    fw_begin();
    fw_error_cb_late = 1;
    CHECK(0 == fw_add(8192, 8, 8) && 1 == fw_add(8192, 8, 8));
    for (int i = 0; i < 2; ++i) {
        m = fw[i].m;
        fw_as(i);
        MCA_BTL_LLRDMA_LOCK(m);
        mca_btl_llrdma_module_fatal(m, NULL, "ibv_poll_cq failed (injected)");
        MCA_BTL_LLRDMA_UNLOCK(m);
    }
    fw_progress(4);
    CHECK(0 == fw[0].err_calls && 0 == fw[1].err_calls);
    CHECK(1 == opal_list_get_size(&fw[0].m->held) && 0 == fw[0].m->ndone);
    fw_register_error(0);
    CHECK(0 == opal_list_get_size(&fw[0].m->held) && 1 == fw[0].m->ndone);
    fw_progress(4);
    CHECK(1 == fw[0].err_calls && NULL == fw[0].err_proc);
    CHECK(NULL != strstr(fw[0].err_text, "ibv_poll_cq failed (injected)"));
    fw_progress(4);
    CHECK(1 == fw[0].err_calls && 0 == fw[1].err_calls); /* once; 1 never registered */
    CHECK(1 == opal_list_get_size(&fw[1].m->held));
    fw_end(0);
}

int main(int argc, char **argv)
{
    int saved_stderr;

    if (0 != fw_init(&argc, &argv)) {
        return 2;
    }
    /* The expected transport errors print a user-facing message each. */
    saved_stderr = fw_stderr_off();
    test_error_before_registration();
    test_every_create_failure();
    test_every_data_path_failure();
    fw_stderr_on(saved_stderr);
    return fw_finish();
}
