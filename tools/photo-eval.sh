#!/usr/bin/env bash
# photo-eval.sh - the photo model's card numbers (data/models/changelens-photo.md): from a
# training checkpoint (or model), the f16 model file, then on photo-edits' held-out photographs
# (opencv-doc, never trained on) its heat maps and its text at each nuisance level, the time of
# a 512 × 512 describe, and how the unfamiliar-image statistics (model fit-ood) would flag each
# set (fitted into a separate file: the shipped model does not carry them; OOD=0 skips them).
# A checkpoint's objects head goes into the model file (model convert --objects-from).
# Writes OUT/.
#   tools/photo-eval.sh runs/photo2/model.safetensors runs/photo-eval
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
IN=$1
OUT=${2:-runs/photo-eval}
N=${N:-200}
cli=build/app/changelens-cli
mkdir -p "$OUT"
# a training checkpoint's objects head becomes the model's (docs/MODEL.md §3.13)
objects=()
if head -c 200000 "$IN" | grep -aq 'aux.objects.weight'; then
  objects=(--objects-from "$IN")
fi
"$cli" model convert --dtype f16 "${objects[@]}" "$IN" "$OUT/model.safetensors"
for level in 0 1 2; do
  "$cli" eval-change --model "$OUT/model.safetensors" --task photo-edits --set heldout \
    --n "$N" --nuisance "$level" --describe --json "$OUT/heldout-$level.json" \
    2>/dev/null | tee "$OUT/heldout-$level.txt" &
  [ "$level" = 1 ] && wait
done
wait
# a 512 × 512 pair of held-out photographs, described three times (the first loads the files)
rm -rf "$OUT/pair512"
"$cli" synth --task photo-edits --photos heldout --n 1 --seed 3 --size 512 --out "$OUT/pair512" \
  --quiet
for i in 1 2 3; do
  /usr/bin/time -f "describe 512 x 512: %e s wall" "$cli" describe --model "$OUT/model.safetensors" \
    --heatmap "$OUT/pair512/heat" "$OUT"/pair512/images/000001-1.png \
    "$OUT"/pair512/images/000001-2.png 2>&1 | tee -a "$OUT/describe512.txt"
done
[ "${OOD:-1}" = 0 ] && exit 0 # OOD=0: without the unfamiliar-image rates
"$cli" model fit-ood --model "$OUT/model.safetensors" --out "$OUT/with-ood.safetensors" --n 200 \
  --check heldout,radiograph,aerial,shapes,edits | tee "$OUT/ood.txt"
