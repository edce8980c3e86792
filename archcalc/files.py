"""Files archcalc ships and reads: the bundled specs/ and hardware/ folders,
YAML with one-line errors, names resolved with "did you mean"."""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path

import yaml
from pydantic import ValidationError

from archcalc.errors import InputError

PACKAGE_DIR = Path(__file__).resolve().parent  # archcalc/


def check_output(path: str | Path, *inputs: str | Path, option: str = "--output") -> Path:
    """An output path, checked before any work: its folder exists, it is not a folder, its
    name fits the file system, and it is none of the inputs (convert c.json -o c.json)."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.name in ("", ".", ".."):
        raise InputError(shown_path(str(path)), option, "names a folder; give a file name")
    try:
        if not folder.is_dir():
            raise InputError(shown_path(str(path)), option, f"folder {shown_path(str(folder))} does not exist")
        limit = _name_max(folder)
        # the temporary file beside it (write_atomic) is named ".NAME.xxxxxxxx.tmp"
        if len(os.fsencode(target.name)) + len(".xxxxxxxx.tmp") + 1 > limit:
            raise InputError(shown_path(str(path)), option, f"file name longer than this file system's {limit} bytes")
        if target.is_dir():
            raise InputError(shown_path(str(path)), option, "is a folder; give a file name")
        for given in inputs:
            if given is not None and Path(given).exists() and target.exists() and os.path.samefile(given, target):
                raise InputError(shown_path(str(path)), option, f"is the input {shown_path(str(given))}; write somewhere else")
    except (OSError, ValueError) as e:  # a path the system cannot even look up
        raise InputError(shown_path(str(path)), option, f"cannot write there: {getattr(e, 'strerror', None) or e}") from None
    return target


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def write_atomic(path: Path, data: str | bytes, *, make_folder: bool = False) -> Path:
    """Write beside the target and rename into place: an interrupted or failed write
    leaves the old file (or none), never half of a new one, and no temporary file.
    The folder must exist unless make_folder (archcalc's own calibration folder)."""
    path = Path(path)
    if make_folder:
        path.parent.mkdir(parents=True, exist_ok=True)
    check_output(path)
    folder = path.parent if str(path.parent) else Path(".")
    import tempfile  # here: only writers need it, and it costs every command's start ~8 ms (random, hashlib)

    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise InputError(shown_path(str(path)), None, f"cannot write: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; a written file gets the usual mode
        os.replace(tmp, path)
    except BaseException as e:
        os.unlink(tmp)
        if isinstance(e, OSError):
            raise InputError(shown_path(str(path)), None, f"cannot write: {e.strerror or e}") from None
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
    close = suggestions(key, list(files) + list(aliases or {}))
    if close:
        others = f" (also close: {', '.join(close[1:])})" if len(close) > 1 else ""
        hint = f"; did you mean {close[0]!r}?{others}"
    else:
        hint = f"; bundled: {', '.join(sorted(files))}"
    what = "model" if kind == "specs" else "hardware"
    more = "; or give a config.json, a spec YAML or a Hub id (owner/name)" if kind == "specs" else ""
    raise InputError(None, None, f"unknown {what} {name!r}{hint}{more}")


SIZE = re.compile(r"[-_]?(\d+(?:\.\d+)?)([bmk])(?![a-z0-9])")  # "-70b", "-0.5b", "8x7b": a parameter count


def suggestions(key: str, choices: list[str], n: int = 3) -> list[str]:
    """Close names, best first: names that extend the key (mistral-7b -> mistral-7b-v0.1), then
    the same family by the nearest size (llama-2-70b -> llama-2-7b, not llama-3.1-70b), then
    spelling (difflib)."""
    extends = sorted(c for c in choices if c.startswith(key) and c != key)
    family = _family(key)
    kin = [c for c in choices if family and _family(c) == family and c not in extends]
    size = _size(key)
    kin.sort(key=lambda c: (abs(math.log(_size(c) / size)) if size and _size(c) else math.inf, c))
    import difflib  # here: only a misspelt name needs it

    spelled = difflib.get_close_matches(key, choices, n=n, cutoff=0.6)
    return list(dict.fromkeys(extends + kin + spelled))[:n]


def _family(name: str) -> str:
    """The name before its parameter count: llama-2-70b -> llama-2, qwen3-30b-a3b -> qwen3."""
    m = SIZE.search(name)
    return name[:m.start()] if m and m.start() > 0 else ""


def _size(name: str) -> float | None:
    m = SIZE.search(name)
    return float(m.group(1)) * {"b": 1e9, "m": 1e6, "k": 1e3}[m.group(2)] if m else None


MAX_INPUT_BYTES = 16 * 2**20  # the largest spec, config.json or profile archcalc reads (real ones are < 100 KB)


def read_text(path: Path) -> str:
    """A small regular UTF-8 text file, or one InputError line: missing, a folder, a
    FIFO or device (never read: a FIFO would block, /dev/zero never ends), too large,
    not UTF-8, a NUL byte; symlink loops and over-long names are OSErrors like any other."""
    path = Path(path)
    source = str(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(source, None, "file not found") from None
    except (OSError, ValueError) as e:  # ELOOP, ENAMETOOLONG, EACCES; ValueError: an embedded NUL
        raise InputError(shown_path(source), None, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(source, None, "is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(source, None, "is not a regular file (a FIFO, socket or device)")
    if st.st_size > MAX_INPUT_BYTES:
        raise InputError(source, None, f"is {st.st_size:,} bytes; inputs are at most {MAX_INPUT_BYTES:,}")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_INPUT_BYTES + 1)
    except OSError as e:
        raise InputError(source, None, f"cannot read: {e.strerror or e}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(source, None, f"is larger than {MAX_INPUT_BYTES:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(source, None, f"is not UTF-8 text (byte {e.start:,}: {data[e.start:e.start + 1]!r})") from None
    if "\0" in text:
        raise InputError(source, None, f"contains a NUL byte (at character {text.index(chr(0)):,})")
    return text


def shown_path(source: str) -> str:
    """A path as an error line shows it: one line, at most 200 characters."""
    one = source.replace("\n", "\\n").replace("\0", "\\0")
    return one if len(one) <= 200 else one[:100] + "…" + one[-99:]


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML's C loader where it is built (a 3 MB file in well under a second), that refuses
    duplicate keys and reads YAML 1.2 floats such as 1e-4 (YAML 1.1 reads them as strings)."""

    def construct_mapping(self, node, deep=False):
        keys = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in keys:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            keys.add(key)
        return super().construct_mapping(node, deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def parse_yaml(text: str, source: str):
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        kind = "YAML error" if isinstance(e, yaml.constructor.ConstructorError) else "YAML syntax error"
        raise InputError(source, None, f"{kind}: {where}{problem}") from None
    except RecursionError:
        raise InputError(source, None, "nested too deep") from None


def read_yaml(path: Path) -> dict:
    data = parse_yaml(read_text(path), str(path))
    if not isinstance(data, dict):
        raise InputError(str(path), None, "expected a mapping of fields at the top level")
    return data


class NonFinite:
    """NaN or ±Infinity where a file wrote one (Python's json.dump writes them): no type a key
    takes, so reading it as any number, string or flag is an error naming the key."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


def read_json(path: Path, non_finite: bool = False) -> dict:
    """A JSON object; duplicate keys are errors, and so are NaN and Infinity (JSON has neither)
    unless `non_finite`: then each is a NonFinite, which only a key nobody reads may hold
    (transformers writes Mamba-2's time_step_limit as [0.0, Infinity])."""
    def pairs(items):
        out = {}
        for key, value in items:
            if key in out:
                raise InputError(str(path), key, "duplicate key")
            out[key] = value
        return out

    def constant(name):
        if non_finite:
            return NonFinite(name)
        raise InputError(str(path), None, f"{name} is not JSON")

    try:
        data = json.loads(read_text(path), object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as e:
        raise InputError(str(path), None, f"not valid JSON (line {e.lineno}: {e.msg})") from None
    except RecursionError:
        raise InputError(str(path), None, "nested too deep") from None
    if not isinstance(data, dict):
        raise InputError(str(path), None, f"expected a JSON object at the top level, not a {type(data).__name__}")
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
