#!/usr/bin/env bash
# llrdma-bench plot: every chart type from fixture CSVs and dumps, checked as
# PNG (signature, dimensions, non-trivial content: decoded with python3 when
# present), the error when gnuplot is missing, and bad input naming the file.
set -u
src="${srcdir:-.}"
fix="$src/tests/tools/fixtures"
. "$src/tests/tools/dumpgen.sh"
. "$src/tests/tools/tap.sh"
# png_ok FILE W H: PNG signature and IHDR size (od), then content (python3).
png_ok() {
  local f=$1 w=$2 h=$3
  [ -s "$f" ] || { echo "no file $f" >"$tmp/out"; return 1; }
  [ "$(od -An -tx1 -N8 "$f" | tr -d ' \n')" = 89504e470d0a1a0a ] ||
    { echo "$f: not a PNG" >"$tmp/out"; return 1; }
  local dims
  dims=$(od -An -tu1 -j16 -N8 "$f" | awk '{print $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8}')
  [ "$dims" = "$w $h" ] || { echo "$f: ${dims} instead of $w $h" >"$tmp/out"; return 1; }
  command -v python3 >/dev/null || return 0
  python3 - "$f" >"$tmp/out" 2>&1 <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
pos, idat, hdr = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        hdr = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
w, h, depth, ctype = hdr[0], hdr[1], hdr[2], hdr[3]
bpp = {2: 3, 6: 4}.get(ctype)
if depth != 8 or bpp is None:
    sys.exit("unexpected PNG format depth=%d type=%d" % (depth, ctype))
raw, stride = zlib.decompress(idat), w * bpp
prev, colours, ink = bytearray(stride), set(), 0
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        px = bytes(line[x:x + 3])
        colours.add(px)
        ink += px != b"\xff\xff\xff"
    prev = line
share = ink / (w * h)
print("colours %d, non-white %.1f%%" % (len(colours), 100 * share))
sys.exit(0 if len(colours) >= 8 and share >= 0.02 else "blank or near-blank chart")
PY
}
chart() { # NAME OUT W H CMD...
  local name=$1 out=$2 w=$3 h=$4
  shift 4
  if "$@" >"$tmp/out" 2>&1 && png_ok "$out" "$w" "$h"; then ok "$name"; else bad "$name"; fi
}

if command -v gnuplot >/dev/null || [ -n "${LLRDMA_GNUPLOT:-}" ]; then
  for k in pingpong sweep bw allreduce compare; do
    chart "plot $k.csv" "$tmp/$k.png" 900 560 ./llrdma-bench plot --out "$tmp/$k.png" "$fix/$k.csv"
  done
  chart "plot --kind bw of a pingpong CSV, --width/--height" "$tmp/ppbw.png" 640 400 \
    ./llrdma-bench plot --kind bw --width 640 --height 400 --out "$tmp/ppbw.png" "$fix/pingpong.csv"
  cp "$fix/sweep.csv" "$tmp/default.csv"
  chart "plot writes INPUT.png by default" "$tmp/default.png" 900 560 ./llrdma-bench plot "$tmp/default.csv"
  mkdir "$tmp/dumps"
  for r in 0 1 2 3; do
    mkrec $r 65536 40 "ll:8:500 ll:12:500 ll:13:30 bw:20:10" >"$tmp/dumps/llrdma-$r.json"
  done
  chart "plot the size histogram of a dump directory" "$tmp/hist.png" 900 560 \
    ./llrdma-bench plot --out "$tmp/hist.png" "$tmp/dumps"
  if grep -q . "$tmp/out"; then :; fi
  mkrec 0 0 0 "bw:4:500 bw:20:500" >"$tmp/bimodal.json"
  chart "plot the histogram of a no-hint dump" "$tmp/bimodal.png" 900 560 \
    ./llrdma-bench plot --out "$tmp/bimodal.png" "$tmp/bimodal.json"
else
  for k in charts histogram; do skip "plot $k" "gnuplot not installed (apt-get install gnuplot-nox)"; done
fi

# gnuplot missing: a clear error saying how to get it.
mkdir "$tmp/nobin"
run "no gnuplot in PATH" 3 'gnuplot not found in PATH: install it \(Debian/Ubuntu: apt-get install gnuplot-nox\)' \
  env -u LLRDMA_GNUPLOT PATH="$tmp/nobin" ./llrdma-bench plot --out "$tmp/x.png" "$fix/sweep.csv"
run "LLRDMA_GNUPLOT not executable" 3 "LLRDMA_GNUPLOT='$tmp/nobin/gnuplot' is not an executable" \
  env LLRDMA_GNUPLOT="$tmp/nobin/gnuplot" ./llrdma-bench plot --out "$tmp/x.png" "$fix/sweep.csv"

# Bad input names the file (gnuplot is not needed to find out; use a stand-in).
printf '#!/bin/sh\nexit 0\n' >"$tmp/nobin/gnuplot"
chmod +x "$tmp/nobin/gnuplot"
export LLRDMA_GNUPLOT="$tmp/nobin/gnuplot"
run "a CSV of the wrong kind" 3 "pingpong.csv: --kind compare does not fit a pingpong/sweep CSV" \
  ./llrdma-bench plot --kind compare "$fix/pingpong.csv"
printf 'round,sender,drain_ms\n1,1,0.2\n' >"$tmp/incast.csv"
run "a foreign CSV" 3 "incast.csv: not a CSV of pingpong, sweep, bw, allreduce or allreduce-compare" \
  ./llrdma-bench plot "$tmp/incast.csv"
{ head -2 "$fix/sweep.csv"; echo "8192,abc,1000,1,1,1,1,1,1,1,1,0,0"; } >"$tmp/badrow.csv"
run "a bad number names file and line" 3 "badrow.csv:3: 'abc' is not a number" ./llrdma-bench plot "$tmp/badrow.csv"
head -1 "$fix/sweep.csv" >"$tmp/header.csv"
run "a CSV without rows" 3 "header.csv: no data rows" ./llrdma-bench plot "$tmp/header.csv"
mkrec 0 0 0 "ll:10:5" | head -c 200 >"$tmp/trunc.json"
run "a truncated dump" 3 "trunc.json:1: not valid JSON" ./llrdma-bench plot "$tmp/trunc.json"
echo '{"benchmark":"osu"}' >"$tmp/foreign.json"
run "a foreign JSON dump" 3 "foreign.json:1: not an llrdma dump record" ./llrdma-bench plot "$tmp/foreign.json"
run "gnuplot that draws nothing" 3 "wrote no image" ./llrdma-bench plot --out "$tmp/none.png" "$fix/sweep.csv"
run "unknown kind" 2 "--kind 'pie': expected" ./llrdma-bench plot --kind pie "$fix/sweep.csv"
echo "1..$n"
exit $fail
