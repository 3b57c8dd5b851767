#!/usr/bin/env bash
# docs/profile.md's table is exactly what the code derives.
set -u
doc="${srcdir:-.}/docs/profile.md"
args=$(sed -n 's/^<!-- BEGIN llrdma-hint profile \(.*\) -->$/\1/p' "$doc")
[ -n "$args" ] || { echo "no BEGIN marker in $doc"; exit 1; }
# shellcheck disable=SC2086
if diff -u <(sed -n '/^<!-- BEGIN/,/^<!-- END/p' "$doc" | sed '1d;$d') <(./llrdma-hint profile $args); then
  echo "ok - docs/profile.md matches llrdma-hint profile $args"
else
  echo "not ok - docs/profile.md is stale: regenerate the table with llrdma-hint profile $args"
  exit 1
fi
