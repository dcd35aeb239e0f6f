#!/usr/bin/env bash
# photo-eval.sh - the photo model's card numbers (data/models/README.md): from a training
# checkpoint (or model), the model file with its unfamiliar-image statistics fitted, then on
# photo-edits' held-out photographs (opencv-doc, never trained on) the heat maps and the text at
# each nuisance level, and the time of a 512 × 512 describe. Writes OUT/*.txt and OUT/*.json.
#   tools/photo-eval.sh runs/photo1/checkpoints/step-00001800.safetensors runs/photo1/eval
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
CKPT=$1
OUT=${2:-runs/photo-eval}
N=${N:-200}
cli=build/app/changelens-cli
mkdir -p "$OUT"
"$cli" model fit-ood --model "$CKPT" --out "$OUT/model.safetensors" --n 300 | tee "$OUT/ood.txt"
for level in 0 1 2; do
  "$cli" eval-change --model "$OUT/model.safetensors" --task photo-edits --set heldout \
    --n "$N" --nuisance "$level" --describe --json "$OUT/heldout-$level.json" \
    2>/dev/null | tee "$OUT/heldout-$level.txt"
done
# a 512 × 512 pair: the held-out photo-edits pair at 512 px, described by the model
rm -rf "$OUT/pair512"
"$cli" synth --task photo-edits --photos heldout --n 1 --seed 3 --size 512 --out "$OUT/pair512" --quiet
for i in 1 2 3; do
  "$cli" describe --model "$OUT/model.safetensors" --json "$OUT"/pair512/images/000001-1.png \
    "$OUT"/pair512/images/000001-2.png >"$OUT/describe512-$i.json"
done
grep -h '"total_ms"\|"text"' "$OUT"/describe512-*.json | tee "$OUT/describe512.txt"
