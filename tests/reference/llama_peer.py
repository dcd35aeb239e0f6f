#!/usr/bin/env python3
"""llama_peer.py - llama.cpp (llama-cpp-python, built from its sdist into build/venv) as the
peer of ChangeLens's GGUF support: for fixed prompts, its tokens, the logits after the prompt,
and a greedy continuation; and `--bench`, its prefill and decode speed. One JSON object on stdout.

    build/venv/bin/python tests/reference/llama_peer.py --model M.gguf --prompts P.json
    build/venv/bin/python tests/reference/llama_peer.py --model M.gguf --bench --threads 2
    build/venv/bin/python tests/reference/llama_peer.py --model M.gguf --quantize q8_0 --out O.gguf

P.json: a list of texts (special tokens such as <|im_start|> are read as such). A test tool,
never used by the product.
"""
import argparse
import json
import sys
import time


def load(path, threads, n_ctx=1024):
    from llama_cpp import Llama
    # f32 keys and values (llama.cpp's default is f16) and no flash attention: ChangeLens keeps
    # its KV cache in f32, so the comparison sees the weights' arithmetic, not the cache's
    return Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                 n_batch=512, logits_all=False, verbose=False, type_k=0, type_v=0,
                 flash_attn=False)


def last_logits(llm):
    """the logits after the last evaluated token (llama.cpp keeps only those without
    logits_all; llama-cpp-python's own `scores` is not filled then)"""
    import numpy as np
    return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)


def run_prompts(llm, prompts, n_greedy, stop_ids):
    import numpy as np
    out = []
    for text in prompts:
        toks = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        llm.reset()
        llm.eval(toks)
        logits = last_logits(llm)
        greedy, margins = [], []
        for _ in range(n_greedy):
            nxt = int(logits.argmax())
            top2 = np.partition(logits, -2)[-2:]
            margins.append(round(float(top2[1] - top2[0]), 5))  # the choice's lead
            if nxt in stop_ids:
                break
            greedy.append(nxt)
            llm.eval([nxt])
            logits = last_logits(llm)
        llm.reset()
        llm.eval(toks)
        out.append({"text": text, "tokens": list(map(int, toks)),
                    "logits": [round(float(v), 5) for v in last_logits(llm)],
                    "greedy": greedy, "margins": margins})
    return out


def bench(llm, n_prompt, n_gen, rounds):
    """prefill of n_prompt tokens, then n_gen single-token decode steps (llama-bench's pp/tg)."""
    toks = list(range(100, 100 + n_prompt))
    res = []
    for _ in range(rounds):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(toks)
        t1 = time.perf_counter()
        llm.reset()
        llm.eval([1])
        t2 = time.perf_counter()
        for i in range(n_gen):
            llm.eval([100 + i % 1000])
        t3 = time.perf_counter()
        res.append({"prefill_tok_s": n_prompt / (t1 - t0), "decode_tok_s": n_gen / (t3 - t2)})
    return res


def quantize(src, dst, kind):
    """src's matrices requantized by llama.cpp into dst (llama-quantize --allow-requantize): the
    same network with another weight type, for benchmarking that type"""
    import ctypes
    import llama_cpp
    ftypes = {"f32": llama_cpp.LLAMA_FTYPE_ALL_F32, "q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "q4_1": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_1,
              "f16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16, "bf16": llama_cpp.LLAMA_FTYPE_MOSTLY_BF16}
    if kind not in ftypes:
        sys.exit("--quantize: one of " + ", ".join(ftypes))
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftypes[kind]
    params.allow_requantize = True
    params.nthread = 2
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params)) != 0:
        sys.exit("llama.cpp could not quantize " + src)
    return {"peer": "llama.cpp", "quantized": dst, "type": kind}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts")
    ap.add_argument("--greedy", type=int, default=24)
    ap.add_argument("--stop", default="0,2", help="token ids that end a continuation")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--quantize", help="f32, q8_0, q4_1, f16 or bf16: write --out and stop")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.quantize:
        if not a.out:
            sys.exit("--quantize needs --out")
        json.dump(quantize(a.model, a.out, a.quantize), sys.stdout)
        print()
        return
    llm = load(a.model, a.threads, n_ctx=max(1024, a.prompt_tokens + a.gen_tokens + 8))
    if a.bench:
        json.dump({"peer": "llama.cpp", "threads": a.threads,
                   "rounds": bench(llm, a.prompt_tokens, a.gen_tokens, a.rounds)}, sys.stdout)
    else:
        prompts = json.load(open(a.prompts))
        stop = {int(s) for s in a.stop.split(",") if s}
        json.dump({"peer": "llama.cpp", "prompts": run_prompts(llm, prompts, a.greedy, stop)},
                  sys.stdout)
    print()


if __name__ == "__main__":
    main()
