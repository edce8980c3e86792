"""No input breaks archcalc, and none is silently misread.

Files of every kind (folders, FIFOs, devices, symlink loops, long names,
invalid UTF-8, NUL bytes, deep nesting, duplicate keys), real config.json
files and bundled specs with one value replaced by junk, and every command's
options with junk: each run ends in a result (exit 0; 1 for a lint gate) or in
exactly one `error:` line with exit status 2, never a traceback, and nothing
is written.  A string or a bool where a number belongs is always an error.
Seeded (hypothesis derandomized under CI); the whole file takes well under a
minute (ARCHCALC_FUZZ_EXAMPLES raises the examples per test).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archcalc.cli import cli
from archcalc.errors import InputError
from archcalc.spec.hf import read_config, spec_dict_from_config
from archcalc.spec.hf.keys import KEYS
from tests.conftest import BUNDLED, spec_of

HF = Path(__file__).parent / "data" / "hf"
CONFIGS = sorted(p.name for p in HF.glob("*.json"))
# ARCHCALC_FUZZ_EXAMPLES=2000 for a longer hunt (the README's Tests section); CI runs 40 per test.
FAST = settings(max_examples=int(os.environ.get("ARCHCALC_FUZZ_EXAMPLES", 40)), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def assert_clean(r, allowed=(0,)):
    """A result, or one error line and exit 2; never a traceback."""
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    if r.exit_code == 2:
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr
        assert "Traceback" not in r.output
    else:
        assert r.exit_code in allowed, (r.exit_code, r.output[-500:])


# ---- files of every kind -----------------------------------------------------------------------


def test_special_files_are_one_line_each(tmp_path):
    (tmp_path / "folder.yaml").mkdir()
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # reading it would block forever
    (tmp_path / "loop-a.yaml").symlink_to(tmp_path / "loop-b.yaml")
    (tmp_path / "loop-b.yaml").symlink_to(tmp_path / "loop-a.yaml")
    (tmp_path / "latin1.yaml").write_bytes("d_model: 64 # caf\xe9\n".encode("latin-1"))
    (tmp_path / "nul.yaml").write_bytes(b"d_model: 64\n\x00\n")
    (tmp_path / "deep.yaml").write_text("[" * 5000 + "]" * 5000)
    (tmp_path / "deep.json").write_text("[" * 50000 + "]" * 50000)
    (tmp_path / "dup.yaml").write_text(Path("specs/gpt2.yaml").read_text() + "\nd_model: 1024\n")
    (tmp_path / "dup.json").write_text('{"model_type": "gpt2", "n_embd": 768, "n_embd": 1024}')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "nan.json").write_text('{"model_type": "gpt2", "n_embd": NaN}')
    (tmp_path / "big.yaml").write_bytes(b"# " + b"x" * (17 * 2**20))
    cases = {
        "folder.yaml": "is a folder", "pipe.yaml": "not a regular file", "loop-a.yaml": "cannot read",
        "latin1.yaml": "not UTF-8", "nul.yaml": "NUL byte", "deep.yaml": "", "deep.json": "nested too deep",
        "dup.yaml": "duplicate key 'd_model'", "dup.json": "duplicate key", "list.json": "JSON object",
        "nan.json": "n_embd: NaN is not valid; expected an integer", "big.yaml": "at most",
    }
    for name, words in cases.items():
        r = invoke("size", str(tmp_path / name))
        assert r.exit_code == 2 and r.stderr.count("\n") == 1 and words in r.stderr, (name, r.output)
    for device in ("/dev/zero", "/dev/null"):
        r = invoke("size", device)
        assert r.exit_code == 2 and "not a regular file" in r.stderr, r.output
    r = invoke("size", str(tmp_path / ("x" * 300 + ".yaml")))
    assert r.exit_code == 2 and r.stderr.count("\n") == 1


def test_yaml_reads_floats_as_yaml_1_2_does(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(Path("specs/llama-3.2-1b.yaml").read_text() + "training: {learning_rate: 3e-4, tokens: 9e12}\n")
    r = invoke("size", str(path), "--json")
    assert r.exit_code == 0, r.output
    assert spec_of("llama-3.2-1b").d_model == json.loads(r.stdout)["params"]["embedding"] // 128256


# ---- config.json with one value replaced ----------------------------------------------------------

JUNK = st.one_of(
    st.sampled_from(["768", "false", "true", "1e4", "", "nan", "NaN", "-1", "0x10", "auto"]),
    st.booleans(), st.integers(-2**40, 2**40), st.sampled_from([0, -1, 2**31, 2**63, 10**400 // 10**390]),
    st.floats(allow_nan=False, allow_infinity=False, width=64), st.sampled_from([1e308, -0.0, 1e-300]),
    st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.sampled_from(["type", "factor", "x"]),
                                                              st.integers(-2, 10), max_size=2),
    st.none(),
)


def _kind_of(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


@FAST
@given(st.sampled_from(CONFIGS), st.data(), JUNK)
def test_a_config_value_replaced_by_junk(tmp_path_factory, name, data, junk):
    cfg = json.loads((HF / name).read_text())
    target = cfg.get("text_config", cfg)
    keys = sorted(k for k in target if k in KEYS and k != "text_config")
    key = data.draw(st.sampled_from(keys))
    original = target[key]
    target[key] = junk
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(json.dumps(cfg))
    r = invoke("size", str(path), "--context", "64")
    assert_clean(r)
    typed = _kind_of(original) in ("number", "bool")
    if r.exit_code == 0 and typed and junk is not None and _kind_of(junk) != _kind_of(original):
        # a value of the wrong type can only pass when the mapping never read that key
        _, report = spec_dict_from_config(read_config(path), str(path))
        prefix = "text_config." if "text_config" in cfg else ""
        assert prefix + key not in report.used, (key, junk)


@pytest.mark.parametrize("key, value, words", [
    ("n_embd", "768", "'768' is not valid; expected an integer"),
    ("tie_word_embeddings", "false", "expected true or false"),
    ("n_layer", 2**31, "from 1 to 16384"),
    ("n_head", 12.0, "expected an integer"),
    ("n_positions", True, "expected an integer"),
])
def test_the_reported_misreadings_are_errors(tmp_path, key, value, words):
    """The issue's examples: a string, a string bool, a huge count, a float count, a bool count."""
    cfg = json.loads((HF / "gpt2.json").read_text())
    cfg[key] = value
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = invoke("size", str(tmp_path / "config.json"))
    assert r.exit_code == 2 and words in r.stderr and r.stderr.count("\n") == 1, r.stderr
    with pytest.raises(InputError):
        spec_dict_from_config(read_config(tmp_path / "config.json"), "c")


