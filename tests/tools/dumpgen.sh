# shellcheck shell=bash
# Shell helpers that write llrdma finalize records (the btl_llrdma_dump line
# written at MPI_Finalize, llrdma_core/histogram.cc) for the tool tests.
#   mkrec RANK HINT WAITS_LL "PATH:BUCKET:COUNT ..."
# PATH is ll or bw; bucket b holds payloads (2^(b-1), 2^b]; bytes are count x
# (2^b + 64), the largest fragment of the bucket.
mkrec() {
  awk -v rank="$1" -v hint="$2" -v waits="$3" -v spec="$4" 'BEGIN {
    n = split(spec, items, " ")
    for (i = 1; i <= n; ++i) {
      split(items[i], f, ":")
      cnt[f[1], f[2]] += f[3]
    }
    printf "{\"rank\":%d,\"size\":4,\"host\":\"h%d\",\"pid\":%d,\"size_hint\":%d,", rank, rank, 1000 + rank, hint
    printf "\"ll_sq_depth\":%d,\"record\":\"finalize\",\"stats\":{\"buckets\":\"log2\",", hint ? 64 : 0
    printf "\"header_allowance\":64,\"bucket_max\":["
    for (b = 0; b < 32; ++b) printf "%s%s", b ? "," : "", b == 31 ? "null" : sprintf("%.0f", 2 ^ b)
    printf "]"
    np = split("ll bw rdma", paths, " ")
    for (p = 1; p <= np; ++p) {
      printf ",\"%s\":{\"count\":[", paths[p]
      for (b = 0; b < 32; ++b) printf "%s%d", b ? "," : "", cnt[paths[p], b]
      printf "],\"bytes\":["
      for (b = 0; b < 32; ++b) printf "%s%.0f", b ? "," : "", cnt[paths[p], b] * (2 ^ b + 64)
      printf "],\"waits\":%d}", paths[p] == "ll" ? waits : 0
    }
    printf "}}\n"
  }'
}
