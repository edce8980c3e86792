"""Mutation score of the packages whose formulas decide every number.

    python scripts/mutation.py              # mutmut run, then the score
    python scripts/mutation.py --report     # the score of the last run only
    python scripts/mutation.py --run "archcalc.parallel*"   # one package (mutmut's name glob)
    python scripts/mutation.py --report --write   # and keep it in docs/mutation.md
    python scripts/mutation.py --recheck [--run GLOB]   # survivors again, against their packages' test folders
    python scripts/mutation.py --recheck --undecided [--tests tests]   # and the mutants mutmut has not run
    python scripts/mutation.py --save       # keep every mutant's result in docs/data/mutation-results.json
    python scripts/mutation.py --restore    # put them back in a new mutants/, its mutants written (a new checkout)

mutmut (configured in pyproject.toml, [tool.mutmut]) copies the package to
mutants/, changes one operator, constant or call at a time and runs the tests
that reach the changed function; a mutant is killed when a test fails.  This
script reads mutmut's results (mutants/**/*.meta), prints killed / total per
package and every survivor, and treats as equivalent exactly the mutants
listed in scripts/equivalent_mutants.toml, each with the reason no test can
tell it from the original.  Exit status 1 when fewer than TARGET of the
mutants are killed, when a survivor is not listed, or when a listed mutant no
longer survives or no longer exists (the list must stay true).  Needs Python ≥ 3.11 (tomllib).

mutants/ is not committed (it is a copy of the tree), so a new checkout would start the whole
pass again (hours on two cores).  --save keeps what the pass decided, per function: mutmut's hash
of the function's source and the exit code of each of its mutants.  --restore writes those back
as mutmut's .meta files; mutmut then keeps the result of every mutant whose function's hash is
unchanged and runs only the mutants of functions edited since (mutmut's own incremental rule).
"""

from __future__ import annotations

import argparse
import compileall
import importlib
from fnmatch import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "mutants"
EQUIVALENT = ROOT / "scripts" / "equivalent_mutants.toml"
SAVED = ROOT / "docs" / "data" / "mutation-results.json"
DURATIONS = MUTANTS / "test-durations.json"  # --recheck's clean run, read by tests/conftest.py
PAGE = ROOT / "docs" / "mutation.md"  # the latest report is kept there, between these two lines
BEGIN, END = "<!-- report: scripts/mutation.py --write -->", "<!-- end of report -->"
TARGET = 0.90  # the bar: at least 90 % of mutants killed, the rest listed as equivalent
PACKAGES = ("archcalc.ops", "archcalc.cost", "archcalc.serving", "archcalc.parallel", "archcalc.training")
# mutmut's exit codes (mutmut/stats.py): a failing test run kills the mutant; so does a run that
# hangs past mutmut's timeout (an infinite loop in a solver): the tests did not pass with it, the
# usual count in mutation testing ("detected").  Timeouts are printed apart.
KILLED = {1, 3}
TIMEOUT = {36, -24, 24, 152, 255}
SURVIVED = {0}


def results() -> dict[str, int | None]:
    out = {}
    for meta in sorted(MUTANTS.rglob("*.meta")):
        out.update(json.loads(meta.read_text())["exit_code_by_key"])
    return out


def _head() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def _mutant_number(name: str) -> tuple[str, int]:
    function, _, number = name.rpartition("__mutmut_")
    return function, int(number)


def save() -> int:
    """Every source file's function hashes and its mutants' exit codes, one list per function
    (code of mutant k at index k - 1), into SAVED.  Returns the number of mutants kept."""
    files, kept = {}, 0
    for meta in sorted(MUTANTS.rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        codes: dict[str, list] = defaultdict(list)
        for name, code in sorted(data["exit_code_by_key"].items(), key=lambda kv: _mutant_number(kv[0])):
            function, number = _mutant_number(name)
            if number != len(codes[function]) + 1:
                raise SystemExit(f"{meta}: mutant {name} out of sequence (mutmut numbers from 1)")
            codes[function].append(code)
            kept += 1
        files[str(meta.relative_to(MUTANTS).with_suffix(""))] = {
            "hash_by_function_name": data["hash_by_function_name"], "codes": dict(codes)}
    commit = _head()
    SAVED.write_text(json.dumps({"commit": commit, "written": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
                                 "files": files}, indent=1, sort_keys=True) + "\n")
    return kept


def restore() -> int:
    """Write SAVED back as mutmut's .meta files where mutants/ has none (never over a newer run's).
    Returns the number of mutants restored."""
    restored = 0
    for path, entry in json.loads(SAVED.read_text())["files"].items():
        meta = MUTANTS / (path + ".meta")
        if meta.exists():
            continue
        codes = {f"{function}__mutmut_{k}": code for function, listed in entry["codes"].items()
                 for k, code in enumerate(listed, start=1)}
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps({"exit_code_by_key": codes, "hash_by_function_name": entry["hash_by_function_name"],
                                    "type_check_error_by_key": {}, "durations_by_key": {},
                                    "estimated_durations_by_key": {}}, indent=4))
        restored += len(codes)
    return restored