def test_decoder_sparse_step_zero_and_llama_bias_strings(tmp_path):
    cfg = json.loads((HF / "qwen1.5-moe-a2.7b.json").read_text())
    cfg["decoder_sparse_step"] = 0
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert "decoder_sparse_step" in invoke("size", str(tmp_path / "config.json")).stderr
    cfg = json.loads((HF / "llama-3.1-8b.json").read_text())
    cfg["attention_bias"] = "false"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = invoke("size", str(tmp_path / "config.json"))
    assert r.exit_code == 2 and "attention_bias" in r.stderr


# ---- a bundled spec with one value replaced --------------------------------------------------------


def _leaf_paths(d: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += _leaf_paths(v, f"{prefix}{k}.")
        else:
            out.append(prefix + k)
    return out


@FAST
@given(st.sampled_from(BUNDLED), st.data(), JUNK)
def test_a_spec_value_replaced_by_junk(tmp_path_factory, name, data, junk):
    doc = yaml.safe_load(Path(f"specs/{name}.yaml").read_text())
    path_ = data.draw(st.sampled_from(_leaf_paths(doc)))
    *parents, leaf = path_.split(".")
    node = doc
    for p in parents:
        node = node[p]
    original = node[leaf]
    node[leaf] = junk
    path = tmp_path_factory.mktemp("spec") / "m.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML, and quotes every string (PyYAML's dump leaves 1e4 bare)
    r = invoke("size", str(path), "--context", "64")
    assert_clean(r)
    numeric = isinstance(original, (int, float)) and not isinstance(original, bool)
    if numeric and (isinstance(junk, (str, bool))):
        assert r.exit_code == 2, (path_, junk)  # never a number read out of a string or a bool


# ---- every command's options ----------------------------------------------------------------------

NUMBERS = st.sampled_from(["0", "-1", "1", "7", "1e400", "9" * 400, "abc", "", "2.5", "nan", "inf", "4096",
                           str(2**31), str(2**63)])
COMMANDS = {
    "size": ["--context", "--batch"],
    "roofline": ["--prompt", "--context", "--batch", "--gen", "--tp", "--gpus", "--repeats"],
    "fit": ["--context", "--batch", "--gpus", "--tp", "--pp", "--tensor-split", "--reserve",
            "--gpu-memory-utilization", "--max-num-batched-tokens", "--ubatch", "--vllm-version",
            "--llamacpp-build"],
    "compare": ["--context", "--batch", "--tp"],
    "sweep": ["--context", "--batch", "--top", "--samples", "--seed", "--tp"],
}
EXTRA = {"roofline": ["--gpu", "h100"], "fit": ["--gpu", "h100"], "compare": ["qwen3-0.6b"],
         "sweep": ["--vary", "n_layers=1..3"]}


@FAST
@given(st.sampled_from(sorted(COMMANDS)), st.data())
def test_options_with_junk_values(command, data):
    options = data.draw(st.lists(st.sampled_from(COMMANDS[command]), min_size=1, max_size=3, unique=True))
    args = [command, "llama-3.2-1b", *EXTRA.get(command, [])]
    for option in options:
        args += [option, data.draw(NUMBERS)]
    assert_clean(invoke(*args))


@pytest.mark.parametrize("args", [
    ["size", "llama-3.2-1b", "--context"],
    ["size"],
    ["lint", "llama-3.2-1b", "--fail-on", "sometimes"],
    ["sweep", "llama-3.2-1b", "--vary", "n_layers=1..3", "--where", "params.total <="],
    ["roofline", "llama-3.2-1b", "--gpu", str(Path("specs/gpt2.yaml"))],
    ["fit", "llama-3.2-1b", "--gpu", "/dev/zero"],
    ["show", "/dev/zero"],
    ["convert", "/dev/zero"],
    ["hardware", "show", "no-such-gpu"],
])
def test_assorted_bad_invocations(args):
    r = invoke(*args)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.output


def test_convert_checks_its_output_before_any_work(tmp_path):
    src = tmp_path / "c.json"
    src.write_text((HF / "gpt2.json").read_text())
    before = src.read_text()
    for target, words in ((src, "is the input"), (tmp_path / "missing" / "x.yaml", "does not exist"),
                          (tmp_path, "is a folder"), (tmp_path / ("y" * 300), "longer than")):
        r = invoke("convert", str(src), "-o", str(target))
        assert r.exit_code == 2 and words in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert src.read_text() == before and sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]
    assert invoke("convert", str(src), "-o", str(tmp_path / "ok.yaml")).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "ok.yaml"]  # no temporary file left


