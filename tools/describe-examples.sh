#!/usr/bin/env bash
# tools/describe-examples.sh - what a model says about held-out pairs it never saw: for each
# domain, N pairs from the held-out seed (900001, as eval uses), `describe` with the model and
# its heat map next to the generator's own answer. Writes OUT/<task>-<i>-heat-2.png and prints
# one block per pair (the model card shows such examples for the shapes, radiograph and aerial
# pairs, with their heat maps).
#
#   tools/describe-examples.sh MODEL [OUT=runs/examples] [N=5] [TASKS="shapes radiograph aerial edits"]
#   BEAM=4 tools/describe-examples.sh ...   beam search with 4 beams instead of greedy
#   SAMPLES="282 946" tools/describe-examples.sh MODEL OUT 1000 shapes
#                                           only these of the N pairs (as eval --answers numbers them)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:?usage: tools/describe-examples.sh MODEL [OUT] [N] [TASKS]}
OUT=${2:-runs/examples}
N=${3:-5}
TASKS=${4:-shapes radiograph aerial edits}
CLI=build/app/changelens-cli
[ -x "$CLI" ] || { echo "describe-examples: build first (ninja -C build)" >&2; exit 1; }
mkdir -p "$OUT"
size=$(python3 -c 'import json,sys; from struct import unpack
f=open(sys.argv[1],"rb"); n=unpack("<Q",f.read(8))[0]; h=json.loads(f.read(n))
print(json.loads(h["__metadata__"]["changelens.config"])["image_size"])' "$MODEL")
for t in $TASKS; do
  rm -rf "$OUT/$t-data"
  "$CLI" synth --task "$t" --n "$N" --seed 900001 --size "$size" --out "$OUT/$t-data" --quiet
  python3 - "$OUT/$t-data/data.jsonl" <<'PY' > "$OUT/$t-list.tsv"
import json, sys
for i, line in enumerate(open(sys.argv[1])):
    s = json.loads(line)
    print("\t".join([str(i + 1), s["messages"][-1]["content"]] + s["images"]))
PY
  while IFS=$'\t' read -r i ref imgs; do
    if [ -n "${SAMPLES:-}" ] && [[ " $SAMPLES " != *" $i "* ]]; then continue; fi
    files=()
    for f in $imgs; do files+=("$OUT/$t-data/$f"); done
    got=$("$CLI" describe --model "$MODEL" --domain "$t" --device cpu -n 96 --beam "${BEAM:-1}" \
            --heatmap "$OUT/$t-$i-heat" "${files[@]}" 2>/dev/null)
    printf '%s %s\n  reference: %s\n  model:     %s\n  heat map:  %s\n' "$t" "$i" "$ref" \
      "$got" "$OUT/$t-$i-heat-2.png"
  done < <(awk -F'\t' '{ printf "%s\t%s\t", $1, $2; for (k = 3; k <= NF; k++) printf "%s ", $k; print "" }' "$OUT/$t-list.tsv")
done