def generate() -> None:
    """mutmut's own first step of `mutmut run`, without its stats or its runs: the tree copied into
    mutants/ and every mutant written.  Over restored .meta files mutmut keeps the result of every
    function whose hash is unchanged and leaves the edited functions' mutants undecided, so a new
    checkout can go straight to --recheck --undecided."""
    from mutmut.__main__ import copy_also_copy_files, copy_src_dir, create_mutants, set_mutant_under_test
    from mutmut.__main__ import setup_source_paths

    os.chdir(ROOT)  # mutmut's paths are relative to the project root
    set_mutant_under_test("mutant_generation")
    MUTANTS.mkdir(exist_ok=True)
    copy_src_dir()
    copy_also_copy_files()
    setup_source_paths()
    create_mutants(os.cpu_count() or 2)


# The test folders a survivor is re-run against by --recheck: its package's mirror (a survivor still
# standing there may yet fall to another folder's tests; it is then left a survivor, never a false kill).
CPU_LIMIT = 900  # CPU seconds a mutant's run may take under --recheck: the whole suite takes about 300
RECHECK_TESTS = {"archcalc.ops": ["tests/ops"], "archcalc.cost": ["tests/cost"], "archcalc.serving": ["tests/serving"],
                 "archcalc.parallel": ["tests/parallel"], "archcalc.training": ["tests/training"]}


