"""Finding a model: near-miss names suggest the right bundled one, and a Hub id reads
config.json through huggingface_hub's own cache code (a cache folder the test builds;
no network)."""

from __future__ import annotations

import shutil
from pathlib import Path

import huggingface_hub.constants as hub_constants
import pytest
from click.testing import CliRunner

from archcalc.cli import cli
from archcalc.errors import InputError
from archcalc.spec.catalog import load_model
from archcalc.spec.hub import looks_like_hub_id
from tests.conftest import sized, spec_of

HF = Path(__file__).parents[1] / "data" / "hf"


@pytest.mark.parametrize("name, first, also", [
    ("llama-2-70b", "llama-2-7b", "llama-3.1-70b"),  # the same family first, then the same size
    ("mistral-7b", "mistral-7b-v0.1", "mixtral-8x7b"),  # a name the bundled one extends
    ("lama-3.1-8b", "llama-3.1-8b", None),  # a typo
    ("qwen3-32b", "qwen3-30b-a3b", "qwen3-8b"),  # nearest size in the family
])
def test_near_misses_suggest_by_family_and_size(name, first, also):
    with pytest.raises(InputError) as e:
        load_model(name)
    text = str(e.value)
    assert f"did you mean {first!r}?" in text and "Hub id" in text
    if also:
        assert also in text.split("also close:")[1]


def _cache(root: Path, repo: str, config: Path) -> None:
    """The layout huggingface_hub keeps: models--OWNER--NAME/{refs/main, snapshots/<commit>/config.json}."""
    folder = root / ("models--" + repo.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    (folder / "snapshots" / commit).mkdir(parents=True)
    shutil.copy(config, folder / "snapshots" / commit / "config.json")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)


def test_a_hub_id_reads_the_cached_config(tmp_path, monkeypatch):
    _cache(tmp_path, "meta-llama/Llama-3.1-8B", HF / "llama-3.1-8b.json")
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    spec, report = load_model("meta-llama/Llama-3.1-8B")
    assert spec.name == "Llama-3.1-8B" and report is not None
    assert sized(spec).params.total == sized(spec_of("llama-3.1-8b")).params.total == 8_030_261_248
    r = CliRunner().invoke(cli, ["size", "meta-llama/Llama-3.1-8B", "--json"])
    assert r.exit_code == 0 and '"total": 8030261248' in r.stdout


def test_a_hub_id_not_cached_offline_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    r = CliRunner().invoke(cli, ["size", "meta-llama/Llama-3.1-405B"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "not in the local Hugging Face cache" in r.stderr


@pytest.mark.parametrize("ref, hub", [("meta-llama/Llama-3.1-8B", True), ("Qwen/Qwen3-8B", True),
                                      ("specs/gpt2.yaml", False), ("a/b/c", False), ("../x", False),
                                      ("x/config.json", False), ("llama-3.1-8b", False)])
def test_what_counts_as_a_hub_id(ref, hub):
    assert looks_like_hub_id(ref) == hub
