#!/usr/bin/python3
"""model_card.py - writes data/models/README.md, the shipped model's card, from a finished
tools/ship-model.sh run: the exact commands, the training time and throughput on this machine,
the data, and every task's held-out metrics next to its trivial baseline.

    python3 tools/model_card.py runs/ship "OUT=runs/ship ... tools/ship-model.sh" > data/models/README.md

Optional files in the run's folder, printed as they are: bench-train.txt (bench --train
--vs-torch), reliance.txt (tools/image-reliance.sh), examples.md (describe on held-out pairs),
notes.md (remarks on where the model stands).
"""
import json
import os
import sys

KEYS = [("change_accuracy", "change acc. %", 100), ("exact", "answers exact %", 100),
        ("bleu4", "BLEU-4", 100),
        ("meteor", "METEOR", 100), ("rougeL", "ROUGE-L", 100), ("cider", "CIDEr-D", 100),
        ("finding_f1_micro", "finding F1 micro", 100), ("finding_f1_macro", "finding F1 macro", 100),
        ("mae", "MAE ×10⁻²", 1), ("rmse", "RMSE ×10⁻²", 1), ("ppl", "perplexity", 1)]
TASKS = ["shapes", "dots", "radiograph", "aerial", "edits"]


def stage_summary(path):
    first = last = end = None
    steps = []
    options = {}
    for line in open(path):
        d = json.loads(line)
        if d.get("type") == "start" and not options:
            options = d.get("options", {})
        if d.get("type") == "train":
            steps.append(d)
        elif d.get("type") == "end":
            end = d
    if not steps:
        return None
    first, last = steps[0], steps[-1]
    tail = steps[-50:]
    return {
        "steps": last["step"],
        "elapsed_s": last["elapsed_s"],
        "samples_per_s": sum(s["samples"] for s in steps) / max(last["elapsed_s"], 1e-9),
        "first_loss": first["loss"],
        "final_loss": sum(s["loss"] for s in tail) / len(tail),
        "end": end,
        "aux": aux_phrase(options),
        "batch": options.get("batch", 8),
        "lr": options.get("lr"),
        "task": options.get("task", ""),
        "dot_scale": options.get("dot_scale", 1),  # written only when not 1
        "dot_images": options.get("dot_images", 0),  # written only when set (train --images)
    }


def extra(stage):
    """A mix's entries (tools/ship-model.sh's task lists with MIX_EXTRA or MIX4_EXTRA), as
    words: each sample is drawn from one entry, all entries alike."""
    entries = stage["task"].split(",")
    if len(entries) < 2:
        return ""
    parts = [f"`{t}`" + (f" ×{entries.count(t)}" if entries.count(t) > 1 else "")
             for t in dict.fromkeys(entries)]
    note = "; `dots@K` is the dots task with K images" if any("@" in t for t in entries) else ""
    return f" (samples drawn evenly from {len(entries)} entries: {', '.join(parts)}{note})"


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def aux_phrase(o):
    w_obj, w_chg = o.get("aux_weight_objects", 0) or 0, o.get("aux_weight_changed", 0) or 0
    if w_obj <= 0 and w_chg <= 0:
        return "no auxiliary losses"
    return (f"the auxiliary losses on (objects and their attribute labels × {w_obj:g}, "
            f"changed patches × {w_chg:g}; training-only heads, not in the model)")


# the figure that says whether the model beats its task's baseline, and which way is better
HEADLINE = {"shapes": ("cider", 1), "dots": ("mae", -1), "radiograph": ("finding_f1_micro", 1),
            "aerial": ("cider", 1), "edits": ("cider", 1)}


def verdicts(run):
    """One line per task: the headline metric of the model and the baseline, and which wins:
    clearly (by over 20 % of the baseline's value), slightly (5-20 %), or not (a tie or worse)."""
    lines = []
    for t in TASKS:
        p = os.path.join(run, f"eval-{t}.json")
        if not os.path.exists(p):
            continue
        d = json.load(open(p))
        k, sign = HEADLINE[t]
        m, b = d.get(k), d.get("baseline", {}).get(k)
        if m is None or b is None:
            continue
        label = next(lab for key, lab, _ in KEYS if key == k)
        margin = 0.05 * abs(b) if b else 1e-3
        if sign * (m - b) > 4 * margin:
            word = "**clearly better** than the baseline"
        elif sign * (m - b) > margin:
            word = "slightly better than the baseline"
        elif sign * (b - m) > margin:
            word = "**worse** than the baseline"
        else:
            word = "**no better** than the baseline"
        scale = 100 if k != "mae" else 1
        # the other text metrics where they disagree with the headline
        below = [lab for key, lab, _ in KEYS if key in ("bleu4", "meteor", "rougeL", "cider")
                 and key != k and d.get(key) is not None and d["baseline"].get(key) is not None
                 and d[key] < d["baseline"][key]]
        extra = f" (but {', '.join(below)} below the baseline's)" if below and sign * (m - b) > margin else ""
        lines.append(f"- {t}: {label} {m * scale:.2f} vs {b * scale:.2f} — {word}{extra}")
    return lines


