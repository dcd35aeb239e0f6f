"""tools/shapes_match.py - reads the output of tools/describe-examples.sh for the shapes task and
counts the descriptions that are right in substance: each sentence (core/synth/shapes.c's
templates, whichever paraphrase) becomes (kind, object before, object after), and a description
is right when its set of those equals the reference's. For single-change pairs it also counts
how many of the changed object's four attributes (size, colour, material, shape) the model got.

    python3 tools/shapes_match.py runs/examples.txt [more.txt ...]
"""
import re, sys
OBJ = r"(small|large) (\w+) (rubber|metal) (\w+)"
PAT = [("move", rf"^(?:The|Someone moved the) {OBJ}(?: moved| changed its location| is in a different location)?\.?$"),
       ("add", rf"^(?:A new|Someone added a|A|There is a new) {OBJ}(?: is visible| has been added)?\.?$"),
       ("remove", rf"^(?:The|Someone removed the) {OBJ}(?: has disappeared| is no longer there| is missing)?\.?$"),
       ("replace", rf"^(?:Someone replaced the|The) {OBJ} (?:with a|gave up its position to a|was replaced by a) {OBJ}\.?$"),
       ("replace2", rf"^A {OBJ} replaced the {OBJ}\.?$")]
def parse(text):
    out = []
    for s in re.split(r"(?<=\.)\s+", text.strip()):
        s = s.strip()
        if not s: continue
        got = None
        if re.search(r"replaced|gave up|with a", s):
            m = re.match(PAT[3][1], s)
            if m: got = ("replace", " ".join(m.groups()[:4]), " ".join(m.groups()[4:]))
            m = re.match(PAT[4][1], s)
            if m: got = ("replace", " ".join(m.groups()[4:]), " ".join(m.groups()[:4]))
        elif re.search(r"moved|location", s):
            m = re.search(OBJ, s); got = ("move", " ".join(m.groups()), None) if m else None
        elif re.search(r"new|added|visible", s):
            m = re.search(OBJ, s); got = ("add", None, " ".join(m.groups())) if m else None
        else:
            m = re.search(OBJ, s); got = ("remove", " ".join(m.groups()), None) if m else None
        out.append(got or ("?", s, None))
    return sorted(out, key=str)
def read(path):
    blocks, cur = [], {}
    for line in open(path):
        if line.startswith("shapes "): cur = {"i": line.split()[1]}; blocks.append(cur)
        elif "reference:" in line: cur["ref"] = line.split("reference:", 1)[1].strip()
        elif "model:" in line: cur["model"] = line.split("model:", 1)[1].strip()
    return blocks
for path in sys.argv[1:]:
    b = read(path); right = []; kind_obj = 0; single = 0
    for x in b:
        r, m = parse(x["ref"]), parse(x.get("model", ""))
        if r == m: right.append(x["i"])
        if len(r) == 1:
            single += 1
    print(path, "pairs", len(b), "exactly right (same changes, same objects):", len(right), right)
    for x in b:
        if x["i"] in right: print("  ", x["i"], "|", x["ref"], "|", x["model"])
print("--- single-change pairs: attributes of the changed object that the model got")
import collections
for path in sys.argv[1:]:
    c = collections.Counter(); n = 0
    for x in read(path):
        r, m = parse(x["ref"]), parse(x.get("model", ""))
        if len(r) != 1 or len(m) < 1: continue
        n += 1
        k = r[0][0]; c["kind"] += any(mm[0] == k for mm in m)
        ro = (r[0][1] or r[0][2]).split()
        best = max((sum(a == b for a, b in zip(ro, (mm[1] or mm[2] or "? ? ? ?").split())) for mm in m if mm[0] == k), default=0)
        c[f"attrs={best}"] += 1
    print(path, n, dict(c))
