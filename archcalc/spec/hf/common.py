"""The pieces every family's reader shares: activations, positions (RoPE and its scaling), windows,
the core widths and the attention heads."""

from __future__ import annotations

from archcalc.errors import InputError
from archcalc.spec.hf.reader import ConfigReader
from archcalc.spec.hf.keys import checked


GELU_NAMES = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python", "gelu_accurate")
ACTIVATIONS = {**{g: "gelu" for g in GELU_NAMES}, "silu": "silu", "swish": "silu", "relu": "relu", "relu2": "relu2",
               "xielu": "xielu"}
GATED_FORM = {"gelu": "geglu", "silu": "swiglu", "relu": "reglu", "relu2": "relu2glu"}


def _activation(r: ConfigReader, gated: bool, default: str,
                keys: tuple[str, ...] = ("hidden_activation", "hidden_act", "activation_function")) -> str:
    name = r.get(*keys, default=default)
    if name not in ACTIVATIONS:
        raise InputError(r.path, "hidden_act", f"activation {name!r} is not known; known: {', '.join(ACTIVATIONS)}")
    base = ACTIVATIONS[name]
    if gated:
        if base not in GATED_FORM:
            raise InputError(r.path, "hidden_act", f"no gated form of {name!r}")
        return GATED_FORM[base]
    return base


def _built_so(r: ConfigReader, model: str, **switches: bool) -> None:
    """Config flags the family's transformers model hard-codes: any other value is not that model."""
    for key, needed in switches.items():
        if r.get(key, default=needed) is not needed:
            raise InputError(r.path, key, f"must be {str(needed).lower()}: transformers' {model} is built so")


GRANITE_MULTIPLIERS = ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling")


def _ignore_multipliers(r: ConfigReader) -> None:
    for key in GRANITE_MULTIPLIERS:
        r.ignore(key, "scales activations, scores or logits: no parameter, FLOP or byte changes")


def _rope_scaling(r: ConfigReader) -> dict | None:
    """rope_scaling (transformers < 5) or rope_parameters (>= 5, possibly
    keyed by layer type); returns {type, factor, original_max_position_embeddings}."""
    raw = r.get("rope_scaling", "rope_parameters", default=None)
    if not raw:
        return None
    where = "rope_scaling" if r.cfg.get("rope_scaling") is not None else "rope_parameters"
    if "full_attention" in raw:  # per layer type: the global layers set the context limit
        where += ".full_attention"
        raw = checked(r.path, r.prefix + where, "rope_scaling", raw["full_attention"])
    kind = r.nested(raw, "rope_type", where) or r.nested(raw, "type", where, "default")
    if kind in ("default", None):
        return None
    if kind == "proportional":  # Gemma 4's global layers: partial rotary, no context scaling
        if float(r.nested(raw, "factor", where, 1.0)) != 1.0:
            raise InputError(r.path, r.prefix + where + ".factor", "proportional RoPE with a factor other than 1 "
                             "is not supported")
        return None
    if kind == "su":  # Phi-3's old name for longrope
        kind = "longrope"
    known = ("linear", "dynamic", "yarn", "llama3", "longrope")
    if kind not in known:
        raise InputError(r.path, "rope_scaling.rope_type", f"{kind!r} is not known; known: {', '.join(known)}")
    original = r.nested(raw, "original_max_position_embeddings", where)
    if original is None and r.has("original_max_position_embeddings"):  # Phi-3 keeps it at the top level
        original = r.get("original_max_position_embeddings")
    return {"type": kind, "factor": float(r.nested(raw, "factor", where, 1.0)), "original": original}


def _rope_base(r: ConfigReader, layer_type: str) -> float:
    """rope_theta at the top level (transformers < 5) or inside rope_parameters, which transformers 5
    writes instead (keyed by layer type where those differ: Gemma 3's sliding_attention base)."""
    top = ("rope_theta", "rotary_emb_base") if layer_type == "full_attention" else ("rope_local_base_freq",)
    if any(r.has(key) for key in top):
        return float(r.get(*top))
    nested, where = r.cfg.get("rope_parameters"), "rope_parameters"
    if isinstance(nested, dict) and isinstance(nested.get(layer_type), dict):
        nested, where = nested[layer_type], f"rope_parameters.{layer_type}"
    if isinstance(nested, dict) and nested.get("rope_theta") is not None:
        return float(r.nested(nested, "rope_theta", where))
    return float(r.get(top[0], default=10000.0))  # the config classes' default


