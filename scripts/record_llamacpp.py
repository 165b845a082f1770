"""Record llama.cpp's own KV-cache and recurrent-state allocations for tiny random-weight models (developer tool;
tests never run it). Steps, each in the interpreter that has what it needs:

  make     (torch + transformers + tokenizers): tiny models from shrunk configs, saved with a tiny byte-level BPE
           tokenizer, in WORK/hf/<case>
  convert  (same interpreter): the vendored llama.cpp convert_hf_to_gguf.py -> WORK/gguf/<case>.gguf (f16); the BPE
           pre-tokenizer check is bypassed ("gpt-2"): the tokenizer does not affect the cache
  load     (llama-cpp-python built from source): llama_cpp.Llama(..., verbose=True) at several contexts, sequence
           counts and cache types; llama.cpp's log lines are kept, and the exact byte size of every CPU buffer
           llama.cpp allocates (ggml_aligned_malloc -> posix_memalign, seen through a small LD_PRELOAD shim)
  fixtures (any python): fixtures/llamacpp/cases.json plus a header-only copy of each GGUF (<case>.header.gguf)

  python scripts/record_llamacpp.py all --work /tmp/lcpwork --src /tmp/lcpsrc/vendor/llama.cpp \
      --hf-python .venv/bin/python --lcp-python /tmp/lcpvenv/bin/python

The load step needs only llama_cpp importable and its libllama: an installed llama-cpp-python, or the sdist's
llama_cpp/ package on PYTHONPATH with LLAMA_CPP_LIB_PATH pointing at the libllama/libggml the sdist's build made
(both gave identical records for fixtures/llamacpp). gcc builds the LD_PRELOAD shim.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures" / "llamacpp"

# Tiny shrunk configs (transformers model_type -> config kwargs); every family llama.cpp stores differently.
CASES: dict[str, dict] = {
    "llama": {"cls": "LlamaForCausalLM", "cfg": "LlamaConfig", "kw": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32, max_position_embeddings=131072)},
    "gemma3": {"cls": "Gemma3ForCausalLM", "cfg": "Gemma3TextConfig", "kw": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=7, num_attention_heads=2, num_key_value_heads=1,
        head_dim=32, sliding_window=384, max_position_embeddings=131072)},
    "gemma4": {"cls": "Gemma4ForCausalLM", "cfg": "Gemma4TextConfig", "kw": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=8, num_attention_heads=2, num_key_value_heads=1,
        head_dim=32, sliding_window=128, num_kv_shared_layers=2, hidden_size_per_layer_input=16,
        layer_types=["sliding_attention"] * 3 + ["full_attention", "sliding_attention", "full_attention",
                                                 "sliding_attention", "full_attention"],
        per_layer_config={"03": {"head_dim": 64}, "05": {"head_dim": 64}, "07": {"head_dim": 64}},
        max_position_embeddings=131072)},
    "deepseek_v3": {"cls": "DeepseekV3ForCausalLM", "cfg": "DeepseekV3Config", "kw": dict(
        hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, q_lora_rank=32, kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=32, v_head_dim=32,
        n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, n_group=1, topk_group=1, first_k_dense_replace=1,
        max_position_embeddings=131072, rope_scaling=None)},
    "qwen3_5": {"cls": "Qwen3_5ForCausalLM", "cfg": "Qwen3_5TextConfig", "kw": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1,
        head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_conv_kernel_dim=4, full_attention_interval=4,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        max_position_embeddings=131072)},
    "qwen3_next": {"cls": "Qwen3NextForCausalLM", "cfg": "Qwen3NextConfig", "kw": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1,
        head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_conv_kernel_dim=4, full_attention_interval=2, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=32, decoder_sparse_step=1,
        layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
        max_position_embeddings=131072)},
    "jamba": {"cls": "JambaForCausalLM", "cfg": "JambaConfig", "kw": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1,
        num_experts=2, num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1, attn_layer_period=4,
        attn_layer_offset=2, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=8,
        use_mamba_kernels=False, max_position_embeddings=131072)},
    "mamba": {"cls": "MambaForCausalLM", "cfg": "MambaConfig", "kw": dict(
        hidden_size=64, state_size=16, conv_kernel=4, expand=2, num_hidden_layers=2)},
    "mamba2": {"cls": "Mamba2ForCausalLM", "cfg": "Mamba2Config", "kw": dict(
        hidden_size=64, state_size=16, conv_kernel=4, expand=2, num_heads=8, head_dim=16, n_groups=1,
        num_hidden_layers=2)},
    "lfm2": {"cls": "Lfm2ForCausalLM", "cfg": "Lfm2Config", "kw": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1,
        conv_L_cache=3, layer_types=["conv", "full_attention", "conv", "full_attention"], max_position_embeddings=131072)},
    "falcon_h1": {"cls": "FalconH1ForCausalLM", "cfg": "FalconH1Config", "kw": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, mamba_d_ssm=128, mamba_n_heads=8, mamba_d_head=16, mamba_n_groups=1, mamba_d_state=16,
        mamba_d_conv=4, mamba_expand=2, max_position_embeddings=131072)},
}

# (n_ctx, n_seq_max, kv_unified, swa_full, cache type) per load; llama-cpp-python's Llama() passes n_ctx and
# leaves n_seq_max / kv_unified / swa_full at llama_context_default_params (1, false, true) unless given.
# flash attention: Llama()'s default (off) for f16, on for quantized caches (llama.cpp needs it for a quantized V),
# and on for the llama-server-like load (its flash_attn auto turns it on where the backend supports it).
LOADS = [
    (512, 1, None, None, "f16", False), (4096, 1, None, None, "f16", False), (65536, 1, None, None, "f16", False),
    (4096, 1, None, None, "q8_0", True), (4096, 4, False, None, "f16", False), (4096, 4, True, False, "f16", False),
    (4096, 4, True, False, "f16", True), (4096, 4, False, False, "f16", False), (16384, 1, None, False, "q4_0", True),
]
GGML_TYPE_IDS = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "bf16": 30}

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static int (*real_pm)(void **, size_t, size_t);
int posix_memalign(void **p, size_t a, size_t s) {
    if (!real_pm) real_pm = dlsym(RTLD_NEXT, "posix_memalign");
    int r = real_pm(p, a, s);
    if (a == 64) { char b[64]; int n = snprintf(b, sizeof b, "HFMEM_ALLOC %zu\n", s); write(2, b, n); }
    return r;
}
"""


