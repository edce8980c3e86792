"""llama.cpp's memory rules (src/llama-context.cpp, src/llama-kv-cache-iswa.cpp, common/arg.cpp,
ggml/src/ggml-common.h, tools/llama-fit-params): cells padded to 256, a
sliding-window cache of window·n_seq + n_ubatch, quantized cache blocks,
layers split across GPUs.

Slots (n_seq_max = --batch, llama-server's --parallel): with the unified cache
(--kv-unified, what llama-server builds unless --parallel is given without it)
one stream of n_ctx = pad(context × slots, 256) cells; without it, one stream
per slot of n_ctx_seq = pad(n_ctx / slots, 256) cells (llama-context.cpp), so
the full-attention cells are the same and each slot's sliding-window cache is
pad(min(n_ctx_seq, window + n_ubatch), 256) (llama-kv-cache-iswa.cpp: the
window is multiplied by n_seq_max only when unified).  --swa-full: the
sliding-window layers get the whole stream.

Builds before b6969 (--llamacpp-build, ggml-org/llama.cpp#7257 up to #16812)
padded by llama_kv_cache::get_padding: 256 cells with flash attention, 32
without (--no-flash-attn); a stream of pad(ceil(n_ctx / slots), P) cells
without the unified cache; the SWA cache min(n_ctx_seq, pad(window·n_seq +
n_ubatch, P)), the pad inside the min.  #16812 (b6969, inferred from
#17058's bisection) removed the padding and #17046 restored it as 256 for
every cache, the rules above; the builds between are planned by the current
rules (a stated approximation)."""

from __future__ import annotations

from archcalc.errors import InputError
from archcalc.parallel.pipeline import llamacpp_stages
from archcalc.serving.engines.base import Chunk, Engine, LayerKV, MiB, pad, register

LLAMACPP_PAD = 256  # n_ctx and the SWA cache are padded to 256 cells
LLAMACPP_PAD_NO_FA = 32  # before b6969, without flash attention (get_padding: "flash_attn ? 256u : 32u", #7257)
LLAMACPP_PADDING_CHANGED = 6969  # the first build of #16812 ("memory : remove KV cache size padding")
LLAMACPP_UBATCH = 512  # -ub / n_ubatch default: the largest physical batch, the compute-buffer size
LLAMACPP_FIT_MARGIN = 1024 * MiB  # --fit-target / llama-fit-params: memory left free per device by default
GGML_BLOCK = 32  # values per block of every cache quant type (QK8_0 = QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK4_NL = 32)
# -ctk / -ctv accept exactly these (common/arg.cpp); bytes per block of 32 values (ggml-common.h):
LLAMACPP_BLOCK_BYTES = {
    "q8_0": 34,  # fp16 scale + 32 int8
    "q4_0": 18,  # fp16 scale + 16 bytes of nibbles
    "q4_1": 20,  # fp16 scale + fp16 min + 16 bytes
    "iq4_nl": 18,  # fp16 scale + 16 bytes of non-linear 4-bit indices
    "q5_0": 22,  # fp16 scale + 4 bytes of high bits + 16 bytes
    "q5_1": 24,  # fp16 scale + fp16 min + 4 + 16 bytes
}