def _position(r: ConfigReader, *, rotary_fraction: float = 1.0, scaled_limit_is_final: bool = False) -> tuple[dict, int]:
    """RoPE settings and the context limit (vLLM's rule, anchors §1.4 / §C.3)."""
    base = r.get("max_position_embeddings", "n_positions", "seq_length", default=2048)
    pos: dict = {"kind": "rope", "theta": _rope_base(r, "full_attention")}
    if rotary_fraction != 1.0:
        pos["rotary_fraction"] = rotary_fraction
    scaling = _rope_scaling(r)
    if not scaling:
        r.ignore("original_max_position_embeddings", "no rope scaling: the limit is max_position_embeddings")
    limit = base
    if scaling:
        pos["scaling"] = {"type": scaling["type"], "factor": scaling["factor"]}
        if scaling["original"]:
            pos["scaling"]["original_context"] = int(scaling["original"])
        if scaled_limit_is_final or scaling["type"] in ("llama3", "longrope"):
            pass  # the config's limit already includes the extension
        elif scaling["type"] == "yarn" and scaling["original"]:
            limit = int(scaling["original"] * scaling["factor"])
        else:
            limit = int(base * scaling["factor"])
    return pos, int(limit)


def _window(r: ConfigReader, n_layers: int, *, pattern_key_default: str | None = None,
            default_types: list[str] | None = None) -> dict:
    """sliding_window with layer_types (default_types: the config class's list when it is absent) /
    sliding_window_pattern / use_sliding_window."""
    names = {"sliding_attention": "local", "full_attention": "global", "linear_attention": "linear"}
    off = r.has("use_sliding_window") and not r.get("use_sliding_window")
    if off:
        for key in ("sliding_window", "max_window_layers", "sliding_window_pattern"):
            r.ignore(key, "use_sliding_window is false: every layer attends to the full context")
        if not r.has("layer_types"):
            return {}
        # layer_types still says which layers are linear (Qwen3-Next as transformers 5 saves it); its
        # sliding entries get no window (Qwen2Config drops sliding_window): they attend to everything
        names["sliding_attention"] = "global"
    window = None if off else r.get("sliding_window", default=None)
    if r.has("sliding_window_size"):
        r.ignore("sliding_window_size", "duplicate of sliding_window")
    layer_types = r.get("layer_types", default=default_types)
    if layer_types:
        unknown = set(layer_types) - set(names)
        if unknown:
            raise InputError(r.path, "layer_types", f"{sorted(unknown)} not supported; known: {', '.join(names)}")
        kinds = [names[t] for t in layer_types]
        for key in ("sliding_window_pattern", "_sliding_window_pattern", "max_window_layers"):
            r.ignore(key, "layer_types takes precedence")
        if "local" not in kinds and not off:
            r.ignore("sliding_window", "no layer_types entry is sliding_attention")
            window = None
        return {"sliding_window": window, "layer_types": kinds} if set(kinds) != {"global"} else {}
    if window is None:
        r.ignore("sliding_window_pattern", "no sliding_window")
        r.ignore("max_window_layers", "no sliding_window")
        return {}
    if r.has("sliding_window_pattern"):  # Gemma 3 / Cohere 2: layer i is global iff (i + 1) % p == 0
        p = int(r.get("sliding_window_pattern"))
        return {"sliding_window": window, "layer_types": f"{p - 1}:1"}
    if pattern_key_default:
        return {"sliding_window": window, "layer_types": pattern_key_default}
    if r.has("max_window_layers"):  # Qwen2: layers from max_window_layers on use the window
        first = int(r.get("max_window_layers"))
        return {"sliding_window": window,
                "layer_types": ["global" if i < first else "local" for i in range(n_layers)]}
    return {"sliding_window": window}