def make(work: Path, only: list[str] | None = None) -> None:
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    torch.manual_seed(0)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog " * 20, "hello world memory cache"], trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    vocab = len(fast)
    for name, case in CASES.items():
        if only and name not in only:
            continue
        out = work / "hf" / name
        extra = {"vocab_size_per_layer_input": vocab} if name == "gemma4" else {}
        cfg = getattr(transformers, case["cfg"])(vocab_size=vocab, **extra, bos_token_id=0, eos_token_id=0, pad_token_id=0, **case["kw"])
        cfg.architectures = [case["cls"]]
        model = getattr(transformers, case["cls"])(cfg).to(torch.float16)
        model.save_pretrained(out)
        fast.save_pretrained(out)
        print("made", name, sum(p.numel() for p in model.parameters()))


def convert(work: Path, src: Path, only: list[str] | None = None) -> None:
    sys.path.insert(0, str(src))
    sys.path.insert(1, str(src / "gguf-py"))
    import convert_hf_to_gguf as conv  # noqa: PLC0415
    from conversion.base import TextModel  # noqa: PLC0415

    TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"  # type: ignore[method-assign]
    (work / "gguf").mkdir(parents=True, exist_ok=True)
    for name in CASES:
        if only and name not in only:
            continue
        out = work / "gguf" / f"{name}.gguf"
        cls = conv.get_model_class(conv.get_model_architecture(conv.ModelBase.load_hparams(work / "hf" / name, False), conv.ModelType.TEXT))
        cls.set_vocab = lambda self: self._set_vocab_gpt2()  # type: ignore[method-assign]
        sys.argv = ["convert_hf_to_gguf.py", str(work / "hf" / name), "--outtype", "f16", "--outfile", str(out)]
        if name in ("qwen3_5", "qwen3_next"):
            sys.argv.append("--no-mtp")  # the tiny checkpoint has no MTP block
        try:
            conv.main()
            print("converted", name)
        except Exception as e:  # a family the converter cannot take is reported, not fatal
            print("convert failed", name, repr(e)[:300])


