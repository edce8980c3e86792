"""Files archcalc ships and reads: the bundled specs/ and hardware/ folders,
YAML with one-line errors, names resolved with "did you mean"."""

from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path

import yaml
from pydantic import ValidationError

from archcalc.errors import InputError

PACKAGE_DIR = Path(__file__).resolve().parent  # archcalc/


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write beside the target and rename into place: an interrupted or failed write
    leaves the old file (or none), never half of a new one."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def bundled_dir(kind: str) -> Path:
    """specs/ or hardware/: inside the installed wheel, else at the repo root."""
    for candidate in (PACKAGE_DIR / "_bundled" / kind, PACKAGE_DIR.parent / kind):
        if candidate.is_dir():
            return candidate
    raise InputError(None, None, f"bundled {kind}/ folder not found beside the archcalc package")


def bundled_names(kind: str = "specs") -> list[str]:
    return sorted(p.stem for p in bundled_dir(kind).glob("*.yaml"))


def resolve_name(name: str, kind: str, aliases: dict[str, str] | None = None) -> Path:
    """A bundled file by case-insensitive name or alias, or an error with a suggestion."""
    key = name.lower()
    files = {p.stem.lower(): p for p in bundled_dir(kind).glob("*.yaml")}
    if key in files:
        return files[key]
    if aliases and key in aliases:
        return files[aliases[key]]
    choices = list(files) + list(aliases or {})
    close = difflib.get_close_matches(key, choices, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else f"; bundled: {', '.join(sorted(files))}"
    what = "model" if kind == "specs" else "hardware"
    raise InputError(None, None, f"unknown {what} {name!r}{hint}")


def read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise InputError(str(path), None, "file not found") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise InputError(str(path), None, f"YAML syntax error: {where}{getattr(e, 'problem', None) or e}") from None
    if not isinstance(data, dict):
        raise InputError(str(path), None, "expected a mapping of spec fields at the top level")
    return data


def validation_error(source: str, err: ValidationError) -> InputError:
    """The first pydantic error as one line: the dotted field and what is valid."""
    first = err.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or None
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    elif first["type"] == "missing":
        msg = "required field is missing"
    more = err.error_count() - 1
    return InputError(source, field, msg + (f" (and {more} more error{'s' * (more > 1)})" if more else ""))