def _every_nth_global(n_layers: int, every: int, last: bool = False) -> list[str]:
    """AfmoeConfig's (every = global_attn_every_n_layers), Kolibri1Config's (5), Gemma4TextConfig's and BeamConfig's
    (6, and the last layer global: `last`) layer_types when absent: layer i is global iff (i + 1) % every == 0."""
    return ["sliding_attention" if (i + 1) % int(every) and not (last and i == n_layers - 1) else "full_attention"
            for i in range(n_layers)]


def _core(r: ConfigReader, *, tie_default: bool, layers: bool = True) -> dict:
    """Width, depth (layers=False: the family derives it), vocabulary and tying."""
    return {
        "d_model": r.get("hidden_size", "n_embd", "d_model"),
        **({"n_layers": r.get("num_hidden_layers", "n_layer", "num_layers", "n_layers")} if layers else {}),
        "vocab_size": r.get("vocab_size"),
        "tie_embeddings": bool(r.get("tie_word_embeddings", default=tie_default)),
    }


def _heads(r: ConfigReader, n_heads_key=("num_attention_heads", "n_head")) -> dict:
    n_heads = r.get(*n_heads_key)
    att = {"n_heads": n_heads,
           "n_kv_heads": r.get("num_key_value_heads", "num_kv_heads", "n_head_kv", default=n_heads)}
    head_dim = r.get("head_dim", "kv_channels", "attention_head_dim", default=None)
    if head_dim is not None:
        att["head_dim"] = head_dim
    return att


def _rotary_fraction(r: ConfigReader, default: float) -> float:
    """partial_rotary_factor at the top level, or inside transformers 5's rope_parameters."""
    if r.has("partial_rotary_factor"):
        return float(r.get("partial_rotary_factor"))
    nested = r.cfg.get("rope_parameters")
    if isinstance(nested, dict) and nested.get("partial_rotary_factor") is not None:
        return float(r.nested(nested, "partial_rotary_factor", "rope_parameters"))
    return default


def _with_layers(moe: dict, layers: list[int], n_layers: int) -> dict:
    """Which layers are MoE, as first_dense_layers when that says it, else a list."""
    first = n_layers - len(layers)
    if layers != list(range(first, n_layers)):
        return {**moe, "layers": layers}
    return {**moe, "first_dense_layers": first} if first else moe


def _check_mlp_types(r: ConfigReader, types: list, n_layers: int) -> None:
    """mlp_layer_types (given or a config class's rule): n_layers entries of "dense" or "sparse"."""
    if len(types) != n_layers or set(types) - {"dense", "sparse"}:
        raise InputError(r.path, r.prefix + "mlp_layer_types", f"{n_layers} entries of dense or sparse expected")


def _mlp_layer_types(r: ConfigReader, n_layers: int, first_dense: int) -> list[str]:
    """mlp_layer_types ("dense" or "sparse" a layer) as the config lists them, else the config class's rule:
    the first first_k_dense_replace layers dense (default `first_dense`), the rest sparse."""
    types = r.get("mlp_layer_types", default=None)
    if types is None:
        first = r.get("first_k_dense_replace", default=first_dense)
        types = ["dense" if i < first else "sparse" for i in range(n_layers)]
    else:
        r.ignore("first_k_dense_replace", "mlp_layer_types lists the layers")
    _check_mlp_types(r, types, n_layers)
    return types


def _no_cross_attention(r: ConfigReader) -> None:
    """add_cross_attention (GPT-2, XGLM, BioGPT's configs): layers that attend to an encoder's states."""
    if r.get("add_cross_attention", default=False):
        raise InputError(r.path, r.prefix + "add_cross_attention", "true is not supported: cross-attention to an "
                         "encoder is not a decoder-only model")


