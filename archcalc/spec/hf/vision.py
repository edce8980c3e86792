"""The vision tower and projector a multimodal checkpoint loads (vision_config)."""

from __future__ import annotations

from archcalc.errors import InputError
from archcalc.spec.hf.keys import checked
from archcalc.spec.hf.reader import ConfigReader, MappingReport


# Multimodal checkpoints whose image input has weights but no vision_config to read it from.
VISION_WITHOUT_CONFIG = {"fuyu": "the fuyu image-patch projection (vision_embed_tokens)",
                         "emu3": "the emu3 VQ-VAE image tokenizer (vq_config)",
                         "apertus1p5": "the apertus1p5 image and audio tokenizers (vision_tokenizer_config, "
                                       "audio_tokenizer_config)"}


# transformers' SiglipVisionConfig defaults (models/siglip/configuration_siglip.py), for keys a
# vision_config leaves out.
SIGLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
                   "num_channels": 3, "image_size": 224, "patch_size": 16, "vision_use_head": True}
# outer model_type -> (its vision_config's model_type, the tower and projector it builds)
VISION_PROJECTORS = {"gemma3": ("siglip_vision_model", "gemma3"), "llama4": ("llama4_vision_model", "llama4")}


def _vision(outer: ConfigReader, cfg: dict, report: MappingReport) -> dict:
    """vision_config -> VisionSpec fields: the SigLIP tower and the projector a multimodal checkpoint loads."""
    raw = checked(outer.path, "vision_config", "vision_config", cfg["vision_config"])
    kind = raw.get("model_type")
    tower, projector = VISION_PROJECTORS.get(cfg.get("model_type"), (None, None))
    if kind != tower:
        raise InputError(outer.path, "vision_config.model_type",
                         f"{kind!r} under {cfg.get('model_type')!r} is not supported; known: "
                         + ", ".join(f"{t} under {o}" for o, (t, _) in VISION_PROJECTORS.items()))
    report.used["vision_config"] = "the vision tower and projector: spec.vision (weights fit loads)"
    llama4 = projector == "llama4"
    v = ConfigReader(raw, outer.path, report, prefix="vision_config.",
                     family_defaults=None if llama4 else SIGLIP_DEFAULTS)
    v.get("model_type")
    out = {"d_model": v.get("hidden_size"), "d_ff": v.get("intermediate_size"), "n_layers": v.get("num_hidden_layers"),
           "n_heads": v.get("num_attention_heads"), "patch_size": v.get("patch_size"),
           "image_size": v.get("image_size"), "channels": v.get("num_channels"), "projector": projector}
    if llama4:
        if v.get("multi_modal_projector_bias", default=False):
            raise InputError(outer.path, "vision_config.multi_modal_projector_bias", "true is not supported")
        out.update(kind="llama4", projector_input_dim=v.get("projector_input_dim"),
                   projector_output_dim=v.get("projector_output_dim"), output_dim=v.get("vision_output_dim"))
        for key in ("pixel_shuffle_ratio", "rope_theta", "rope_parameters", "norm_eps", "hidden_act", "vision_feature_layer",
                    "vision_feature_select_strategy", "attention_dropout", "projector_dropout", "initializer_range"):
            v.ignore(key, "no parameter: the adapter's widths are given, its 2-D RoPE has no weights")
    else:
        out["head"] = v.get("vision_use_head")
        v.ignore("hidden_act", "SigLIP's activation: the same MLP widths")
    for key in ("mm_tokens_per_image", "boi_token_index", "eoi_token_index", "image_token_index"):
        outer.ignore(key, "image tokens: no parameter (the projector's pooling has none)")
    v.finish()
    return out
