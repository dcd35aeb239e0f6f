#!/usr/bin/python3
"""shapes_attributes.py - how often a model names a shapes change's object right, attribute by
attribute, from `changelens-cli eval --task shapes --answers FILE`: over the answers whose
reference names one object (one change, not a replacement), the first object the answer names
against the reference's (size, colour, material, shape; chance 0.5, 0.125, 0.5, 0.33), and the
kind of change by its wording.

    python3 tools/shapes_attributes.py ANSWERS.jsonl
"""
import json
import re
import sys

OBJECT = re.compile(r'\b(small|large) (\w+) (metal|rubber) (cube|sphere|cylinder)')


def kind(text):
    t = text.lower()
    if any(w in t for w in ("replace", "gave up its position", "swapped", "instead of",
                            "took the place")):
        return "replace"
    if any(w in t for w in ("added", "new ", "appeared", "visible")):
        return "add"
    if any(w in t for w in ("moved", "location", "position")):
        return "move"
    return "remove"


def main():
    n, right, kinds = 0, [0, 0, 0, 0], 0
    for line in open(sys.argv[1]):
        a = json.loads(line)
        ref, got = OBJECT.findall(a["reference"]), OBJECT.findall(a["prediction"])
        if len(ref) != 1 or not got:
            continue
        n += 1
        for i in range(4):
            right[i] += ref[0][i] == got[0][i]
        kinds += kind(a["reference"]) == kind(a["prediction"])
    if not n:
        sys.exit(f"{sys.argv[1]}: no answer with a single-object reference")
    print(f"{sys.argv[1]}: {n} single-object references; size {right[0] / n:.2f} colour "
          f"{right[1] / n:.2f} material {right[2] / n:.2f} shape {right[3] / n:.2f} kind "
          f"{kinds / n:.2f}")


if __name__ == "__main__":
    main()
