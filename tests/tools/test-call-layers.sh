#!/usr/bin/env bash
# The components' files stand in layers: no file calls one that calls it back
# (contrib/check-calls over the built objects: btl/llrdma, coll/llrdma).  And
# the checker itself can fail: two objects that call each other are named as
# a circle, with the calls that close it.
set -u
src="${srcdir:-.}"
. "$src/tests/tools/tap.sh"
command -v python3 >/dev/null || { echo "1..1"; skip "call layers" "no python3"; exit 0; }
command -v nm >/dev/null || { echo "1..1"; skip "call layers" "no nm"; exit 0; }
echo "1..4"

# The objects of one component: libtool's PIC copies where the module is shared.
objects() {
  local dir=$1 lib=$2 f
  for f in "$dir"/.libs/"$lib"_la-*.o "$dir"/"$lib"_la-*.o; do
    [ -f "$f" ] && echo "$f"
  done | awk -F/ '!seen[$NF]++'
}
for comp in opal_mca_btl_llrdma:mca_btl_llrdma:btl_llrdma_progress \
  ompi_mca_coll_llrdma:mca_coll_llrdma:coll_llrdma_allreduce; do
  IFS=: read -r dir lib probe <<<"$comp"
  mapfile -t objs < <(objects "$dir" "$lib")
  if [ "${#objs[@]}" -eq 0 ]; then
    skip "$lib: files in layers" "not built in this configuration"
    continue
  fi
  # The file the layering is about must be among them, calling something.
  if python3 "$src/contrib/check-calls" "${objs[@]}" >"$tmp/out" 2>&1 &&
    grep -qE "^ *[0-9]+ $probe: [a-z]" "$tmp/out"; then
    ok "$lib: ${#objs[@]} files in $(awk 'END {print $1}' "$tmp/out") layers, no circle"
  else
    bad "$lib: files in layers"
  fi
done

# A circle of two files, and a file above it.
cc=${CC:-cc}
printf 'void b(void);\nvoid a(void) { b(); }\n' >"$tmp/x_la-one.c"
printf 'void a(void);\nvoid b(void) { a(); }\n' >"$tmp/x_la-two.c"
printf 'void a(void);\nvoid top(void) { a(); }\n' >"$tmp/x_la-top.c"
for f in one two top; do "$cc" -c -o "$tmp/x_la-$f.o" "$tmp/x_la-$f.c"; done
python3 "$src/contrib/check-calls" "$tmp"/x_la-*.o >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q "circle: one, two$" "$tmp/out" && grep -q "one -> two: b" "$tmp/out" &&
  ! grep -q "top" "$tmp/out"; then
  ok "a circle of two files is found and named (exit $rc)"
else
  echo "exit $rc" >>"$tmp/out"
  bad "a circle of two files is found and named"
fi
python3 "$src/contrib/check-calls" "$tmp/x_la-one.o" "$tmp/x_la-top.o" >"$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q "^  2 top: one$" "$tmp/out"; then
  ok "without the circle: layers, top above one"
else
  echo "exit $rc" >>"$tmp/out"
  bad "without the circle: layers"
fi
exit $fail
