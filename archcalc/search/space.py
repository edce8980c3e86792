"""The space a sweep searches: which spec fields vary, over which values, and the candidates.

`--vary FIELD=VALUES` names a field of the spec by its dotted path (as in the
YAML: `d_model`, `attention.n_kv_heads`, `ffn.d_ff_ratio`, `ffn.moe.top_k`)
and its values:

    1024:8192:128     start:stop:step, stop included when the steps land on it
    8..96             every integer from 8 to 96
    64:4096:*2        start:stop:*factor, a geometric series (64, 128, …, 4096)
    1,2,4,8           a list; numbers take k/M/G (10^3, 10^6, 10^9) and Ki/Mi (2^10, 2^20)
    swiglu,gelu       a list of choices, for a field with named choices (or true,false)

Numeric fields become numpy arrays, one element per candidate, and flow
through the same spec properties and op formulas as one spec does
(ops/arrays.py).  Fields with choices change which ops a model has, so each
combination of choices is its own group, evaluated as one array batch.
A candidate is valid when every value passes its field's own bounds
(checked once per value, by pydantic, with the field's own constraints) and
the spec's NUMERIC_RULES hold (the same rules ModelSpec validates); invalid
candidates are dropped and counted per rule.
"""

from __future__ import annotations

import difflib
import itertools
import re
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Literal, Union

import numpy as np
from pydantic import BaseModel, TypeAdapter, ValidationError

from archcalc.errors import InputError
from archcalc.spec.model import ModelSpec

MAX_GRID = 100_000_000  # a grid larger than this is refused: use --samples
SUFFIX = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20}
NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(Ki|Mi|k|K|M|G)?\s*$")
# Setting one of these clears the other (the spec takes d_ff or d_ff_ratio, not both).
EXCLUSIVE = {"ffn.d_ff": "ffn.d_ff_ratio", "ffn.d_ff_ratio": "ffn.d_ff"}


@dataclass(frozen=True)
class Field:
    path: str
    kind: Literal["int", "float", "choice"]
    choices: tuple = ()  # a choice field's valid values
    adapter: TypeAdapter | None = None  # the field's type with its pydantic constraints


@dataclass(frozen=True)
class Vary:
    field: Field
    values: tuple  # ints, floats or choices, in the order given

    @property
    def path(self) -> str:
        return self.field.path


# ---- fields -----------------------------------------------------------------------------------


def _leaves(model: type[BaseModel], prefix: str = "") -> dict[str, tuple[type[BaseModel], str]]:
    """Every field path of the spec schema -> (the model class holding it, its name)."""
    out = {}
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        subs = _submodels(info.annotation)
        for sub in subs:  # a union of models (the linear mixers): every member's fields, the first's on a clash
            out = {**_leaves(sub, path + "."), **out}
        if not subs:
            out[path] = (model, name)
    return out


def _submodels(annotation) -> list[type[BaseModel]]:
    return [arg for arg in (annotation, *typing.get_args(annotation))
            if isinstance(arg, type) and issubclass(arg, BaseModel)]


def _base_types(annotation) -> set:
    """The plain types an annotation admits (None dropped): {int}, {float}, {str (Literal)}, {bool}."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _base_types(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return set().union(*(_base_types(a) for a in typing.get_args(annotation) if a is not type(None)))
    if origin is Literal:
        return {Literal}
    return {annotation}


def field_named(path: str) -> Field:
    leaves = _leaves(ModelSpec)
    if path not in leaves:
        close = difflib.get_close_matches(path, leaves, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise InputError(None, "--vary", f"unknown spec field {path!r}{hint}")
    owner, name = leaves[path]
    info = owner.model_fields[name]
    kinds = _base_types(info.annotation)
    adapter = TypeAdapter(Annotated[(info.annotation, *info.metadata)]) if info.metadata else TypeAdapter(
        info.annotation)
    if kinds == {int}:
        return Field(path, "int", adapter=adapter)
    if kinds == {float}:
        return Field(path, "float", adapter=adapter)
    if kinds == {bool}:
        return Field(path, "choice", (True, False), adapter)
    if kinds == {Literal}:
        args = [a for a in typing.get_args(info.annotation) if a is not type(None)]
        lit = next(a for a in (info.annotation, *args) if typing.get_origin(a) is Literal)
        return Field(path, "choice", typing.get_args(lit), adapter)
    raise InputError(None, "--vary", f"{path} is not a number or a choice; a sweep varies those")


# ---- values -----------------------------------------------------------------------------------


def _number(text: str, field: Field, spec: str) -> int | float:
    m = NUMBER.match(text)
    if not m:
        raise InputError(None, "--vary", f"{spec}: {text.strip()!r} is not a number")
    value = float(m.group(1)) * SUFFIX[m.group(2) or ""]
    if field.kind == "int":
        if value != int(value):
            raise InputError(None, "--vary", f"{spec}: {field.path} takes integers, not {text.strip()}")
        return int(value)
    return value


def _check_value(field: Field, value, spec: str) -> None:
    try:
        field.adapter.validate_python(value, strict=True)
    except ValidationError as e:
        raise InputError(None, "--vary", f"{spec}: {field.path}={value}: {e.errors()[0]['msg']}") from None


def parse_vary(text: str) -> Vary:
    """FIELD=VALUES -> Vary, every value checked against the field's own bounds."""
    if "=" not in text:
        raise InputError(None, "--vary", f"{text!r}: write FIELD=VALUES (e.g. d_model=1024:8192:128)")
    path, _, body = (p.strip() for p in text.partition("="))
    field = field_named(path)
    if not body:
        raise InputError(None, "--vary", f"{text!r}: no values")
    if field.kind == "choice":
        values = tuple(_choice(v.strip(), field, text) for v in body.split(","))
    elif ".." in body:
        lo, _, hi = body.partition("..")
        a, b = _number(lo, field, text), _number(hi, field, text)
        if field.kind != "int":
            raise InputError(None, "--vary", f"{text}: a..b is for integer fields; use start:stop:step")
        values = tuple(range(a, b + 1))
    elif ":" in body:
        values = _series(body, field, text)
    else:
        values = tuple(_number(v, field, text) for v in body.split(","))
    if not values:
        raise InputError(None, "--vary", f"{text}: the range is empty")
    for v in dict.fromkeys(values):
        _check_value(field, v, text)
    return Vary(field, tuple(dict.fromkeys(values)))