def _load_one(path: str, n_ctx: int, n_seq: int, unified: bool | None, swa_full: bool | None, ctype: str, fa: bool) -> None:
    import llama_cpp

    kw: dict = dict(model_path=path, n_ctx=n_ctx, verbose=True, type_k=GGML_TYPE_IDS[ctype], type_v=GGML_TYPE_IDS[ctype])
    if swa_full is not None:
        kw["swa_full"] = swa_full
    kw["flash_attn"] = fa
    llm = llama_cpp.Llama.__new__(llama_cpp.Llama)
    if n_seq != 1 or unified is not None:
        # Llama() exposes neither n_seq_max nor kv_unified: set them on the context params it builds
        orig = llama_cpp.llama_context_default_params

        def params():  # type: ignore[no-untyped-def]
            p = orig()
            p.n_seq_max = n_seq
            if unified is not None:
                p.kv_unified = unified
            return p

        llama_cpp.llama_context_default_params = params
        import llama_cpp.llama as mod

        mod.llama_cpp.llama_context_default_params = params
    llm.__init__(**kw)  # type: ignore[misc]
    sys.stderr.flush()


def load(work: Path, out: Path) -> None:
    import llama_cpp

    shim = work / "shim.so"
    if not shim.exists():
        (work / "shim.c").write_text(SHIM)
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(work / "shim.c"), "-ldl"], check=True)
    results = []
    for name in CASES:
        path = work / "gguf" / f"{name}.gguf"
        if not path.exists():
            continue
        for n_ctx, n_seq, unified, swa_full, ctype, fa in LOADS:
            env = dict(os.environ, LD_PRELOAD=str(shim), PYTHONUNBUFFERED="1")
            args = [sys.executable, __file__, "_load_one", str(path), str(n_ctx), str(n_seq), repr(unified), repr(swa_full), ctype, repr(fa)]
            p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
            log = p.stderr.splitlines()
            results.append({
                "case": name, "n_ctx": n_ctx, "n_seq_max": n_seq, "kv_unified": unified, "swa_full": swa_full,
                "flash_attn": fa, "cache_type": ctype, "rc": p.returncode, **parse_log(log),
            })
            print(name, n_ctx, n_seq, unified, swa_full, ctype, fa, p.returncode, results[-1].get("memory"))
    meta = {"llama_cpp_python": llama_cpp.__version__, "system_info": llama_cpp.llama_print_system_info().decode()[:300]}
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=1))


_KV_RE = re.compile(r"llama_kv_cache: size = +([\d.]+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+)/(\d+) seqs\), K \((\w+)\): +([\d.]+) MiB, V \((\w+)\): +([\d.]+) MiB")
_RS_RE = re.compile(r"llama_memory_recurrent: size = +([\d.]+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+) seqs +(\d+) rs_seq\), R \((\w+)\): +([\d.]+) MiB, S \((\w+)\): +([\d.]+) MiB")
_BUF_RE = re.compile(r"(llama_kv_cache|llama_memory_recurrent): +(\S+) (KV|RS) buffer size = +([\d.]+) MiB")


