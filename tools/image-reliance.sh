#!/usr/bin/env bash
# tools/image-reliance.sh - does a model read its images? For each task, the loss of the answer
# under the training mask on N held-out samples with their own images and with another
# sample's images (the `images` lists permuted by one); a model that ignores its images gets
# the same loss for both (docs/runs/2026-11-22-ship2.md). One `train` step at lr 1e-12 measures
# the loss; nothing is saved but the numbers.
#
#   tools/image-reliance.sh MODEL [TASKS=shapes,dots,radiograph,aerial,edits] [N=40] [SEED=5]
#   OBJECTS=MIN-MAX tools/image-reliance.sh …   (shapes scenes with that many objects)
#
# Prints one line per task: own, another's, gap (another's − own).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:?usage: tools/image-reliance.sh MODEL [TASKS] [N] [SEED]}
TASKS=${2:-shapes,dots,radiograph,aerial,edits}
N=${3:-40}
SEED=${4:-5}
CLI=build/app/changelens-cli
[ -x "$CLI" ] || { echo "image-reliance: build first (ninja -C build)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
loss() {  # loss MODEL DATA → the step's loss
  "$CLI" train --from "$1" --data "$2" --steps 1 --batch "$N" --lr 1e-12 --no-aux \
    --checkpoint-every 0 --out "$tmp/run" --quiet >/dev/null 2>"$tmp/err" ||
    { cat "$tmp/err" >&2; exit 1; }
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["type"] == "train": print("%.4f" % r["loss"]); break' "$tmp/run/train.jsonl"
  rm -rf "$tmp/run"
}
printf '%-20s %8s %10s %8s\n' task own another gap
for t in ${TASKS//,/ }; do
  "$CLI" synth --task "$t" --n "$N" --seed "$SEED" ${OBJECTS:+--objects "$OBJECTS"} \
    --out "$tmp/$t" --quiet
  python3 - "$tmp/$t/data.jsonl" "$tmp/$t/swap.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as f:
    for i, r in enumerate(rows):
        other = rows[(i + 1) % len(rows)]["images"]
        # another sample's images, as many as this sample's <image> tags need
        r["images"] = (other * len(r["images"]))[:len(r["images"])]
        f.write(json.dumps(r) + "\n")
PY
  own=$(loss "$MODEL" "$tmp/$t/data.jsonl")
  other=$(loss "$MODEL" "$tmp/$t/swap.jsonl")
  printf '%-20s %8s %10s %8.4f\n' "$t" "$own" "$other" "$(python3 -c "print($other - $own)")"
done
