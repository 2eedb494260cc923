#!/usr/bin/env bash
# dash-train on 2 local ranks (Gloo on 127.0.0.1): trains, checkpoints each rank's
# shard, refuses to resume on 3 ranks or 1 naming --nproc 2, resumes on 2; the zero
# scheme (dash averages the gradients) trains and refuses gradient clipping.
# Usage: dash_train_nproc_smoke.sh PATH/TO/dash-train
set -euo pipefail
exe=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq 1 2000); do echo "block $i of the stack is preconditioned by its inverse root."; done > "$out/corpus.txt"
common=(--data "$out/corpus.txt" --optimizer dash --dim 32 --layers 1 --heads 2 --seq-len 32 --batch-size 4 --steps 6 --eval-every 3
        --eval-batches 1 --block-size 32 --start-step 2 --root-frequency 2 --progress false --out-dir "$out")
"$exe" "${common[@]}" --nproc 2 --stop-at 3
test -f "$out/run/checkpoint.pt" && test -f "$out/run/checkpoint-rank1.pt"
if "$exe" "${common[@]}" --nproc 3 --resume 2> "$out/error.txt"; then
  echo "FAIL: resuming a 2-rank checkpoint on 3 ranks succeeded" >&2
  exit 1
fi
grep -q "written by a run on 2 ranks, this run has 3: resume it with --nproc 2" "$out/error.txt" ||
  { cat "$out/error.txt" >&2; exit 1; }
if "$exe" "${common[@]}" --nproc 1 --resume 2> "$out/error.txt"; then
  echo "FAIL: resuming a 2-rank checkpoint in one process succeeded" >&2
  exit 1
fi
grep -q "resume it with --nproc 2" "$out/error.txt" || { cat "$out/error.txt" >&2; exit 1; }
"$exe" "${common[@]}" --nproc 2 --resume
grep -q '"world_size": 2' "$out/run/summary.json"
grep -q '"finished": true' "$out/run/summary.json"
"$exe" "${common[@]}" --nproc 2 --name zero --distribution-scheme zero --clip-grad-norm 0
grep -q '"finished": true' "$out/zero/summary.json"
if "$exe" "${common[@]}" --nproc 2 --name zero-clipped --distribution-scheme zero 2> "$out/error.txt"; then
  echo "FAIL: the zero scheme accepted gradient clipping" >&2
  exit 1
fi
grep -q "'distribution_scheme' zero needs clip_grad_norm 0" "$out/error.txt" || { cat "$out/error.txt" >&2; exit 1; }
echo "dash-train --nproc 2 smoke: OK"
