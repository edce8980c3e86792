"""Reading a config.json: every key ends up in exactly one list of the report (used, defaulted or
ignored with its reason); a key nobody recognises is a visible warning."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from archcalc.errors import InputError
from archcalc.spec.hf.keys import checked


_MISSING = object()

# Keys that change no parameter, FLOP or cache byte: ids, dtypes of the
# checkpoint, dropout, init, epsilons, training-only losses, routing details
# that do not change how many experts run, and bookkeeping.
NO_COST_KEYS = {
    "architectures", "model_type", "transformers_version", "torch_dtype", "dtype", "_name_or_path",
    "_commit_hash", "auto_map", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id",
    "use_cache", "initializer_range", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps",
    "norm_epsilon", "attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop",
    "residual_dropout", "resid_dropout", "embedding_dropout", "emb_pdrop", "embed_dropout", "classifier_dropout", "summary_activation", "summary_first_dropout",
    "summary_proj_to_labels", "summary_type", "summary_use_proj", "task_specific_params", "pretraining_tp",
    "router_aux_loss_coef", "output_router_logits", "aux_loss_alpha", "seq_aux", "norm_topk_prob",
    "routed_scaling_factor", "scoring_func", "topk_method", "n_group", "topk_group", "ep_size",
    "query_pre_attn_scalar", "logit_scale", "cache_implementation", "attention_softmax_in_fp32",
    "scale_attention_softmax_in_fp32", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
    "reorder_and_upcast_attn", "use_return_dict", "torchscript", "id2label", "label2id", "max_length",
    "swiglu_limit", "swiglu_alpha", "initial_context_length", "router_jitter_noise", "bos_token", "eos_token",
    "tokenizer_class", "use_flash_attn", "use_memory_efficient_attention", "rope_interleaved",
    "apply_residual_connection_post_layernorm", "is_decoder", "do_sample", "gradient_checkpointing",
    "image_token_index", "boi_token_index", "eoi_token_index", "unk_token_id", "dropout", "activation_dropout",
    "decoder_start_token_id", "tokenizer_name", "_attn_implementation_autoset", "clip_qkv", "num_logits_to_keep",
    "mm_tokens_per_image", "initializer_factor", "attn_implementation", "eod_token_id",
    "use_mrope",  # Qwen2-VL's split of the rotary dims by section: the same rotations
    # PretrainedConfig's own attributes, which nested configs (DBRX's) carry when transformers writes them
    "return_dict", "output_attentions", "output_hidden_states", "chunk_size_feed_forward", "problem_type",
    "is_encoder_decoder",
    # kernels and scheduling: Jamba's scan implementation, Nemotron-H's shared-expert overlap
    "use_associative_scan", "use_mambapy", "moe_shared_expert_overlap",
}
NO_COST_REASON = "changes no parameter, FLOP or cache byte"


@dataclass
class MappingReport:
    used: dict[str, Any] = field(default_factory=dict)
    defaulted: dict[str, Any] = field(default_factory=dict)
    ignored: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class ConfigReader:
    """Reads keys from a config dict and records what happened to each."""

    def __init__(self, cfg: dict, path: str, report: MappingReport, prefix: str = "", family_defaults: dict | None = None):
        self.cfg, self.path, self.report, self.prefix = cfg, path, report, prefix
        self.family_defaults = family_defaults or {}

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None or key in self.family_defaults

    def get(self, *keys: str, default: Any = _MISSING) -> Any:
        """The first of `keys` present with a non-null value; else the family's
        default, else `default` (both recorded as defaulted), or an error when
        there is none.  Other aliases present must agree with the one used."""
        for key in keys:
            if self.cfg.get(key) is not None:
                value = checked(self.path, self.prefix + key, key, self.cfg[key])
                self.report.used[self.prefix + key] = value
                self.report.ignored.pop(self.prefix + key, None)  # read after all: used, in one list only
                self._check_aliases(key, keys)
                return value
        if keys[0] in self.family_defaults:
            default = self.family_defaults[keys[0]]
        if default is _MISSING:
            raise InputError(self.path, self.prefix + keys[0], "required key is missing")
        self.report.defaulted[self.prefix + keys[0]] = default
        return default

    def _check_aliases(self, used: str, keys: tuple[str, ...]) -> None:
        for other in keys:
            if other == used or other not in self.cfg or self.prefix + other in self.report.ignored:
                continue
            if self.cfg[other] in (None, self.cfg[used]):
                self.report.ignored[self.prefix + other] = f"same as {used}"
            else:
                self.report.ignored[self.prefix + other] = f"disagrees with {used}, which is used"
                self.report.warnings.append(
                    f"{self.path}: {self.prefix + other}={self.cfg[other]!r} disagrees with "
                    f"{self.prefix + used}={self.cfg[used]!r}; using {used}")

    def nested(self, table: dict, key: str, where: str, default: Any = None) -> Any:
        """`table[key]` of a nested object (rope_scaling), type-checked like a top-level key."""
        value = table.get(key)
        return default if value is None else checked(self.path, f"{self.prefix}{where}.{key}", key, value)

    def ignore(self, key: str, reason: str) -> None:
        """`key`, where the config has it, changes nothing counted (unless it was read: then it stays used)."""
        if key in self.cfg and self.prefix + key not in self.report.used:
            self.report.ignored[self.prefix + key] = reason

    def overrule(self, key: str, reason: str) -> None:
        """`key`, read by the family's reader, is not what this variant uses (a drafter's text_config
        tie_word_embeddings): ignored for `reason` where the config has it, and no longer reported used or defaulted."""
        self.report.used.pop(self.prefix + key, None)
        self.report.defaulted.pop(self.prefix + key, None)
        self.ignore(key, reason)

    def finish(self) -> None:
        """Sort every key not yet seen into ignored (known) or a warning."""
        seen = {k.removeprefix(self.prefix) for k in (*self.report.used, *self.report.defaulted, *self.report.ignored)}
        for key in self.cfg:
            if key in seen:
                continue
            if key in NO_COST_KEYS:
                self.report.ignored[self.prefix + key] = NO_COST_REASON
            else:
                self.report.warnings.append(f"{self.path}: key {self.prefix + key!r} not understood, ignored")