def recheck(single: dict[str, str], listed: dict[str, str], patterns: list[str] | None, undecided: bool = False,
            tests: list[str] | None = None, workers: int = 2) -> None:
    """Re-run every survivor (and with `undecided`, every mutant mutmut has not run) against its
    package's whole test folders, or `tests`: not mutmut's map of which tests reach which function (a
    test written after the map was made is not on it).  The exit status goes into mutmut's .meta files,
    as mutmut records it.  Like mutmut, each mutant runs in a process forked from one that has imported
    pytest, torch and transformers once (the tests' fastest first: tests/conftest.py), so a killed mutant
    costs about a second; a run past CPU_LIMIT seconds is stopped and counted a timeout.  mutmut must not
    be running.  tests/ is copied into mutants/ first, and a source file edited since mutmut copied it
    is mutated again first (its edited functions' mutants become undecided)."""
    import resource
    import signal

    from mutmut.__main__ import create_mutants_for_file

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    # Everything mutmut copies beside the code (specs/, hardware/, tests/, ...), as it is now: a test
    # reading a spec added since mutmut's copy would fail on every mutant and count it killed.
    for path in config["also_copy"]:
        if (ROOT / path).is_dir():
            shutil.copytree(ROOT / path, MUTANTS / path, dirs_exist_ok=True)
        else:
            shutil.copy2(ROOT / path, MUTANTS / path)
    for source in (ROOT / "archcalc").rglob("*.py"):  # the modules mutmut copies unmutated (cli/, measure/, ...)
        copy = MUTANTS / source.relative_to(ROOT)
        if not copy.with_name(copy.name + ".meta").exists() and (not copy.exists() or
                                                                   copy.read_bytes() != source.read_bytes()):
            copy.parent.mkdir(parents=True, exist_ok=True)  # a package added since mutmut's copy
            shutil.copy2(source, copy)
    for copy in (MUTANTS / "archcalc").rglob("*.py"):  # a module removed or moved since: gone there too
        if not (ROOT / copy.relative_to(MUTANTS)).exists():
            copy.unlink()
            copy.with_name(copy.name + ".meta").unlink(missing_ok=True)
    todo: list[tuple[str, Path, dict]] = []
    for meta in sorted(MUTANTS.rglob("*.meta")):
        source = ROOT / meta.relative_to(MUTANTS).with_suffix("")
        if source.stat().st_mtime > meta.with_suffix("").stat().st_mtime:
            # Its mutants are of older code, and the tests expect the new: a mutant of an unchanged
            # function would die of an edited neighbour.  mutmut's own regeneration, run from the
            # repo root: the new code mutated, every edited function's mutants back to undecided.
            cwd = os.getcwd()
            os.chdir(ROOT)
            edited = create_mutants_for_file(source.relative_to(ROOT), meta.with_suffix("").relative_to(ROOT))
            os.chdir(cwd)
            print(f"{source.relative_to(ROOT)} regenerated; edited since: {sorted(edited.changed_functions)}")
        data = json.loads(meta.read_text())
        todo += [(n, meta, data) for n, c in data["exit_code_by_key"].items()
                 if ((c in SURVIVED and n not in listed) or (undecided and c is None))
                 and package_of(n) != "other" and (patterns is None or any(fnmatch(n, p) for p in patterns))]
    print(f"{len(todo)} mutants to run", flush=True)
    # The mutated modules are megabytes (every mutant is a copy of its function), and the children run
    # with PYTHONDONTWRITEBYTECODE, so each compiled them afresh: ~6 s a mutant.  Compiled once here,
    # every child reads the .pyc (mutmut's trampolines pick the mutant at call time, not import time).
    compileall.compile_dir(MUTANTS / "archcalc", quiet=1)
    os.environ.update(single)
    os.chdir(MUTANTS)
    sys.path.insert(0, str(MUTANTS))  # the mutated copy, ahead of the installed package
    import pytest  # noqa: F401  (imported once here, inherited by every fork)
    import torch  # noqa: F401
    import transformers  # noqa: F401

    # The third-party modules the tests import (transformers' modeling files above all: seconds each), imported
    # once here too; archcalc and the tests themselves are not, so every child imports the mutated code afresh.
    for module in sorted(set(re.findall(r"^\s*from (transformers[\w.]*) import", "\n".join(
            f.read_text() for f in (ROOT / "tests").rglob("*.py")), re.M))):
        importlib.import_module(module)

    # the test files mutmut leaves out (pyproject.toml, [tool.mutmut]: the timing tests), left out here too
    ignored = [a for a in config["pytest_add_cli_args"] if a.startswith("--ignore")]
    running: dict[int, tuple[str, Path, dict]] = {}

    class Durations:
        """The clean run's seconds per test, kept for tests/conftest.py to order each mutant's tests
        fastest first (mutmut's stats do this for mutmut's runs; a new checkout has none)."""
        seconds: dict[str, float] = {}

        def pytest_runtest_logreport(self, report) -> None:
            self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

        def pytest_sessionfinish(self) -> None:
            kept = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
            DURATIONS.write_text(json.dumps({**kept, **self.seconds}, indent=0, sort_keys=True))

    def spawn(name: str, folders: list[str]) -> int:
        pid = os.fork()
        if pid == 0:
            os.environ["MUTANT_UNDER_TEST"] = name  # "" = no mutant: every trampoline calls the original
            quiet = os.open(os.devnull, os.O_WRONLY)  # the test output of thousands of runs says nothing
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT, CPU_LIMIT + 1))
            code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "--rootdir=.", *folders, *ignored],
                               plugins=[] if name else [Durations()])
            os._exit(int(code))
        return pid

    def reap() -> None:
        pid, status = os.wait()
        name, meta, data = running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        code = -24 if code == -signal.SIGXCPU else code
        data["exit_code_by_key"][name] = code
        meta.write_text(json.dumps(data, indent=4))
        print(f"{name}: {'killed' if code in KILLED else 'timeout' if code in TIMEOUT else 'survives'}", flush=True)

    def folders_of(name: str) -> list[str]:
        return tests or RECHECK_TESTS.get(package_of(name), ["tests"])

    # mutmut's clean run, here too: the tests must pass with no mutant active, or every mutant is "killed".
    for folders in sorted({tuple(folders_of(n)) for n, _, _ in todo}):
        _, status = os.waitpid(spawn("", list(folders)), 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"the tests fail with no mutant active in {MUTANTS}: "
                             f"pytest {' '.join(folders)} there first")
    for name, meta, data in todo:
        while len(running) >= workers:
            reap()
        running[spawn(name, folders_of(name))] = (name, meta, data)
    while running:
        reap()


def package_of(mutant: str) -> str:
    return next((p for p in PACKAGES if mutant.startswith(p + ".")), "other")


def equivalent() -> dict[str, str]:
    if not EQUIVALENT.exists():
        return {}
    return {name: entry["reason"] for name, entry in tomllib.loads(EQUIVALENT.read_text()).items()}


