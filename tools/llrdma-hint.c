/*
 * llrdma-hint: the size-hint arithmetic of libllrdma for scripts.
 *
 *   llrdma-hint parse TEXT                      validate, print bytes
 *   llrdma-hint gradient BYTES RANKS [HEADROOM] print BYTES/RANKS*(1+HEADROOM)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llrdma.h"
#include "llrdma_core.h"

static int usage(FILE *fp, int rc)
{
    fprintf(fp, "Usage: llrdma-hint parse TEXT\n"
                "       llrdma-hint gradient GRAD_BYTES RANKS [HEADROOM]\n"
                "\n"
                "parse: check TEXT as a size hint (16384, 16K, 16KiB, 2M, 0x4000; 0 = none)\n"
                "       and print it in bytes; exit 2 with the reason when it is invalid.\n"
                "gradient: print the per-message hint for a gradient of GRAD_BYTES (same\n"
                "       size syntax) over RANKS ranks: GRAD_BYTES / RANKS * (1 + HEADROOM),\n"
                "       HEADROOM defaulting to 0.2 (control-message margin).\n");
    return rc;
}

int main(int argc, char **argv)
{
    char err[512];
    uint64_t bytes = 0;

    if (argc >= 2 && (0 == strcmp(argv[1], "--help") || 0 == strcmp(argv[1], "-h"))) {
        return usage(stdout, 0);
    }
    if (argc == 3 && 0 == strcmp(argv[1], "parse")) {
        if (LLRDMA_OK != llrdma_parse_size(argv[2], LLRDMA_HINT_MAX, &bytes, err, sizeof(err))) {
            fprintf(stderr, "llrdma-hint: %s\n", err);
            return 2;
        }
        printf("%llu\n", (unsigned long long)bytes);
        return 0;
    }
    if ((argc == 4 || argc == 5) && 0 == strcmp(argv[1], "gradient")) {
        char *end = NULL;
        long ranks;
        double headroom = 0.2;
        if (LLRDMA_OK != llrdma_parse_size(argv[2], UINT64_MAX, &bytes, err, sizeof(err))) {
            fprintf(stderr, "llrdma-hint: gradient bytes: %s\n", err);
            return 2;
        }
        errno = 0;
        ranks = strtol(argv[3], &end, 10);
        if (errno || end == argv[3] || *end || ranks <= 0 || ranks > 1L << 30) {
            fprintf(stderr, "llrdma-hint: ranks '%s': not a positive integer\n", argv[3]);
            return 2;
        }
        if (argc == 5) {
            headroom = strtod(argv[4], &end);
            if (end == argv[4] || *end || !(headroom >= 0.0)) {
                fprintf(stderr, "llrdma-hint: headroom '%s': not a number >= 0\n", argv[4]);
                return 2;
            }
        }
        printf("%llu\n",
               (unsigned long long)llrdma_hint_for_gradient_u64(bytes, (int)ranks, headroom));
        return 0;
    }
    return usage(stderr, 3);
}
