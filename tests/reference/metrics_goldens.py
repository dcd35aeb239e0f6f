#!/usr/bin/env python3
"""metrics_goldens.py - the captioning metrics' goldens (tests/goldens/metrics.json) from the
paper's reference code, pycocoevalcap: PTBTokenizer + Bleu + Meteor (the METEOR 1.5 jar) +
Rouge + Cider on a fixed set of change captions in the styles of our tasks.

Run (needs Java for the PTB tokenizer and the METEOR jar):
    python3 -m venv build/venv-metrics && build/venv-metrics/bin/pip install pycocoevalcap
    build/venv-metrics/bin/python tests/reference/metrics_goldens.py --out tests/goldens/metrics.json
Checked by tests/test-metrics.c (meson test --suite train metrics).
"""
import argparse
import json
import os

from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

SHAPES = ["cube", "sphere", "cylinder"]
COLORS = ["red", "blue", "green", "gray", "purple", "yellow"]
MATS = ["metal", "rubber"]
SIZES = ["small", "large"]


def items():
    """(candidate, [references]) pairs; deterministic."""
    out = []
    # shapes / CLEVR-change, one reference
    for k in range(14):
        s, c, m, z = SHAPES[k % 3], COLORS[k % 6], MATS[k % 2], SIZES[(k // 2) % 2]
        ref = f"The {z} {c} {m} {s} was moved."
        if k % 4 == 0:
            cand = ref  # exact match
        elif k % 4 == 1:
            cand = f"the {z} {COLORS[(k + 1) % 6]} {m} {s} has been moved to the left."
        elif k % 4 == 2:
            cand = f"A {c} {s} was added; the {m} cubes were removed."
        else:
            cand = f"the {c} {m} {s}s are moving"
        out.append((cand, [ref]))
    # radiology (Medical-Diff-VQA phrasing), one reference
    findings = ["pleural effusion", "cardiomegaly", "atelectasis", "edema", "pneumothorax",
                "lung opacity"]
    for k in range(12):
        f = findings[k % 6]
        ref = f"the main image has an additional finding of {f} than the reference image."
        if k % 3 == 0:
            cand = ref
        elif k % 3 == 1:
            cand = (f"The main image has additional findings of {findings[(k + 2) % 6]} and "
                    f"{f} than the reference image.")
        else:
            cand = f"the main image is missing the finding of {f} (resolved), size 0.1234 cm."
        out.append((cand, [ref]))
    # LEVIR-CC, five references
    levir = [
        ["a road is built along the houses.", "A new road appears beside the houses.",
         "a road has been constructed next to the houses .", "there is a new road near houses",
         "the road is built along the houses"],
        ["there is no difference.", "the two scenes seem identical.", "no change has occurred.",
         "there is no difference .", "the scene is the same as before"],
        ["many houses are built in the bareland.", "several buildings appear on the empty land",
         "some houses were built on the bare land.", "houses are constructed in the field",
         "a lot of villas have been built"],
        ["the trees are replaced by a parking lot.", "a parking lot replaces the vegetation",
         "trees were removed and a car park is built", "the woods are gone",
         "a parking area appears where the trees were"],
    ]
    cands = [
        ["a road is built along the houses", "roads are built near the house",
         "there is no difference", "a house is built beside the road",
         "the road has been built along the houses'", ""],
        ["there is no difference", "the two scenes seem identical .", "nothing changed!",
         "there is no difference in 2 images", "...", "it's the same; don't worry"],
        ["many houses are built in the bareland", "several houses were built on the bare land",
         "a building appears", "houses houses houses", "the bareland is replaced by 12 villas",
         "houses (new) are constructed"],
        ["the trees are replaced by a parking lot", "trees have been removed",
         "a parking lot is built where the trees were", "there is no difference",
         "the car park replaces the woods", "a road is built"],
    ]
    for refs, cs in zip(levir, cands):
        for c in cs:
            out.append((c, refs))
    return out


# tokenizer-only probes (punctuation, clitics, numbers, unicode)
PROBES = [
    "The small red metal cube was moved.", "There's no difference!",
    "don't can't won't CANNOT it's houses' roof",
    "a road (new) is built; along the houses, near 0.1234 and 1,000 trees.",
    "e.g. the u.s. mr. smith etc.", "left-most -- right - side ... ok?",
    "\"quoted\" 'single' `tick`", "50% $5 at&t a/b 3:4 x2 #1 @home",
    "caf\u00e9 na\u00efve \u201cfancy\u201d it\u2019s \u2014 dash\u2026 \u00c9t\u00e9",
    "gonna wanna -5 +3 5-6 1990s", "end with etc.", "Mr. Smith.", "the U.S.",
    "I'm we're they've you'll he'd", "the cube's color", "20 x 30 cm 2.5 -0.5 0.5% 1/2 3d",
    "image-1 2-3 changes; 4th", "a.m. p.m. approx. fig. vs. no. 5 dr. st.",
    "(left)right [a]{b}", "is it? yes! no...", "hello,world this.that x.y", "a ' b",
    "don't.", "isn't", "", "   ", "x",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "goldens",
                                                  "metrics.json"))
    args = ap.parse_args()

    data = items()
    gts = {i: [{"caption": r} for r in refs] for i, (c, refs) in enumerate(data)}
    res = {i: [{"caption": c}] for i, (c, refs) in enumerate(data)}
    tok = PTBTokenizer()
    gts_t = tok.tokenize(gts)
    res_t = tok.tokenize(res)
    probes_t = tok.tokenize({i: [{"caption": p}] for i, p in enumerate(PROBES)})

    out = {"items": [], "probes": [{"text": p, "tokens": probes_t[i][0]}
                                    for i, p in enumerate(PROBES)]}
    scores = {}
    for name, scorer in [("bleu", Bleu(4)), ("meteor", Meteor()), ("rouge_l", Rouge()),
                         ("cider", Cider())]:
        corpus, per = scorer.compute_score(gts_t, res_t)
        if name == "bleu":
            scores[name] = {"corpus": [float(x) for x in corpus],
                            "sentence": [[float(per[k][i]) for k in range(4)]
                                         for i in range(len(data))]}
        else:
            scores[name] = {"corpus": float(corpus), "sentence": [float(x) for x in per]}
    for i, (c, refs) in enumerate(data):
        out["items"].append({"candidate": c, "references": refs,
                             "candidate_tokens": res_t[i][0], "reference_tokens": gts_t[i]})
    out["scores"] = scores
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {args.out}: {len(data)} items, {len(PROBES)} probes; corpus "
          + ", ".join(f"{k}={v['corpus']}" for k, v in scores.items()))


if __name__ == "__main__":
    main()
