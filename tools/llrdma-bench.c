/*
 * llrdma-bench: latency benchmarks for the low-latency RDMA size hint
 * (docs/bench.md).  Command line, help text and the self-test mode; the modes
 * live in bench_pingpong.c, bench_bw.c, bench_allreduce.c, bench_incast.c,
 * bench_sweep.c and bench_compare.c.
 */
#include <stdlib.h>
#include <string.h>

#include "llrdma_build_config.h"
#include "bench.h"
#include "bench_stats.h"

void bench_help(FILE *fp)
{
    fputs("NAME\n"
          "    llrdma-bench - round-trip latency, message rate, bandwidth and Allreduce\n"
          "    latency, per message size and per low-latency RDMA size hint\n"
          "\n"
          "SYNOPSIS\n"
          "    mpirun -np 2 [mpirun options] llrdma-bench pingpong [options]\n"
          "    mpirun -np 2 [mpirun options] llrdma-bench bw|bibw [options]\n"
          "    mpirun -np N [mpirun options] llrdma-bench allreduce [options]\n"
          "    mpirun -np N [mpirun options] llrdma-bench incast [options]\n"
          "    llrdma-bench sweep [--hints LIST] [driver options] [-- pingpong options]\n"
          "    llrdma-bench allreduce-compare [--colls LIST] [driver options] [-- allreduce "
          "options]\n"
          "    llrdma-bench plot [--out FILE.png] [--kind KIND] CSV|DUMP...\n"
          "    llrdma-bench selftest | --help | --version\n"
          "\n"
          "DESCRIPTION\n"
          "    pingpong, bw, bibw, allreduce and incast are MPI programs: launch them with\n"
          "    mpirun like the application, over any transport (shared memory, TCP,\n"
          "    btl/llrdma).  sweep and\n"
          "    allreduce-compare are not: they start mpirun themselves, once per size hint\n"
          "    or coll component, read the CSV each run prints and tabulate it.\n"
          "    All times are microseconds measured with MPI_Wtime.  Percentiles are nearest\n"
          "    rank on the sorted samples (P99 of 1000 samples = the 990th smallest).\n"
          "\n"
          "PINGPONG\n"
          "    Latency is the ROUND TRIP: rank A sends, rank B echoes the message back, one\n"
          "    sample per round trip as A sees it (halve it for a one-way estimate).  Per size:\n"
          "    --warmup round trips, then --iters measured ones, kept in an array allocated\n"
          "    once; table columns P50 P90 P99 P99.9 max mean and MB/s = size / (mean/2).\n"
          "    --warmup N        unmeasured round trips per size (default 100)\n"
          "    --iters N         measured round trips per size (default 1000)\n"
          "    --sizes LIST      comma-separated sizes: 8,256,1K,64K,2M, and hint-relative\n"
          "                      ones: hint, hint+N, hint-N, hint*N, hint/N (the effective\n"
          "                      hint of rank A; skipped when it is 0); repeatable\n"
          "    --min S --max S   powers of two from S up to S (default 8 to 4M)\n"
          "    --around-hint     also measure hint-1, hint and hint+1\n"
          "    --rate            also measure message rate: windows of --window (64)\n"
          "                      non-blocking sends A->B closed by a zero-byte ack, up to\n"
          "                      --windows (100) windows and at most 1 GiB per size;\n"
          "                      columns msgs/s and stream MB/s (= msgs/s x size)\n"
          "    --verify          check every payload on both ranks (exit 1 on a mismatch)\n"
          "    --pair A,B        the two ranks (default 0,1); other ranks wait\n"
          "    --csv FILE|-      write CSV rows (hint,size,iters,p50_us,p90_us,p99_us,\n"
          "                      p999_us,max_us,mean_us,min_us,bw_MBps,rate_msgs_s,stream_MBps);\n"
          "                      '-' prints them on stdout instead of the table\n"
          "\n"
          "BW, BIBW\n"
          "    Streaming bandwidth between ranks 0 and 1 (exactly 2 ranks), as osu_bw and\n"
          "    osu_bibw.  bw: per window rank 0 posts --window MPI_Isend, rank 1 as many\n"
          "    MPI_Irecv, both MPI_Waitall, then rank 1 sends a 4-byte ack.  bibw: both\n"
          "    ranks post --window MPI_Irecv and --window MPI_Isend, then MPI_Waitall (both\n"
          "    directions at once, no ack).  Rank 0 times the measured windows as a whole:\n"
          "    MB/s = bytes moved / time (bibw: both directions), 1 MB = 10^6 bytes.\n"
          "    Windows per size: min(--iters, max(--min-iters, --budget / (size x\n"
          "    window))); warm-up windows scaled alike (at least 1).\n"
          "    --window W        messages in flight per window (default 64)\n"
          "    --window-bytes S  at most S bytes per window: where W x size is larger, the\n"
          "                      window is S / size messages, at least 1 (default: no cap)\n"
          "    --warmup N        warm-up windows at small sizes (default 10)\n"
          "    --iters N         measured windows at small sizes (default 100)\n"
          "    --min-iters N     fewest measured windows at any size (default 2)\n"
          "    --budget S        bytes per size and direction that bound the windows\n"
          "                      (default 1G)\n"
          "    --sizes, --min, --max, --around-hint  as for pingpong (default 1 to 4M)\n"
          "    --verify          one buffer per message of the window (window x size bytes\n"
          "                      per side, at most 2 GiB); every message's bytes depend on\n"
          "                      size, window, index and sender and are checked by its\n"
          "                      receiver (exit 1 on a mismatch); filling and checking\n"
          "                      perturb the timing.  Without it each rank sends from one\n"
          "                      buffer and receives into one, as osu_bw\n"
          "    --csv FILE|-      CSV rows (hint,size,window,iters,bw_MBps,msgs_s); '-'\n"
          "                      prints them on stdout instead of the table\n"
          "\n"
          "ALLREDUCE\n"
          "    MPI_Allreduce on MPI_COMM_WORLD, back to back (no barrier between calls).\n"
          "    Each rank times each call; the samples are reduced with MPI_MAX over ranks,\n"
          "    so sample i is the slowest rank's time for call i.  Iterations per size:\n"
          "    min(--iters, max(--min-iters, --budget / size)), warm-up scaled alike\n"
          "    (at least 1); with the defaults 200 up to 1 MB, 128 at 2 MB, 10 at 32-64 MB.\n"
          "    --warmup N        warm-up calls at small sizes (default 20)\n"
          "    --iters N         measured calls at small sizes (default 200)\n"
          "    --min-iters N     fewest measured calls at any size (default 10)\n"
          "    --budget S        bytes per size that bound the iterations (default 256M)\n"
          "    --sizes, --min, --max, --around-hint  as for pingpong (default 8 to 64M)\n"
          "    --dtype T         double (default), float or int\n"
          "    --op O            sum (default) or max\n"
          "    --verify          check every call, warm-up and timed (both sides with\n"
          "                      --paired): before call i each rank writes inputs of (rank,\n"
          "                      i, element) whose exact result is known; after it every\n"
          "                      element of the result is compared (--device: through host\n"
          "                      copies).  A mismatch prints rank, size, iteration,\n"
          "                      element, got and expected; exit 1.  Only the calls are\n"
          "                      timed, but the filling and checking run between them\n"
          "                      (caches, rank skew): do not mix verified and unverified\n"
          "                      numbers.  Without it the input is written once\n"
          "    --device          CUDA device buffers (builds with CUDA only), one GPU per\n"
          "                      rank (node-local rank modulo GPUs).  Refused when Open MPI\n"
          "                      is not CUDA-aware and coll/llrdma does not serve the call\n"
          "    --force-device    --device without that check (the call may crash)\n"
          "    --staging-baseline  with --device: what a non-CUDA-aware MPI forces, timed as\n"
          "                      a whole: cudaMemcpy D2H, MPI_Allreduce on pinned host\n"
          "                      buffers, cudaMemcpy H2D\n"
          "    --paired          every iteration also calls MPI_Allreduce on a duplicate of\n"
          "                      MPI_COMM_WORLD made with info llrdma_allreduce=false (so\n"
          "                      coll/llrdma hands it to the component below it), the two\n"
          "                      calls taking turns to go first: both in one run, paired\n"
          "                      by iteration.  Columns: P50, P99, prev P50, prev P99, ratio\n"
          "                      (P50 / prev P50), paired (median of per-iteration ratios)\n"
          "    --csv FILE|-      CSV rows (ranks,hint,size,count,iters,p50_us,...,bw_MBps;\n"
          "                      with --paired also prev_p50_us,prev_p99_us,ratio_p50,\n"
          "                      ratio_paired)\n"
          "    --rss             after the run: peak resident memory, and how much more it\n"
          "                      was than with the buffers allocated and touched (what the\n"
          "                      Allreduce itself kept: scratch, staging), max over ranks\n"
          "\n"
          "INCAST\n"
          "    Ranks 1..N-1 each MPI_Isend --messages messages of each size to rank 0, then\n"
          "    MPI_Waitall; rank 0 computes for --busy-ms without calling MPI, then posts the\n"
          "    receives and drains them.  Per size: one message each way between rank 0 and\n"
          "    every sender first (connections, not measured), then --iters rounds.  Columns:\n"
          "    drain = rank 0's end of busy -> last message received; send = slowest\n"
          "    sender's first MPI_Isend -> its MPI_Waitall returned (ms, median and max over\n"
          "    rounds); lat = arrival - max(MPI_Isend, end of busy) per message (us, P50 P99\n"
          "    max over all rounds; CLOCK_MONOTONIC: all ranks on one host, else not shown).\n"
          "    Rank 0 checks every byte of every message and exits 1 by itself when one is\n"
          "    corrupt, or (via MPI_Abort) when one is missing after --timeout.\n"
          "    --messages N      messages per sender, per size and round (default 400)\n"
          "    --size LIST       message sizes, as --sizes of pingpong (default 8); also\n"
          "                      --sizes; hint-relative sizes are resolved on rank 0\n"
          "    --busy-ms MS      rank 0's busy time per round (default 1000)\n"
          "    --busy-sleep      rank 0 sleeps instead of computing while busy\n"
          "    --iters N         rounds per size (default 3)\n"
          "    --timeout S       seconds after the wake before missing messages (or a sender\n"
          "                      whose MPI_Waitall did not return) fail the run (default 300)\n"
          "    --json            one JSON document on stdout instead of the table (the '#'\n"
          "                      lines go to stderr)\n"
          "\n"
          "SWEEP\n"
          "    Runs, for each hint H:\n"
          "      $LLRDMA_MPIRUN [--mpirun-args] -np N --mca btl_llrdma_size_hint H \\\n"
          "          llrdma-bench pingpong --csv - [pingpong options] --around-hint\n"
          "    (plus --sizes 8,256,1K,4K,8K,16K,62K,64K unless the options after '--' choose\n"
          "    sizes) and prints: P50 by size and hint; 8 B and 62 KB P50/P99 per hint; the\n"
          "    cliff P50(hint+1)/P50(hint); P99/P50 for sizes up to 4x the hint.\n"
          "    --hints LIST      sizes as for the hint (default 0,8K,64K)\n"
          "\n"
          "ALLREDUCE-COMPARE\n"
          "    Runs `llrdma-bench allreduce` once per coll component with\n"
          "      llrdma: --mca coll llrdma,tuned,basic,libnbc,self\n"
          "      tuned:  --mca coll tuned,basic,libnbc,self\n"
          "      basic:  --mca coll basic,libnbc,self\n"
          "      han:    --mca coll han,tuned,basic,libnbc,self --mca coll_han_priority 100\n"
          "      X:      --mca coll X,basic,libnbc,self --mca coll_X_priority 100\n"
          "    and prints P50 per component, the first component's P50 over the best of the\n"
          "    others (< 1: the first is faster), and P99 per component.\n"
          "    --colls LIST      components (default llrdma,tuned,han,basic)\n"
          "\n"
          "DRIVER OPTIONS (sweep, allreduce-compare)\n"
          "    --np N            ranks per run (default 2)\n"
          "    --mpirun-args S   extra mpirun arguments, split like a shell (repeatable)\n"
          "    --csv FILE        every raw row of every run, with a hint / coll column\n"
          "    --show-output     echo every line the runs print (default: their '# rank'\n"
          "                      configuration lines and warnings)\n"
          "    --                the rest goes to each run's pingpong / allreduce\n"
          "\n"
          "PLOT\n"
          "    A plain program: PNG charts drawn by gnuplot (Debian: gnuplot-nox).  The\n"
          "    CSV kind comes from its header: pingpong/sweep (latency by size per hint,\n"
          "    P50 line and P50..P99 band, log axes, each hint marked), bw (hint,size,...,\n"
          "    bw_MBps: bandwidth by size per hint; --kind bw also reads a pingpong CSV),\n"
          "    allreduce (time by size), allreduce-compare (P50 per component and the first\n"
          "    one's ratio to the best other).  JSON dumps (files or a directory; see\n"
          "    btl_llrdma_dump) give the size histogram with the recommended hint marked.\n"
          "    --out FILE        PNG to write (default: the input with .png)\n"
          "    --kind K          auto (default), latency, bw, allreduce, compare, hist\n"
          "    --title T, --width PX, --height PX (default 900 x 560)\n"
          "\n"
          "ENVIRONMENT\n"
          "    LLRDMA_GNUPLOT    gnuplot used by plot (default: gnuplot in PATH)\n"
          "    LLRDMA_MPIRUN     mpirun used by the drivers (default: mpirun in PATH)\n"
          "    LLRDMA_BENCH      program the drivers relaunch (default: argv[0], which may be\n"
          "                      a libtool wrapper script in a build tree)\n"
          "\n"
          "EXIT STATUS\n"
          "    0 success; 1 --verify (incast: always) found wrong or missing data; 2 bad\n"
          "    command line (the message names the option and value); 3 run-time failure\n"
          "    (too few ranks, allocation, CUDA device, a relaunched run failed); 4 --device\n"
          "    in a build without CUDA.\n"
          "\n"
          "EXAMPLES\n"
          "    mpirun -np 2 --mca btl_llrdma_size_hint 8K llrdma-bench pingpong --around-hint\n"
          "    mpirun -np 2 --mca btl_llrdma_size_hint 8K llrdma-bench bw --min 1K --max 64M\n"
          "    mpirun -np 4 llrdma-bench incast --messages 400 --size 8,hint --busy-ms 1000\n"
          "    llrdma-bench sweep --hints 0,8K,64K --csv sweep.csv -- --iters 1000\n"
          "    llrdma-bench allreduce-compare --np 4 --colls llrdma,tuned -- --max 2M\n"
          "    llrdma-bench plot sweep.csv            # writes sweep.png\n",
          fp);
}