def test_written_files_get_the_usual_mode(tmp_path):
    old = os.umask(0o022)
    try:
        r = invoke("convert", str(HF / "gpt2.json"), "-o", str(tmp_path / "gpt2.yaml"))
    finally:
        os.umask(old)
    assert r.exit_code == 0 and (tmp_path / "gpt2.yaml").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("name, change, words", [
    ("smollm3-3b", {"no_rope_layers": [2] * 36}, "no_rope_layers[0]: 2 is not valid; expected 0 or 1"),
    ("gpt-neo-125m", {"attention_types": [[["global", "local"], 5]]}, "expands to 10 layers; num_layers is 12"),
    ("gpt-neo-125m", {"attention_types": [[["global", "local"], "6"]]}, "attention_types[0]: must be [[kinds...], repeat]"),
    ("gpt-neo-125m", {"attention_types": [[["global", "chunked"], 6]]}, "attention_types[0]: must be [[kinds...], repeat]"),
    ("gpt-neo-125m", {"attention_types": [[["local"], 10**12]]}, "attention_types[0]: must be [[kinds...], repeat]"),
    ("gpt-neo-125m", {"attention_types": [[[["global"]], 12]]}, "attention_types[0]: must be [[kinds...], repeat]"),
    ("gpt-neo-125m", {"attention_types": None}, "attention_types: required key is missing: transformers' default"),
    ("gpt-neo-125m", {"attention_types": [["global", 12]]}, "attention_types[0]: must be [[kinds...], repeat]"),
    ("gpt-neo-125m", {"attention_types": [[["global"], 12, 1]]}, "attention_types[0]: must be [[kinds...], repeat]"),
    ("gpt-neo-125m", {"attention_layers": ["local"] * 12}, "attention_layers: disagrees with attention_types"),
    ("gpt-neo-125m", {"window_size": "256"}, "window_size: '256' is not valid; expected an integer"),
    ("dbrx-instruct", {"ffn_config": {"hidden_size": 4096}}, "ffn_config.hidden_size: must equal d_model (6144)"),
    ("gemma-2b", {"use_bidirectional_attention": True}, "use_bidirectional_attention: bidirectional attention is not"),
    ("deepseek-v2-lite", {"mlp_bias": True}, "mlp_bias: biases on MLA projections and MLPs are not supported"),
    ("deepseek-v2-lite", {"layer_types": ["sliding_attention"] * 27}, "layer_types: every layer of this MLA model"),
    ("gpt_bigcode-santacoder", {"num_key_value_heads": 16}, "num_key_value_heads: must be 1, as multi_query says"),
    ("dbrx-instruct", {"attn_config": {"kv_n_heads": "8"}}, "attn_config.kv_n_heads: '8' is not valid; expected an integer"),
    ("dbrx-instruct", {"ffn_config": {"moe_top_k": 0}}, "ffn_config.moe_top_k: 0 is not valid; expected an integer"),
    ("dbrx-instruct", {"ffn_config": {"ffn_act_fn": {"name": "xielu"}}}, "ffn_config.ffn_act_fn.name: 'xielu' has no gated form"),
    ("dbrx-instruct", {"ffn_config": {"ffn_act_fn": {"name": 1}}}, "ffn_act_fn.name: 1 is not valid; expected a string"),
    ("dbrx-instruct", {"ffn_config": [16]}, "ffn_config: [16] is not valid; expected a JSON object"),
    ("persimmon-8b-base", {"model_type": "minicpm3", "attention_bias": True, "qk_nope_head_dim": 32,
                           "qk_rope_head_dim": 32}, "attention_bias: biases on MLA projections are not supported"),
    ("persimmon-8b-base", {"model_type": "minicpm3", "qk_head_dim": 100}, "qk_head_dim: 100 is not qk_nope_head_dim"),
    ("persimmon-8b-base", {"model_type": "exaone_moe", "num_experts": 4, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 64, "hidden_act": "silu", "mlp_layer_types": ["sparse"] * 35},
     "mlp_layer_types: 36 entries of dense or sparse expected"),
    ("persimmon-8b-base", {"model_type": "xglm", "add_cross_attention": True}, "add_cross_attention: true is not supported"),
    ("persimmon-8b-base", {"model_type": "biogpt", "num_key_value_heads": 8}, "num_key_value_heads: must equal the head count"),
    ("persimmon-8b-base", {"model_type": "cohere2_moe", "layer_types": ["sliding_attention"] * 35},
     "layer_types: 36 entries of sliding_attention or full_attention expected"),
    ("persimmon-8b-base", {"model_type": "afmoe", "hidden_act": "silu", "num_experts": 4, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 64, "global_attn_every_n_layers": 0},
     "global_attn_every_n_layers: 0 is not valid; expected an integer"),
    ("persimmon-8b-base", {"num_key_value_heads": 8}, "num_key_value_heads: must equal the head count (64)"),
    ("persimmon-8b-base", {"qk_layernorm": "true"}, "qk_layernorm: 'true' is not valid; expected true or false"),
    ("persimmon-8b-base", {"partial_rotary_factor": 0}, "partial_rotary_factor: 0 is not valid"),
    ("granite-swash-2b", {"layer_rope_theta": [10000] * 23}, "layer_rope_theta: lists 23 layers, num_hidden_layers is 24"),
    ("granite-swash-2b", {"layer_rope_theta": [-1] * 24}, "layer_rope_theta[0]: -1 is not valid; expected RoPE bases"),
    ("granite-swash-2b", {"layer_rope_theta": ["0"] * 24}, "layer_rope_theta[0]: '0' is not valid; expected RoPE bases"),
    ("granite-swash-2b", {"layer_rope_theta": 10000}, "layer_rope_theta: 10000 is not valid; expected a list"),
    ("granite-swash-2b", {"layer_types": ["chunked_attention"] * 24}, "layer_types: ['chunked_attention'] not supported"),
    ("mpt-7b-instruct", {"attn_config": {"alibi": False}}, "attn_config.alibi: transformers' MPT has no position"),
    ("mpt-7b-instruct", {"attn_config": {"attn_type": "grouped_query_attention"}}, "is not supported"),
    ("hunyuan-7b", {"use_cla": True}, "use_cla: must be false"),
    ("lfm2-1.2b", {"block_dim": 1024}, "block_dim: 1024 differs from hidden_size 2048"),
    ("stablelm-3b-4e1t", {"qk_layernorm": True}, "per-head q/k LayerNorms are not supported"),
    ("llama-4-scout", {"no_rope_layers": [1, 0]}, "no_rope_layers: lists 2 layers, num_hidden_layers is 48"),
    ("ernie-4.5-21b-a3b", {"use_bias": True}, "use_bias: biases in ERNIE 4.5 MoE"),
    ("jamba-1.5-mini", {"sliding_window": 4096}, "Jamba with a sliding window is not supported"),
    ("apertus-8b", {"post_norm": True}, "post_norm: must be false"),
    ("qwen3-next-80b-a3b", {"linear_num_value_heads": 24}, "n_heads (24) must be divisible by n_key_heads (16)"),
    ("jamba-1.5-mini", {"mamba_dt_rank": "auto2"}, "mamba_dt_rank: 'auto2' is not valid; expected an integer"),
    ("glm-4.7-flash", {"first_k_dense_replace": 2}, "first_k_dense_replace: disagrees with mlp_layer_types"),
    ("glm-4.7-flash", {"partial_rotary_factor": 0.5}, "partial_rotary_factor: only 1.0 is supported with MLA"),
])
def test_new_families_refuse_what_they_cannot_be(tmp_path, name, change, words):
    """A config value the family's transformers model cannot have, or that archcalc does not
    model, is one clear line with exit status 2, never a silent misreading."""
    cfg = json.loads((HF / f"{name}.json").read_text())
    target = cfg.get("text_config", cfg)
    for key, value in change.items():
        target[key] = {**target[key], **value} if isinstance(value, dict) and key in target else value
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = invoke("size", str(tmp_path / "config.json"))
    assert r.exit_code == 2 and words in r.stderr and r.stderr.count("\n") == 1, r.stderr