def _choice(text: str, field: Field, spec: str):
    if field.choices == (True, False):
        lowered = text.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
    elif text in field.choices:
        return text
    raise InputError(None, "--vary", f"{spec}: {text!r} is not one of {', '.join(map(str, field.choices))}")


def _series(body: str, field: Field, spec: str) -> tuple:
    parts = body.split(":")
    if len(parts) != 3:
        raise InputError(None, "--vary", f"{spec}: a range is start:stop:step or start:stop:*factor")
    start, stop = _number(parts[0], field, spec), _number(parts[1], field, spec)
    geometric = parts[2].strip().startswith("*")
    step = _number(parts[2].strip().lstrip("*"), field, spec) if geometric else _number(parts[2], field, spec)
    if (geometric and step <= 1) or (not geometric and step <= 0):
        raise InputError(None, "--vary", f"{spec}: the step must be {'> 1' if geometric else 'positive'}")
    out, i = [], 0
    while True:  # by index, so that float steps do not accumulate rounding
        v = start * step**i if geometric else start + i * step
        if field.kind == "int":
            v = int(round(v))
        if v > stop * (1 + 1e-12):
            break
        out.append(v)
        i += 1
        if i > MAX_GRID:
            raise InputError(None, "--vary", f"{spec}: more than {MAX_GRID:,} values")
    return tuple(out)


# ---- candidates -------------------------------------------------------------------------------


@dataclass
class Group:
    """Candidates sharing their choices: one base spec, numeric columns as arrays."""

    choices: dict[str, object]
    base: ModelSpec | None  # None: the choices contradict the spec (every candidate invalid)
    columns: dict[str, np.ndarray]
    size: int  # candidates (samples may repeat a combination of choices with no numeric field)
    invalid_reason: str | None = None


def grid_size(varies: list[Vary]) -> int:
    n = 1
    for v in varies:
        n *= len(v.values)
    return n


def groups(base: ModelSpec, varies: list[Vary], samples: int | None = None, seed: int = 0) -> list[Group]:
    """The candidates: the full grid, or `samples` drawn uniformly (each field from its values)."""
    paths = [v.path for v in varies]
    if len(set(paths)) != len(paths):
        dup = next(p for p in paths if paths.count(p) > 1)
        raise InputError(None, "--vary", f"{dup} is varied twice")
    choice_vs = [v for v in varies if v.field.kind == "choice"]
    number_vs = [v for v in varies if v.field.kind != "choice"]
    if samples is None and grid_size(varies) > MAX_GRID:
        raise InputError(None, "--vary", f"the grid has {grid_size(varies):,} candidates (more than "
                                         f"{MAX_GRID:,}); use --samples N")
    rng = np.random.default_rng(seed)
    out = []
    if samples is None:
        for combo in itertools.product(*(v.values for v in choice_vs)):
            cols = _grid_columns(number_vs)
            out.append(_group(base, dict(zip((v.path for v in choice_vs), combo)), cols, grid_size(number_vs)))
        return out
    picks = {v.path: rng.integers(0, len(v.values), samples) for v in varies}
    combo_index = np.zeros(samples, dtype=np.int64)
    for v in choice_vs:
        combo_index = combo_index * len(v.values) + picks[v.path]
    for code in np.unique(combo_index):
        rows = combo_index == code
        combo, rest = {}, int(code)
        for v in reversed(choice_vs):
            rest, i = divmod(rest, len(v.values))
            combo[v.path] = v.values[i]
        cols = {v.path: _array(v)[picks[v.path][rows]] for v in number_vs}
        out.append(_group(base, dict(reversed(list(combo.items()))), cols, int(rows.sum())))
    return out