/* ------------------------------------------------------------ self-test */

static int expect_sizes(const char *what, const char *list, int around, uint64_t hint,
                        const uint64_t *want, int nwant, int want_dropped)
{
    bench_size_spec_t spec;
    uint64_t got[BENCH_MAX_SIZES];
    int n, dropped, bad = 0;

    memset(&spec, 0, sizeof(spec));
    spec.around_hint = around;
    if (NULL != list && 0 != bench_parse_size_list("selftest", "--sizes", list, &spec)) {
        fprintf(stderr, "selftest: %s: '%s' rejected\n", what, list);
        return 1;
    }
    n = bench_resolve_sizes(&spec, 8, 64, hint, got, &dropped);
    bad = n != nwant || dropped != want_dropped;
    for (int i = 0; !bad && i < n; ++i) {
        bad = got[i] != want[i];
    }
    if (bad) {
        fprintf(stderr, "selftest: %s: got %d sizes (%d dropped):", what, n, dropped);
        for (int i = 0; i < n; ++i) {
            fprintf(stderr, " %llu", (unsigned long long)got[i]);
        }
        fprintf(stderr, "\n");
    }
    return bad;
}

int bench_selftest_main(void)
{
    int fail = bench_stats_selftest(stderr);
    bench_size_spec_t spec;
    bench_argv_t av = {0};
    char label[32];

    {
        const uint64_t w[] = {8, 16, 32, 64};
        fail += expect_sizes("default powers of two", NULL, 0, 0, w, 4, 0);
    }
    {
        const uint64_t w[] = {8, 256, 1024, 8191, 8192, 8193, 16384, 65536};
        fail += expect_sizes("list + hint-relative", "64K,8,256,1K,hint-1,hint,hint+1,hint*2,8", 0,
                             8192, w, 8, 0);
    }
    {
        const uint64_t w[] = {8, 256};
        fail += expect_sizes("hint-relative without hint", "8,256,hint,hint+1", 1, 0, w, 2, 2);
    }
    {
        const uint64_t w[] = {8, 16, 32, 64, 4095, 4096, 4097};
        fail += expect_sizes("--around-hint", NULL, 1, 4096, w, 7, 0);
    }
    {
        const uint64_t w[] = {4};
        fail += expect_sizes("hint-N below zero dropped", "hint-9,hint/2", 0, 8, w, 1, 1);
    }
    memset(&spec, 0, sizeof(spec));
    fprintf(stderr, "selftest: the next %d messages are expected:\n", 4);
    if (0 == bench_parse_size_list("selftest", "--sizes", "8,abc", &spec) ||
        0 == bench_parse_size_list("selftest", "--sizes", "hint%2", &spec) ||
        0 == bench_parse_size_list("selftest", "--sizes", "hint*0", &spec) ||
        0 == bench_parse_size_list("selftest", "--sizes", "2G", &spec)) {
        fprintf(stderr, "selftest: a bad size list was accepted\n");
        ++fail;
    }
    if (0 != bench_split_args("selftest", "--mpirun-args", "-x A='b c' --mca \"x y\" z\\ w", &av) ||
        5 != av.n || 0 != strcmp(av.v[1], "A=b c") || 0 != strcmp(av.v[3], "x y") ||
        0 != strcmp(av.v[4], "z w")) {
        fprintf(stderr, "selftest: --mpirun-args splitting is wrong (%d words)\n", av.n);
        ++fail;
    }
    bench_argv_free(&av);
    bench_size_label(62 * 1024, label, sizeof(label));
    if (0 != strcmp(label, "62 KB")) {
        fprintf(stderr, "selftest: label of 62K is '%s'\n", label);
        ++fail;
    }
    printf("llrdma-bench selftest: %s (%d failure%s)\n", fail ? "FAILED" : "ok", fail,
           1 == fail ? "" : "s");
    return fail ? BENCH_EXIT_RUNTIME : BENCH_EXIT_OK;
}