def _multi_head(r: ConfigReader, n_heads: int, model: str) -> int:
    """n_heads, for a family whose attention is multi-head whatever num_key_value_heads says (its
    modules never read the key): a different value there is not that model."""
    if r.get("num_key_value_heads", default=n_heads) != n_heads:
        raise InputError(r.path, r.prefix + "num_key_value_heads", f"must equal the head count ({n_heads}): "
                         f"transformers' {model} is multi-head attention")
    return n_heads


TORCH_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _state_dtype(r: ConfigReader, key: str) -> str | None:
    """A recurrent-state dtype key ("float32") as a spec dtype; None when absent."""
    value = r.get(key, default=None)
    if value is not None and value not in TORCH_DTYPES:
        raise InputError(r.path, r.prefix + key, f"{value!r}; valid: {', '.join(TORCH_DTYPES)}")
    return TORCH_DTYPES.get(value)


def _rope_by_kind(r: ConfigReader, att: dict, kinds: list[str], default: dict, model: str,
                  names: tuple[str, str] = ("full_attention", "sliding_attention")) -> dict:
    """rope_parameters keyed by layer type (BeamConfig's, CohereCompassTextConfig's; ZayaConfig's `names` are hybrid
    and hybrid_sliding): for each kind a default RoPE (its base) or null, no position encoding on those layers;
    `default` when the config has none.  The spec's position (kind none when no layer rotates), with global_rope /
    nope_layers set on `att`."""
    where = r.prefix + "rope_parameters"
    rope = r.get("rope_parameters", default=None) or default
    theta = {}
    for kind, name in zip(("global", "local"), names):
        if kind in kinds and name not in rope:
            raise InputError(r.path, where, f"no entry for {name}: give one per layer type (an object, or null for "
                             f"no RoPE), as transformers' {model} reads them")
        entry = rope.get(name)
        if entry is None:
            continue
        if not isinstance(entry, dict):
            raise InputError(r.path, f"{where}.{name}", "an object (rope_type, rope_theta) or null (no RoPE)")
        if r.nested(entry, "rope_type", f"rope_parameters.{name}", "default") != "default":
            raise InputError(r.path, f"{where}.{name}.rope_type", f"only default RoPE is supported for {model}")
        theta[kind] = float(r.nested(entry, "rope_theta", f"rope_parameters.{name}", 10000.0))
    rotated = [k for k in set(kinds) if k in theta]
    if not rotated:
        return {"kind": "none"}
    pos = {"kind": "rope", "theta": theta.get("global", theta.get("local"))}
    if "local" in rotated and theta["local"] != pos["theta"]:
        pos["local_theta"] = theta["local"]
    if "global" in kinds and "global" not in theta:
        att["global_rope"] = False
    if "local" in kinds and "local" not in theta:
        att["nope_layers"] = [i for i, k in enumerate(kinds) if k == "local"]
    return pos


def _slide_where_listed(r: ConfigReader, att: dict, kinds: list[str], listed: list[str], sliding_name: str) -> None:
    """Where some layer of `kinds` is local: sliding_window and the layer list `listed` (the kinds, or a loop's
    layers run) set on `att`; else sliding_window, read by no layer, is ignored."""
    if "local" in kinds:
        att.update(sliding_window=r.get("sliding_window"), layer_types=listed)
    else:
        r.ignore("sliding_window", f"no layer_types entry is {sliding_name}")


def _full_or_sliding(r: ConfigReader, att: dict, n_layers: int, default_types: list[str], window: int) -> list[str]:
    """layer_types of full_attention and sliding_attention entries (default_types: the config class's list when
    absent) as the spec's kinds; the sliding layers' window (sliding_window, else `window`) set on `att`."""
    types = r.get("layer_types", default=default_types)
    if len(types) != n_layers or set(types) - {"full_attention", "sliding_attention"}:
        raise InputError(r.path, r.prefix + "layer_types", f"{n_layers} entries of full_attention or sliding_attention")
    kinds = ["global" if t == "full_attention" else "local" for t in types]
    if "local" in kinds:
        att.update(sliding_window=r.get("sliding_window", default=window), layer_types=kinds)
    else:
        r.ignore("sliding_window", "no layer_types entry is sliding_attention")
    return kinds
