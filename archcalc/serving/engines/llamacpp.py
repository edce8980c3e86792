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
sliding-window layers get the whole stream."""

from __future__ import annotations

from archcalc.parallel.pipeline import llamacpp_stages
from archcalc.serving.engines.base import Chunk, Engine, LayerKV, MiB, pad, register

LLAMACPP_PAD = 256  # n_ctx and the SWA cache are padded to 256 cells
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
                  "02c28f5), ggml-common.h; the SWA cache padded to 256 since ggml-org/llama.cpp#17037")
    affine = False  # cells padded to 256
    kv_types = {"f32": 4.0, "f16": 2.0, "bf16": 2.0,
                **{t: b / GGML_BLOCK for t, b in LLAMACPP_BLOCK_BYTES.items()}}
    default_kv_dtype = "f16"
    default_reserve = LLAMACPP_FIT_MARGIN
    # llama-memory-recurrent keeps the conv (r) and recurrent (s) states in F32 whatever the cache
    # type (llama_model::create_memory: GGML_TYPE_F32 for both).
    recurrent_state_bytes = conv_state_bytes = 4.0
    description = (f"n_ctx = context × batch cells padded to {LLAMACPP_PAD}; SWA layers "
                   f"min(n_ctx, pad(n_swa·n_seq + n_ubatch, {LLAMACPP_PAD})) cells (unified cache); quantized cache "
                   f"types in blocks of {GGML_BLOCK} (flash attention assumed); the token embedding stays in host "
                   f"memory; several GPUs split the layers (-sm layer); activations in f32")

    def stage_tp(self, dep):
        return 1  # -sm layer: every GPU runs whole layers

    def stages(self, spec, dep):
        # the layers split across the GPUs by --tensor-split, or evenly (llama.cpp's default splits by
        # free memory, even on identical GPUs); the input layer stays on the CPU
        return llamacpp_stages(spec, dep.tensor_split or (1.0,) * dep.tensor_parallel)

    def n_ctx(self, context: int, batch: int) -> int:
        return pad(context * batch, LLAMACPP_PAD)

    # Architectures whose window llama.cpp's loader switches off (src/models/phi3.cpp, load_arch_hparams:
    # "Phi SWA is currently disabled", swa_type NONE and n_swa 0 whenever the GGUF has a window).
    NO_WINDOW = {"phi3": "llama.cpp disables Phi-3's sliding window (\"Phi SWA is currently disabled\", "
                         "ggml-org/llama.cpp#13676): every layer caches the whole context"}

    def window_disabled(self, spec):
        return self.NO_WINDOW.get(spec.architecture) if spec.attention.sliding_window else None

    def kv_layers(self, kinds, context, batch, dep):
        n_ctx = self.n_ctx(context, batch)
        streams = 1 if dep.kv_unified else batch
        stream = n_ctx if dep.kv_unified else pad(n_ctx // batch, LLAMACPP_PAD)  # cells of one stream

        def cells(window):
            if not window or dep.swa_full:
                return stream
            return pad(min(stream, window * (batch if dep.kv_unified else 1) + dep.ubatch), LLAMACPP_PAD)

        # A recurrent layer keeps one state cell per sequence (llama-memory-recurrent: n_seq_max cells).
        return [LayerKV(k.kind, k.layers, k.layers, k.window, 0, 0, batch * k.state_bytes) if k.kind == "linear"
                else LayerKV(k.kind, k.layers, k.layers, k.window, streams * cells(k.window), k.token_bytes)
                for k in kinds]

    def chunk(self, context, batch, dep):
        # The worst-case graph reserved at start-up: min(n_ctx, n_ubatch)
        # tokens, every one an output.
        tokens = min(self.n_ctx(context, batch), dep.ubatch)
        return Chunk(tokens, tokens, "fp32", f"the reserved worst-case graph: n_ubatch = {tokens:,} tokens, "
                                             f"f32 activations, logits for every token")

    def reserve(self, capacity, dep):
        return {"fit margin": self.default_reserve if dep.reserve is None else dep.reserve}

    def settings(self, dep):
        return {"ubatch": dep.ubatch, "pad": LLAMACPP_PAD, "kv_unified": dep.kv_unified, "swa_full": dep.swa_full}

    def warnings(self, dep):
        tp = dep.tensor_parallel
        if tp == 1 or dep.tensor_split:
            return []
        return [f"llama.cpp splits layers across GPUs (-sm layer): --tp {tp} is planned as {tp} GPUs sharing the "
                f"layers evenly (--tensor-split 1,...,1; llama.cpp's own default splits by each GPU's free memory)"]

    def notes(self, kv, batch_per_gpu, dep, tied):
        lines = [f"{k.kind}: {k.layers} layers × one F32 state cell per sequence ({batch_per_gpu})"
                 if k.kind == "linear" else f"{k.kind}: {k.layers} layers × {k.cells:,} cells"
                 + (f" = min(n_ctx, pad({k.window:,}·{batch_per_gpu} + {dep.ubatch}, {LLAMACPP_PAD}))"
                    if k.window else f" = n_ctx padded to {LLAMACPP_PAD}") for k in kv]
        if not tied:
            lines.append("the token embedding stays in host memory")
        return lines