/* ------------------------------------------------------------ main */

static int wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc && 0 != strcmp(argv[i], "--"); ++i) {
        if (0 == strcmp(argv[i], "--help") || 0 == strcmp(argv[i], "-h")) {
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : NULL;
    static char errbuf[BUFSIZ];

    /* One write per stderr line: glibc 2.37 and later write an unbuffered
     * stream's fprintf in 128-byte pieces, and mpirun forwards each piece as
     * it comes, so another rank's line could land inside a long one (the
     * --verify reports, under Debian 13's Open MPI 5.0). */
    setvbuf(stderr, errbuf, _IOLBF, sizeof(errbuf));

    if (NULL == mode) {
        bench_usage_error(NULL, "missing mode: pingpong, bw, bibw, allreduce, incast, sweep "
                                "or allreduce-compare");
        return BENCH_EXIT_USAGE;
    }
    if (0 == strcmp(mode, "--help") || 0 == strcmp(mode, "-h") || 0 == strcmp(mode, "help") ||
        wants_help(argc - 2, argv + 2)) {
        if (bench_early_printer()) {
            bench_help(stdout);
        }
        return BENCH_EXIT_OK;
    }
    if (0 == strcmp(mode, "--version")) {
        printf("llrdma-bench (llrdma) %s%s\n", PACKAGE_VERSION,
#ifdef LLRDMA_HAVE_CUDA
               ", with CUDA"
#else
               ", without CUDA"
#endif
        );
        return BENCH_EXIT_OK;
    }
    if (0 == strcmp(mode, "pingpong")) {
        return bench_pingpong_main(argc - 2, argv + 2);
    }
    if (0 == strcmp(mode, "bw")) {
        return bench_bw_main(argc - 2, argv + 2);
    }
    if (0 == strcmp(mode, "bibw")) {
        return bench_bibw_main(argc - 2, argv + 2);
    }
    if (0 == strcmp(mode, "allreduce")) {
        return bench_allreduce_main(argc - 2, argv + 2);
    }
    if (0 == strcmp(mode, "incast")) {
        return bench_incast_main(argc - 2, argv + 2);
    }
    if (0 == strcmp(mode, "sweep")) {
        return bench_sweep_main(argc - 2, argv + 2, argv[0]);
    }
    if (0 == strcmp(mode, "allreduce-compare")) {
        return bench_compare_main(argc - 2, argv + 2, argv[0]);
    }
    if (0 == strcmp(mode, "selftest")) {
        return bench_selftest_main();
    }
    if (0 == strcmp(mode, "plot")) {
        return bench_plot_main(argc - 2, argv + 2);
    }
    bench_usage_error(NULL,
                      "unknown mode '%s' (expected pingpong, bw, bibw, allreduce, incast, "
                      "sweep, allreduce-compare, plot, selftest)",
                      mode);
    return BENCH_EXIT_USAGE;
}
