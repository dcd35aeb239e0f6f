#!/usr/bin/python3
"""study_table.py - the table of tools/study.sh: per task and variant, each metric's mean over
the seeds with its spread (half the range), from OUT/seedS/VARIANT/eval-TASK.json; Markdown on
standard output."""
import argparse
import json
import os
import statistics

METRICS = {
    "shapes": [("change_accuracy", "change acc. %", 100), ("bleu4", "BLEU-4", 100),
               ("cider", "CIDEr-D", 100), ("meteor", "METEOR", 100), ("rougeL", "ROUGE-L", 100),
               ("ppl", "PPL", 1)],
    "dots": [("mae", "MAE ×10⁻²", 1), ("rmse", "RMSE ×10⁻²", 1), ("ppl", "PPL", 1)],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--variants", nargs="+", required=True)
    ap.add_argument("--seeds", nargs="+", required=True)
    ap.add_argument("--command", default="tools/study.sh")
    a = ap.parse_args()
    print("# The SVE study at ChangeLens scale\n")
    print(f"Made by `{a.command}`. Each cell: mean over seeds {', '.join(a.seeds)} ± half the "
          "range. Baseline: the task's trivial answer on the same held-out samples.\n")
    for task in a.tasks:
        cols = METRICS.get(task, [("bleu4", "BLEU-4", 100)])
        print(f"## {task}\n")
        print("| variant | " + " | ".join(c[1] for c in cols) + " |")
        print("|---|" + "---|" * len(cols))
        base = None
        for v in a.variants:
            vals = {c[0]: [] for c in cols}
            for s in a.seeds:
                p = os.path.join(a.out, f"seed{s}", v, f"eval-{task}.json")
                if not os.path.exists(p):
                    continue
                d = json.load(open(p))
                base = base or d.get("baseline")
                for key, _, scale in cols:
                    if d.get(key) is not None:
                        vals[key].append(d[key] * scale)
            cells = []
            for key, _, _ in cols:
                xs = vals[key]
                if not xs:
                    cells.append("–")
                elif len(xs) == 1:
                    cells.append(f"{xs[0]:.2f}")
                else:
                    cells.append(f"{statistics.mean(xs):.2f} ± {(max(xs) - min(xs)) / 2:.2f}")
            print(f"| {v} | " + " | ".join(cells) + " |")
        if base:
            cells = [f"{base[k] * s:.2f}" if base.get(k) is not None else "–" for k, _, s in cols]
            print("| *baseline* | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()