def write_page(lines: list[str]) -> None:
    """Replace the report between the page's markers (the rest of the page is written by hand)."""
    page = PAGE.read_text()
    head, rest = page.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    commit = _head()
    stamp = f"Read {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC at commit {commit}:"
    PAGE.write_text(head + BEGIN + "\n" + stamp + "\n\n```\n" + "\n".join(lines) + "\n```\n" + END + tail)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", action="store_true", help="only read the last run's results")
    ap.add_argument("--run", metavar="GLOB", nargs="+",
                    help="mutate only mutants whose name matches one of these (mutmut's syntax: names or globs)")
    ap.add_argument("--recheck", action="store_true",
                    help="re-run the last run's survivors against their packages' whole test folders")
    ap.add_argument("--undecided", action="store_true",
                    help="with --recheck: also run the mutants mutmut has not run yet")
    ap.add_argument("--tests", nargs="+", metavar="PATH",
                    help="with --recheck: run these test paths instead of the packages' folders")
    ap.add_argument("--write", action="store_true",
                    help="also write the report into docs/mutation.md (between its markers)")
    ap.add_argument("--save", action="store_true", help=f"keep every mutant's result in {SAVED.relative_to(ROOT)}")
    ap.add_argument("--restore", action="store_true",
                    help="write the saved results into mutants/ (where it has none), for mutmut to continue from")
    args = ap.parse_args()
    if args.restore:
        print(f"restored {restore()} mutants' results from {SAVED.relative_to(ROOT)}")
        generate()
        undecided = sum(code is None for name, code in results().items() if package_of(name) != "archcalc.training")
        print(f"mutants/ generated: {undecided} mutants outside training/ undecided (functions edited since)")
        return 0
    # One thread per BLAS/OpenMP pool: mutmut forks a process per mutant, and a fork of a parent
    # holding thread pools can deadlock on a futex (a hung mutant, not a killed one).
    single = {k: "1" for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    # CI's hypothesis profile (tests/conftest.py): the same examples for every mutant and every run, so a
    # verdict does not hang on which random examples a run drew.
    single["CI"] = "true"
    if args.recheck:
        recheck(single, equivalent(), args.run, args.undecided, args.tests)
    elif not args.report:
        cmd = [sys.executable, "-m", "mutmut", "run", *(args.run or [])]
        subprocess.run(cmd, cwd=ROOT, check=False, env={**os.environ, **single})
    codes = results()
    if not codes:
        print("no mutmut results: run without --report first")
        return 1
    listed = equivalent()
    by_package: dict[str, Counter] = defaultdict(Counter)
    survivors = []
    for name, code in codes.items():
        pkg = package_of(name)
        if code is None:
            by_package[pkg]["not checked"] += 1
        elif code in KILLED or code in TIMEOUT:
            by_package[pkg]["killed"] += 1
            by_package[pkg]["timeout"] += code in TIMEOUT
        elif code in SURVIVED and name in listed:
            by_package[pkg]["equivalent"] += 1
        else:
            by_package[pkg]["survived" if code in SURVIVED else f"exit {code}"] += 1
            survivors.append((name, code))
    stale = [n for n in listed if codes.get(n) is not None and codes[n] not in SURVIVED]
    gone = [n for n in listed if n not in codes]  # renumbered or removed since it was listed
    lines = [f"{'package':<20} {'killed':>7} {'equiv':>6} {'other':>6} {'checked':>8} {'score':>7}"]
    total_killed = total_checked = total_equivalent = 0
    for pkg in (*PACKAGES, "other"):
        c = by_package.get(pkg)
        if not c:
            continue
        checked = sum(v for k, v in c.items() if k not in ("not checked", "timeout"))
        other = checked - c["killed"] - c["equivalent"]
        score = (c["killed"] + c["equivalent"]) / checked if checked else 0.0
        lines.append(f"{pkg:<20} {c['killed']:>7} {c['equivalent']:>6} {other:>6} {checked:>8} {score:>7.1%}"
                     + (f"   ({c['timeout']} of the killed by timeout)" if c["timeout"] else "")
                     + (f"   ({c['not checked']} not checked)" if c["not checked"] else ""))
        total_killed += c["killed"]
        total_equivalent += c["equivalent"]
        total_checked += checked
    score = (total_killed + total_equivalent) / total_checked if total_checked else 0.0
    raw = total_killed / total_checked if total_checked else 0.0
    lines.append(f"{'all':<20} {total_killed:>7} {total_equivalent:>6} "
                 f"{total_checked - total_killed - total_equivalent:>6} {total_checked:>8} {score:>7.1%}"
                 f"   (killed alone: {raw:.1%})")
    if survivors:
        lines += ["", f"{len(survivors)} surviving (or timed-out / suspicious) mutants; `mutmut show NAME` shows the change:"]
        lines += [f"  {name}  exit {code}" for name, code in survivors]
    if stale:
        lines += ["", "listed as equivalent but no longer surviving (remove from scripts/equivalent_mutants.toml):"]
        lines += [f"  {name}" for name in stale]
    if gone:
        lines += ["", "listed as equivalent but not a mutant of the current code (renumbered or removed):"]
        lines += [f"  {name}" for name in gone]
    print("\n".join(lines))
    if args.write:
        write_page(lines)
    if args.save:
        print(f"saved {save()} mutants' results in {SAVED.relative_to(ROOT)}")
    return 0 if raw >= TARGET and not survivors and not stale and not gone else 1


if __name__ == "__main__":
    sys.exit(main())