@register
class LlamaCppEngine(Engine):
    name = "llamacpp"
    rules_from = ("llama.cpp master of late 2026: src/llama-context.cpp, src/llama-kv-cache-iswa.cpp (read at "
                  "02c28f5), ggml-common.h; every cache padded to 256 since ggml-org/llama.cpp#17046; "
                  "--llamacpp-build below 6969: llama_kv_cache::get_padding of #7257")
    affine = False  # cells padded to 256
    kv_types = {"f32": 4.0, "f16": 2.0, "bf16": 2.0,
                **{t: b / GGML_BLOCK for t, b in LLAMACPP_BLOCK_BYTES.items()}}
    default_kv_dtype = "f16"
    default_reserve = LLAMACPP_FIT_MARGIN
    # llama-memory-recurrent keeps the conv (r) and recurrent (s) states in F32 whatever the cache
    # type (llama_model::create_memory: GGML_TYPE_F32 for both).
    recurrent_state_bytes = conv_state_bytes = 4.0
    description = (f"n_ctx = context × batch cells padded to {LLAMACPP_PAD}; SWA layers "
                   f"pad(min(n_ctx, n_swa·n_seq + n_ubatch), {LLAMACPP_PAD}) cells (unified cache); quantized cache "
                   f"types in blocks of {GGML_BLOCK} (flash attention assumed); the token embedding stays in host "
                   f"memory; several GPUs split the layers (-sm layer); activations in f32")

    # The sliding-window cache gets the same -ctk / -ctv types as the base cache (llama-kv-cache-iswa.cpp;
    # only #21277, reverted a day later by #21332, kept it F16).
    takes = frozenset({"kv_dtype_v", "tensor_split", "engine_build", "flash_attn"})  # -ctv, -ts, bN, -fa

    def check(self, spec, dep):
        if spec.attention.compressed is not None:
            raise InputError(None, "--engine", "llama.cpp's cache for DeepSeek-V4's compressed attention is not "
                                               "modelled; use --engine plain")
        if dep.tensor_split is not None and len(dep.tensor_split) != dep.tensor_parallel:
            raise InputError(None, "--tensor-split", f"{len(dep.tensor_split)} proportions for {dep.tensor_parallel} "
                                                     f"GPUs; give one per GPU of the instance (--gpus "
                                                     f"{len(dep.tensor_split)})")
        if dep.engine_build is not None and not 1 <= dep.engine_build <= 10**6:
            raise InputError(None, "--llamacpp-build", f"{dep.engine_build!r}; give the build number N of a bN release")
        if not dep.flash_attn and (dep.kv_dtype_v or dep.kv_dtype or self.default_kv_dtype) in LLAMACPP_BLOCK_BYTES:
            raise InputError(None, "--no-flash-attn", "llama.cpp refuses a quantized V cache without flash attention "
                                                      "(\"V cache quantization requires flash_attn\"); use an f16 V cache")

    def stage_tp(self, dep):
        return 1  # -sm layer: every GPU runs whole layers

    def stages(self, spec, dep):
        # the layers split across the GPUs by --tensor-split, or evenly (llama.cpp's default splits by
        # free memory, even on identical GPUs); the input layer stays on the CPU
        return llamacpp_stages(spec, dep.tensor_split or (1.0,) * dep.tensor_parallel)

    def rules(self, dep) -> str:
        if dep.engine_build is None:
            return "llama.cpp's current rules (--llamacpp-build: none given): " + self.rules_from
        era = "before" if self.legacy(dep) else "from"
        return (f"llama.cpp b{dep.engine_build} (--llamacpp-build; {era} b{LLAMACPP_PADDING_CHANGED}'s padding "
                f"change): " + self.rules_from)

    def legacy(self, dep) -> bool:
        """A build before #16812, whose padding depended on flash attention (get_padding)."""
        return dep.engine_build is not None and dep.engine_build < LLAMACPP_PADDING_CHANGED

    def padding(self, dep) -> int:
        return LLAMACPP_PAD if not self.legacy(dep) or dep.flash_attn else LLAMACPP_PAD_NO_FA

    def n_ctx(self, context: int, batch: int, dep) -> int:
        return pad(context * batch, self.padding(dep))

    # Architectures whose window llama.cpp does not keep: Phi-3's loader switches it off (src/models/phi3.cpp,
    # load_arch_hparams: "Phi SWA is currently disabled", swa_type NONE and n_swa 0 whenever the GGUF has a
    # window); the llama graph (Mistral's GGUFs are arch "llama"), starcoder2 and qwen2 build one cache of
    # n_ctx cells for every layer (src/models/llama.cpp, starcoder2.cpp, qwen2.cpp: build_attn_inp_kv, not
    # the sliding-window _iswa cache of gemma2/gemma3/cohere2/gpt-oss).  Every layer caches the whole context.
    NO_WINDOW = {"phi3": "llama.cpp disables Phi-3's sliding window (\"Phi SWA is currently disabled\", "
                         "ggml-org/llama.cpp#13676): every layer caches the whole context",
                 **{arch: f"llama.cpp's {graph} graph keeps no sliding-window cache (src/models/{graph}.cpp: "
                          f"build_attn_inp_kv): every layer caches the whole context"
                    for arch, graph in (("mistral", "llama"), ("starcoder2", "starcoder2"), ("qwen2", "qwen2"))}}

    def window_disabled(self, spec):
        return self.NO_WINDOW.get(spec.architecture) if spec.attention.sliding_window else None

    def kv_layers(self, kinds, context, batch, dep):
        n_ctx, p = self.n_ctx(context, batch, dep), self.padding(dep)
        streams = 1 if dep.kv_unified else batch
        if dep.kv_unified:
            stream = n_ctx
        else:  # before b6969: pad(ceil(n_ctx / n_seq), P) with n_ctx = context × n_seq, so pad(context, P);
            # current: pad(n_ctx / n_seq, 256) with n_ctx = pad(context × n_seq, 256), which is pad(context, 256)
            # too (context ≤ n_ctx / n_seq ≤ pad(context, 256), as pad(context, 256) × n_seq is a multiple of 256)
            stream = pad(context, p)

        def cells(window):
            if not window or dep.swa_full:
                return stream
            swa = window * (batch if dep.kv_unified else 1) + dep.ubatch
            # current: pad(min(stream, swa), P); before b6969 min(stream, pad(swa, P)): the same cells, as
            # stream is a multiple of P (pad(swa, P) ≤ stream whenever swa < stream)
            return pad(min(stream, swa), p)

        # A recurrent layer keeps one state cell per sequence (llama-memory-recurrent: n_seq_max cells).
        return [LayerKV(k.kind, k.layers, k.layers, k.window, 0, 0, batch * k.state_bytes) if k.kind == "linear"
                else LayerKV(k.kind, k.layers, k.layers, k.window, streams * cells(k.window), k.token_bytes)
                for k in kinds]

    def chunk(self, context, batch, dep):
        # The worst-case graph reserved at start-up: min(n_ctx, n_ubatch)
        # tokens, every one an output.
        tokens = min(self.n_ctx(context, batch, dep), dep.ubatch)
        return Chunk(tokens, tokens, "fp32", f"the reserved worst-case graph: n_ubatch = {tokens:,} tokens, "
                                             f"f32 activations, logits for every token")

    def reserve(self, capacity, dep):
        return {"fit margin": self.default_reserve if dep.reserve is None else dep.reserve}

    def settings(self, dep):
        return {"ubatch": dep.ubatch, "pad": self.padding(dep), "kv_unified": dep.kv_unified, "swa_full": dep.swa_full,
                "build": dep.engine_build, "flash_attn": dep.flash_attn}

    def warnings(self, dep):
        out = []
        if not dep.flash_attn and not self.legacy(dep):
            out.append("--no-flash-attn changes no cache size since llama.cpp b6969: every cache is padded to 256")
        tp = dep.tensor_parallel
        if tp == 1 or dep.tensor_split:
            return out
        return out + [f"llama.cpp splits layers across GPUs (-sm layer): --tp {tp} is planned as {tp} GPUs sharing the "
                f"layers evenly (--tensor-split 1,...,1; llama.cpp's own default splits by each GPU's free memory)"]

    def notes(self, kv, batch_per_gpu, dep, tied):
        p = self.padding(dep)
        lines = [f"{k.kind}: {k.layers} layers × one F32 state cell per sequence ({batch_per_gpu})"
                 if k.kind == "linear" else f"{k.kind}: {k.layers} layers × {k.cells:,} cells"
                 + ((f" = min(n_ctx, pad({k.window:,}·{batch_per_gpu} + {dep.ubatch}, {p}))" if self.legacy(dep) else
                     f" = pad(min(n_ctx, {k.window:,}·{batch_per_gpu} + {dep.ubatch}), {p})")
                    if k.window else f" = n_ctx padded to {p}") for k in kv]
        if not tied:
            lines.append("the token embedding stays in host memory")
        return lines
