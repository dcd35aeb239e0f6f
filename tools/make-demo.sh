#!/usr/bin/env bash
# tools/make-demo.sh - makes the demo cases the app gives an empty case database on its first run:
# one pair per domain, rendered by core/synth through `changelens-cli synth`, written
# as the files a user would have (radiographs as DICOM, aerial tiles as GeoTIFF, photos as PNG)
# into data/demo/, with data/demo/cases.json naming them. Deterministic; re-run it only when the
# generators change, and commit the result.
#
#   tools/make-demo.sh [OUT=data/demo] [SIZE=320]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-data/demo}
SIZE=${SIZE:-320}
CLI=build/app/changelens-cli
[ -x "$CLI" ] || { echo "make-demo: build first (./run.sh test or ninja -C build)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$OUT" && mkdir -p "$OUT"
# 8 candidates per task; the first whose pair has a change is kept (aerial pairs are half
# no-change, and a demo should show something). The photo edit is made in a real
# photograph: the photo-edits task on its held-out photographs (Debian opencv-doc's samples),
# the kind of pair the photo model (data/models/changelens-photo.md) describes.
for task in radiograph aerial; do
  "$CLI" synth --task "$task" --n 8 --seed 20261122 --size "$SIZE" --out "$tmp/$task" --quiet
done
# The sample is picked by hand (photo-edits-000012 below): an added object in a colour photograph with no person
# in it.
"$CLI" synth --task photo-edits --photos heldout --n 12 --seed 7 --size "$SIZE" \
  --out "$tmp/edits" --quiet
python3 - "$tmp" "$OUT" <<'PY'
import json, os, shutil, sys
tmp, out = sys.argv[1], sys.argv[2]
names = {"radiograph": "Demo: chest radiograph and its prior",
         "aerial": "Demo: aerial tile, before and after",
         "edits": "Demo: photo and its edit"}
cases = []
for task in ("radiograph", "aerial", "edits"):
    for line in open(os.path.join(tmp, task, "data.jsonl")):
        s = json.loads(line)
        answer = s["messages"][-1]["content"]
        if task == "aerial" and not s["answer"].get("change", True):
            continue
        if task == "edits" and s["id"] != "photo-edits-000012":
            continue
        os.makedirs(os.path.join(out, task))
        files = []
        for k, img in enumerate(s["images"]):
            ext = os.path.splitext(img)[1]
            name = ("before" if k == 0 else "after") + ext
            shutil.copy(os.path.join(tmp, task, img), os.path.join(out, task, name))
            files.append(f"{task}/{name}")
        cases.append({"name": names[task], "domain": task, "images": files,
                      "reference": answer, "source": s["id"]})
        break
json.dump({"cases": cases}, open(os.path.join(out, "cases.json"), "w"), indent=1,
          ensure_ascii=False)
for c in cases:
    print(f"{c['domain']:11s} {c['source']}: {c['reference']}")
PY