def _array(v: Vary) -> np.ndarray:
    return np.asarray(v.values, dtype=np.int64 if v.field.kind == "int" else np.float64)


def _grid_columns(number_vs: list[Vary]) -> dict[str, np.ndarray]:
    if not number_vs:
        return {}
    mesh = np.meshgrid(*(_array(v) for v in number_vs), indexing="ij")
    return {v.path: m.ravel() for v, m in zip(number_vs, mesh)}


def _group(base: ModelSpec, choices: dict, columns: dict[str, np.ndarray], size: int) -> Group:
    """A group's base spec: the spec with its choices set, validated (choices can contradict it)."""
    if not choices:
        return Group(choices, base, columns, size)
    data = base.model_dump()
    for path, value in choices.items():
        _set_path(data, path, value)
    try:
        return Group(choices, ModelSpec.model_validate(data), columns, size)
    except ValidationError as e:
        return Group(choices, None, columns, size, invalid_reason=e.errors()[0]["msg"].removeprefix("Value error, "))


def _set_path(data: dict, path: str, value) -> None:
    *parents, leaf = path.split(".")
    node = data
    for p in parents:
        if node.get(p) is None:
            raise InputError(None, "--vary", f"{path}: this spec has no {p} section")
        node = node[p]
    node[leaf] = value
    if path in EXCLUSIVE:
        node[EXCLUSIVE[path].rsplit(".", 1)[1]] = None


def with_values(spec: ModelSpec, values: dict[str, object]) -> ModelSpec:
    """`spec` with fields set by path, WITHOUT validation: the values may be arrays
    (the spec's properties and the op formulas take them)."""
    updates: dict[str, dict] = {}
    for path, value in values.items():
        updates[path] = value
        if path in EXCLUSIVE:
            updates[EXCLUSIVE[path]] = None
    return _update(spec, updates)


def _update(model: BaseModel, updates: dict[str, object]) -> BaseModel:
    direct = {p: v for p, v in updates.items() if "." not in p}
    nested: dict[str, dict] = {}
    for p, v in updates.items():
        if "." in p:
            head, rest = p.split(".", 1)
            nested.setdefault(head, {})[rest] = v
    for head, sub in nested.items():
        child = getattr(model, head)
        if child is None:
            raise InputError(None, "--vary", f"{head}.{next(iter(sub))}: this spec has no {head} section")
        direct[head] = _update(child, sub)
    return model.model_copy(update=direct)


def validity(spec: ModelSpec, n: int, tp: int = 1) -> tuple[np.ndarray, dict[str, int]]:
    """Which of n candidates (an array-valued spec) pass the spec's NUMERIC_RULES (and,
    with tp > 1, split their heads over tp ranks: the serving planner's rule), and
    how many each rule drops (a candidate is counted under the first rule it breaks)."""
    ok = np.ones(n, dtype=bool)
    dropped: dict[str, int] = {}

    def apply(passes, what: str) -> None:
        nonlocal ok
        passes = np.broadcast_to(np.asarray(passes, dtype=bool), (n,))
        newly = ok & ~passes
        if newly.any():
            dropped[what] = dropped.get(what, 0) + int(newly.sum())
            ok = ok & passes

    for node in _ruled(spec):
        for rule in node.NUMERIC_RULES:
            apply(rule.ok(node), rule.what)
    if tp > 1 and ok.any():
        from archcalc.parallel.tensor import tp_shards_heads

        apply(tp_shards_heads(spec, tp), f"heads split over TP {tp} (vLLM's rule)")
    return ok, dropped


def _ruled(node):
    """The spec and every sub-spec in it that has NUMERIC_RULES of its own (the attention, MoE, position and
    linear-mixer specs, JetMoE's attention experts, Doge's product keys, ...)."""
    if not isinstance(node, BaseModel):
        return
    if getattr(type(node), "NUMERIC_RULES", ()):
        yield node
    for name in type(node).model_fields:
        yield from _ruled(getattr(node, name, None))


def candidate_spec(group: Group, index: int) -> ModelSpec:
    """One candidate as a validated ModelSpec (for lint, fit and the tests)."""
    data = group.base.model_dump()
    for path, col in group.columns.items():
        _set_path(data, path, col[index].item())
    return ModelSpec.model_validate(data)
