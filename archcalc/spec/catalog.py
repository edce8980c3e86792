"""Find and load models: a YAML spec, a Hugging Face config.json (or a folder
holding one), or the name of a bundled spec.  Every failure is an InputError
naming the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from pydantic import ValidationError

from archcalc.errors import InputError
from archcalc.files import read_yaml, resolve_name, shown_path, validation_error
from archcalc.spec.model import ModelSpec

if TYPE_CHECKING:
    from archcalc.spec.hf import MappingReport


def spec_from_dict(data: dict, source: str) -> ModelSpec:
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as e:
        raise validation_error(source, e) from None


def load_model(ref: str) -> tuple[ModelSpec, MappingReport | None]:
    """MODEL as the CLI takes it.  The report is set for config.json inputs."""
    path = Path(ref)
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except (OSError, ValueError) as e:  # a name too long, an embedded NUL: not a path the system can look up
        raise InputError(shown_path(ref), None, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    if is_dir or path.suffix == ".json":
        if not exists:
            raise InputError(ref, None, "file not found")
        name = path.resolve().name if is_dir else path.resolve().parent.name if path.stem == "config" else path.stem
        return _from_config(path, str(path), name)
    if path.suffix in (".yaml", ".yml") or exists:
        return spec_from_dict(read_yaml(path), str(path)), None
    if "/" not in ref and "\\" not in ref:  # a bundled name (a Hub id is owner/name)
        return spec_from_dict(read_yaml(resolve_name(ref, "specs")), ref), None
    from archcalc.spec.hub import hub_config, looks_like_hub_id

    if looks_like_hub_id(ref):
        return _from_config(hub_config(ref), ref, ref.split("/")[1])
    raise InputError(ref, None, "file not found")


def _from_config(path: Path, source: str, name: str) -> tuple[ModelSpec, MappingReport]:
    # Imported here: only config.json inputs need it.
    from archcalc.spec.hf import read_config, spec_dict_from_config

    data, report = spec_dict_from_config(read_config(path), source)
    return spec_from_dict({"name": name, **data}, source), report


def spec_to_yaml(spec: ModelSpec, header: str = "") -> str:
    """The spec as YAML: every field that differs from its default, in field order."""
    data = spec.model_dump(exclude_defaults=True, mode="json")
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    return header + body