def fmt(v, scale):
    return "–" if v is None else f"{v * scale:.2f}"


def main():
    run, command = sys.argv[1], sys.argv[2]
    def optional(stage):  # a stage the recipe may skip: its summary, or None
        path = os.path.join(run, stage, "train.jsonl")
        return stage_summary(path) if os.path.exists(path) else None
    s0 = optional("stage0")
    s1 = stage_summary(os.path.join(run, "stage1", "train.jsonl"))
    s2 = stage_summary(os.path.join(run, "stage2", "train.jsonl"))
    def in_order(prefix):  # the stages whose folders start with prefix, in the order they ran
        found = []
        for d in sorted(os.listdir(run)):
            path = os.path.join(run, d, "train.jsonl")
            if d.startswith(prefix) and os.path.exists(path):
                f = stage_summary(path)
                if f:
                    f["started"] = os.path.getmtime(path) - f["elapsed_s"]
                    found.append(f)
        return sorted(found, key=lambda f: f["started"])
    dots0 = in_order("stage0d-")  # stage 0d: the dot-size curriculum
    s0p = optional("stage0p")  # stage 0p: two-image dots
    focus = in_order("focus-")  # stage 3: one task alone after another
    s4 = optional("stage4")
    total = sum(s["elapsed_s"] for s in [s0, s0p, s1, s2, s4] + dots0 + focus if s)
    cfg = json.load(open(os.path.join(run, "config.json")))
    print("# The ChangeLens default model\n")
    print("`changelens-default.safetensors` (f16, its decoder's matrices as Q8_0 blocks) is what "
          "`changelens-cli describe` and the app use "
          "when no model is given. It was trained on this repository's synthetic tasks only "
          "(`core/synth`), from scratch, with the recipe of the stateful-visual-encoders paper "
          "as ChangeLens implements it (docs/DESIGN.md §5). It is a small model for the five synthetic "
          "domains; it has never seen a real radiograph, aerial photo or edited photo, and its "
          "descriptions of real images are not to be trusted.\n")
    print("## How it was made\n")
    print("```sh\n" + command + "\n```\n")
    print("1. A byte-level BPE tokenizer trained on 400 conversations of each of the ten tasks "
          "(seed 424242).")
    print("2. A stateless model of the tiny preset's widths: "
          f"{cfg['image_size']} px input, patch {cfg['patch_size']}, encoder {cfg['enc_dim']} × "
          f"{cfg['enc_depth']}, decoder {cfg['dec_dim']} × {cfg['dec_depth']} "
          f"(GQA {cfg['dec_heads']}/{cfg['dec_kv_heads']}), vocabulary {cfg['vocab_size']}, tied "
          "embeddings.")
    if s0:
        print(f"3. Stage 0 (stateless, reading first): {s0['steps']} steps of {s0['batch']} "
              f"samples (peak lr {s0['lr']:g}) of `{s0['task']}` alone, {s0['aux']}; loss "
              f"{s0['first_loss']:.3f} → {s0['final_loss']:.3f}; {s0['elapsed_s'] / 60:.1f} min at "
              f"{s0['samples_per_s']:.1f} samples/s.")
    n = 4 if s0 else 3
    for f in dots0:
        print(f"{n}. Stage 0d (finding the red dot): {f['steps']} steps of {f['batch']} (peak lr "
              f"{f['lr']:g}) of `{f['task']}` with dots {f['dot_scale']:g} times the task's "
              f"radius (docs/runs/2026-11-26-dots-clutter.md), {f['aux']}; loss "
              f"{f['first_loss']:.3f} → {f['final_loss']:.3f}; {f['elapsed_s'] / 60:.1f} min at "
              f"{f['samples_per_s']:.1f} samples/s.")
        n += 1
    if s0p:
        print(f"{n}. Stage 0p (combining two dots, stateless): {s0p['steps']} steps of "
              f"{s0p['batch']} (peak lr {s0p['lr']:g}) of `{s0p['task']}`, dots with "
              f"{s0p['dot_images']} images (docs/runs/2026-11-26-dots-combining.md), {s0p['aux']}; "
              f"loss {s0p['first_loss']:.3f} → {s0p['final_loss']:.3f}; "
              f"{s0p['elapsed_s'] / 60:.1f} min at {s0p['samples_per_s']:.1f} samples/s.")
        n += 1
    if s1:
        print(f"{n}. Stage 1 (stateless): {s1['steps']} steps of {s1['batch']} samples (peak lr "
              f"{s1['lr']:g}) from the grounded "
              f"single-image tasks and the change tasks{extra(s1)}, generated on the fly, "
              f"{s1['aux']}; loss "
              f"{s1['first_loss']:.3f} → {s1['final_loss']:.3f} (mean of the last 50 steps); "
              f"{s1['elapsed_s'] / 60:.1f} min at {s1['samples_per_s']:.1f} samples/s.")
        n += 1
    if s2:
        print(f"{n}. Stage 2 (SVE): cross_ffn inserted with the paper's init (Q/K/V and W₁ cloned, "
              f"W_O and W₂ zero), stop_grad on the predecessor; {s2['steps']} steps of "
              f"{s2['batch']} (peak lr {s2['lr']:g}) on the change "
              f"tasks with a share of grounded samples{extra(s2)}, {s2['aux']}; loss "
              f"{s2['first_loss']:.3f} → "
              f"{s2['final_loss']:.3f}; {s2['elapsed_s'] / 60:.1f} min at "
              f"{s2['samples_per_s']:.1f} samples/s.")
        n += 1
    for f in focus:
        print(f"{n}. Stage 3 (reading one task): {f['steps']} steps of {f['batch']} (peak lr "
              f"{f['lr']:g}) "
              + (f"of a mix{extra(f)}" if "," in f["task"] else f"of `{f['task']}` alone") +
              f"{', dots with ' + str(f['dot_images']) + ' images' if f['dot_images'] else ''}, "
              f"{f['aux']}; "
              f"loss {f['first_loss']:.3f} → "
              f"{f['final_loss']:.3f}; {f['elapsed_s'] / 60:.1f} min at "
              f"{f['samples_per_s']:.1f} samples/s.")
        n += 1
    if s4:
        print(f"{n}. Stage 4 (the mix again): {s4['steps']} steps of {s4['batch']} (peak lr "
              f"{s4['lr']:g}) on the change tasks and the grounded ones again{extra(s4)}, so that "
              f"every task's phrasing comes back after "
              f"stage 3, {s4['aux']}; loss {s4['first_loss']:.3f} → {s4['final_loss']:.3f}; "
              f"{s4['elapsed_s'] / 60:.1f} min at {s4['samples_per_s']:.1f} samples/s.")
    print(f"\nTraining time on the {os.cpu_count()}-core development machine ({cpu_name()}): "
          f"**{total / 60:.1f} minutes** in all.\n")
    bench = os.path.join(run, "bench-train.txt")
    if os.path.exists(bench):
        print("## The training step against PyTorch\n")
        print("`changelens-cli bench --train --model MODEL --vs-torch --repeat 15 --warmup 2 "
              "--rounds 5`: this model's own training step (batch 8, shapes samples, its "
              "cross_ffn encoder with stop_grad, its tokens) against the PyTorch reference "
              "doing the same step on the same weights and samples, rounds alternating "
              "(docs/runs/2026-11-26-train-step.md):\n")
        print("```\n" + open(bench).read().rstrip() + "\n```\n")
    rel = os.path.join(run, "reliance.txt")
    if os.path.exists(rel):
        print("## Does it read the images?\n")
        print("The loss of the answer on 40 held-out samples with their own images and with "
              "another sample's images (`tools/image-reliance.sh`); a model that ignored its "
              "images would score both alike (the gap would be 0).\n")
        print("```\n" + open(rel).read().rstrip() + "\n```\n")
    ex = os.path.join(run, "examples.md")
    if os.path.exists(ex):
        print("## What it says about held-out pairs\n")
        print(open(ex).read().rstrip() + "\n")
    print("## Where it stands\n")
    print("Each task's headline figure on its held-out set against the trivial baseline "
          "(details below):\n")
    lines = verdicts(run)
    print("\n".join(lines) + "\n")
    behind = [ln[2:].split(":")[0] for ln in lines if "clearly better" not in ln]
    if behind:
        print(f"**Not yet good enough on {', '.join(behind)}**: on these tasks the model is not "
              "clearly better than the trivial answer; where the reading check above shows no "
              "gap, it does not use the images at all. Do not rely on its descriptions there.\n")
    notes = os.path.join(run, "notes.md")  # the run's own remarks, by hand
    if os.path.exists(notes):
        print(open(notes).read().rstrip() + "\n")
    print("## Held-out results\n")
    print("Each task's held-out set is 'changelens-cli eval --task T --seed 900001' (training "
          "samples come from other seeds); the baseline answers every sample with the task's most "
          "frequent training answer (dots: the mean value of the question asked, by quantity and "
          "number of images), scored on the same samples. The "
          "model answers greedily, except that a dots answer's digits are the median of the "
          "model's distribution over numbers (eval's default; `--greedy-numbers` gives the "
          "greedy digits), the answer with the least expected absolute error.\n")
    for t in TASKS:
        p = os.path.join(run, f"eval-{t}.json")
        if not os.path.exists(p):
            continue
        d = json.load(open(p))
        b = d.get("baseline", {})
        rows = [(label, fmt(d.get(k), s), fmt(b.get(k), s)) for k, label, s in KEYS
                if d.get(k) is not None or b.get(k) is not None]
        print(f"### {t} ({d['n']} samples)\n")
        print("| metric | model | baseline |")
        print("|---|---|---|")
        for label, m, bl in rows:
            print(f"| {label} | {m} | {bl} |")
        print(f"\nBaseline answer: “{b.get('answer', '')}”\n")
        for ex in d.get("examples", [])[:2]:
            print(f"- reference: “{ex['reference']}”  \n  model: “{ex['prediction']}”")
        print()


if __name__ == "__main__":
    main()
