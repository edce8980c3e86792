"""The README's worked `fit` examples are what the commands print today: each quoted figure must be
in both (a change to a rule that moves them fails here, not silently in the docs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from archcalc.cli import cli

README = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())

EXAMPLES = [
    (["fit", "gemma-3-27b", "--gpu", "h100", "--context", "131072", "--engine", "vllm"],
     ["Available KV cache memory: 17.79 GiB",
      "GPU KV cache size: 163,868 tokens, Maximum concurrency for 131,072 tokens per request: 1.25x"]),
    (["fit", "llama-3.1-70b", "--gpu", "h100", "--gpus", "2", "--context", "131072", "--kv-dtype", "fp8_e4m3"],
     ["2.59 GiB", "33888"]),
    (["fit", "llama-3.1-70b", "--gpu", "h100", "--gpus", "2", "--context", "131072", "--kv-dtype", "fp8_e4m3",
      "--dtype", "fp8"], ["34.46 GiB", "3.45x"]),
]


@pytest.mark.parametrize(("args", "quoted"), EXAMPLES, ids=lambda a: " ".join(a) if isinstance(a[0], str) else "")
def test_readme_fit_example(args, quoted):
    result = CliRunner().invoke(cli, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    printed = " ".join(result.stdout.split())
    for figure in quoted:
        assert figure in printed and figure in README, figure


def test_the_readme_lists_every_model_type_read():
    """README → Hugging Face import names every `model_type` the reader takes (the issue's "the README
    lists every supported model_type"): a family added without its line fails here.  A multimodal
    checkpoint's `*_text` type counts as listed under its outer name."""
    import re

    from archcalc.spec.hf import DRAFTERS, FAMILIES

    section = README.split("## Hugging Face import", 1)[1].split(" ## ", 1)[0]
    listed = section.split("`model_type` values read:", 1)[1]
    missing = [f for f in (*FAMILIES, *DRAFTERS)
               if not any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", listed)
                          for name in (f, f.removesuffix("_text")))]
    assert not missing, f"README does not list: {missing}"