def parse_log(lines: list[str]) -> dict:
    """llama.cpp's memory lines, each with the exact size of the buffer allocated just before its 'buffer size' line."""
    memory: list[dict] = []
    pending: list[int] = []
    kept = []
    for line in lines:
        if line.startswith("HFMEM_ALLOC "):
            pending.append(int(line.split()[1]))
            continue
        if m := _BUF_RE.search(line):
            kept.append(line)
            memory.append({"kind": "kv" if m.group(3) == "KV" else "recurrent", "buffer_mib": m.group(4),
                           "buffer_bytes": pending[-1] if pending else None})
        elif m := _KV_RE.search(line):
            kept.append(line)
            if not memory or "size_mib" in memory[-1]:  # a cache with no layers allocates no buffer
                memory.append({"kind": "kv", "buffer_mib": None, "buffer_bytes": None})
            memory[-1].update(size_mib=m.group(1), cells=int(m.group(2)), layers=int(m.group(3)), seqs=int(m.group(4)),
                              streams=int(m.group(5)), type_k=m.group(6), k_mib=m.group(7), type_v=m.group(8), v_mib=m.group(9))
        elif m := _RS_RE.search(line):
            kept.append(line)
            if not memory or "size_mib" in memory[-1]:
                memory.append({"kind": "recurrent", "buffer_mib": None, "buffer_bytes": None})
            memory[-1].update(size_mib=m.group(1), cells=int(m.group(2)), layers=int(m.group(3)), seqs=int(m.group(4)),
                              rs_seq=int(m.group(5)), r_mib=m.group(7), s_mib=m.group(9))
        elif any(k in line for k in ("llama_kv_cache_iswa", "n_ctx ", "n_ctx_seq ", "flash_attn", "does not divide",
                                     "requires", "Failed")):
            kept.append(line)
        pending = pending if not _BUF_RE.search(line) else []
    return {"memory": memory, "log": kept}


def fixtures(work: Path, src: Path) -> None:
    sys.path.insert(0, str(REPO))
    from hfmem.gguf.reader import read_local_gguf

    FIXTURES.mkdir(parents=True, exist_ok=True)
    loads = json.loads((work / "loads.json").read_text())
    files = {}
    for name in CASES:
        path = work / "gguf" / f"{name}.gguf"
        if not path.exists():
            continue
        n = read_local_gguf(str(path)).header_bytes  # metadata + tensor infos: all hfmem reads
        raw = path.read_bytes()
        (FIXTURES / f"{name}.header.gguf").write_bytes(raw[:n])
        files[name] = {"file": f"{name}.header.gguf", "file_size": len(raw), "header_bytes": n}
    commit = _vendored_commit(src)
    how = ("llama-cpp-python built from its sdist (CPU), installed; Llama(model_path, n_ctx, type_k, type_v, flash_attn, "
           "swa_full, verbose=True), n_seq_max / kv_unified set on llama_context_default_params; buffer_bytes: the "
           "size passed to ggml_aligned_malloc for the buffer logged next")
    out = {"recorded_with": {**loads["meta"], "llama_cpp_commit": commit, "how": how}, "files": files,
           "results": loads["results"]}
    results = ",\n".join("  " + json.dumps(r, separators=(",", ":")) for r in out.pop("results"))
    head = json.dumps(out, indent=1)[:-2]
    (FIXTURES / "cases.json").write_text(f'{head},\n "results": [\n{results}\n ]\n}}\n')


def _vendored_commit(src: Path) -> str | None:
    """The llama.cpp commit llama-cpp-python vendors: its CHANGELOG's latest "update llama.cpp to ...@<commit>"."""
    changelog = src.parent.parent / "CHANGELOG.md"
    if changelog.exists():
        m = re.search(r"ggml-org/llama\.cpp@([0-9a-f]+)", changelog.read_text())
        if m:
            return m.group(1)
    return None


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_load_one":
        a = sys.argv[2:]
        _load_one(a[0], int(a[1]), int(a[2]), eval(a[3]), eval(a[4]), a[5], eval(a[6]))  # noqa: S307 - our own repr()s
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["make", "convert", "load", "fixtures", "all"])
    ap.add_argument("--work", type=Path, default=Path("/tmp/lcpwork"))
    ap.add_argument("--src", type=Path, default=Path("/tmp/lcpsrc/vendor/llama.cpp"))
    ap.add_argument("--hf-python", default=sys.executable)
    ap.add_argument("--lcp-python", default=sys.executable)
    ap.add_argument("--only", nargs="*", help="make / convert only these cases")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    if a.step == "make":
        make(a.work, a.only)
    elif a.step == "convert":
        convert(a.work, a.src, a.only)
    elif a.step == "load":
        load(a.work, a.work / "loads.json")
    elif a.step == "fixtures":
        fixtures(a.work, a.src)
    else:
        common = ["--work", str(a.work), "--src", str(a.src)]
        for step, py in (("make", a.hf_python), ("convert", a.hf_python), ("load", a.lcp_python), ("fixtures", a.hf_python)):
            subprocess.run([py, __file__, step, *common], check=True)


if __name__ == "__main__":
    main()
