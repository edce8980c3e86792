"""archcalc: exact sizes, FLOPs and KV-cache bytes of Transformer language models.

The data flow (see README): a ModelSpec and a Workload go into
layers.model_ops(), which returns the one list of Ops; totals sums it.
"""

from .catalog import load_model
from .conventions import CONVENTIONS
from .layers import model_ops
from .spec import ModelSpec
from .totals import size
from .workload import Workload

__all__ = ["CONVENTIONS", "ModelSpec", "Workload", "load_model", "model_ops", "size"]
