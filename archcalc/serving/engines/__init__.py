"""Serving engines' memory rules, as a registry (base.py: ENGINES).

Importing this package registers the built-in engines: plain (base.py),
vllm (vllm.py) and llamacpp (llamacpp.py).  A new engine is one more module
here with an @register class, imported below.
"""

from archcalc.serving.engines import llamacpp, vllm  # noqa: F401  (registers them)
from archcalc.serving.engines.base import (
    ENGINES,
    AttnKind,
    Chunk,
    Engine,
    LayerKV,
    engine_named,
)

__all__ = ["ENGINES", "AttnKind", "Chunk", "Engine", "LayerKV", "engine_named"]
