#!/usr/bin/python3
"""study_photo_table.py - the table of tools/study-photo.sh: per variant, each measure's mean
over the seeds with its spread (half the range), from OUT/seedS/VARIANT/eval-change.json;
Markdown on standard output."""
import argparse
import json
import os
import statistics

# (label, how to read it from an eval-change JSON, scale)
COLUMNS = [
    ("change head AUROC", lambda d: source(d, "change", "auroc_pooled"), 1),
    ("hottest on change %", lambda d: source(d, "change", "hottest_on_change"), 100),
    ("Δ map AUROC", lambda d: source(d, "delta", "auroc_pooled"), 1),
    ("change call %", lambda d: d["text"]["change_called"], 100),
    ("kind %", lambda d: d["text"]["kind"], 100),
    ("position %", lambda d: d["text"]["position"], 100),
    ("object %", lambda d: d["text"]["object"], 100),
]


def source(d, name, key):
    for s in d["sources"]:
        if s["name"] == name and s.get("available"):
            return s[key]
    return None


def cell(values, scale):
    values = [v * scale for v in values if v is not None]
    if not values:
        return "–"
    digits = 3 if scale == 1 else 1
    mean = statistics.fmean(values)
    half = (max(values) - min(values)) / 2
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--variants", nargs="+", required=True)
    ap.add_argument("--seeds", nargs="+", required=True)
    ap.add_argument("--command", default="tools/study-photo.sh")
    a = ap.parse_args()
    print(f"Made by `{a.command}`. Each cell: mean over seeds {', '.join(a.seeds)} ± half the "
          "range, on held-out photographs (opencv-doc).\n")
    print("| variant | " + " | ".join(c[0] for c in COLUMNS) + " |")
    print("|---|" + "---|" * len(COLUMNS))
    for v in a.variants:
        runs = []
        for s in a.seeds:
            p = os.path.join(a.out, f"seed{s}", v, "eval-change.json")
            if os.path.exists(p):
                with open(p) as f:
                    runs.append(json.load(f))
        if not runs:
            continue
        cells = [cell([get(d) for d in runs], scale) for _, get, scale in COLUMNS]
        print(f"| {v} | " + " | ".join(cells) + " |")
    # the trivial answers on the same pairs: the changed share and the hottest-cell chance
    for s in a.seeds:
        p = os.path.join(a.out, f"seed{s}", a.variants[0], "eval-change.json")
        if os.path.exists(p):
            with open(p) as f:
                d = json.load(f)
            changed = d["changed_pairs"] / d["pairs"] if d.get("pairs") else None
            if changed is not None:
                print(f"\nChance: AUROC 0.5; hottest cell on the change "
                      f"{100 * d['chance']['hottest_on_change']:.1f} %; always \"change\" "
                      f"{100 * changed:.1f} % right, always \"no change\" "
                      f"{100 - 100 * changed:.1f} %.")
            break


if __name__ == "__main__":
    main()
