"""Mutation score of the packages whose formulas decide every number.

    python scripts/mutation.py              # mutmut run, then the score
    python scripts/mutation.py --report     # the score of the last run only
    python scripts/mutation.py --run "archcalc.parallel*"   # one package (mutmut's name glob)
    python scripts/mutation.py --report --write   # and keep it in docs/mutation.md
    python scripts/mutation.py --recheck [--run GLOB]   # survivors again, against their packages' test folders
    python scripts/mutation.py --recheck --undecided [--tests tests]   # and the mutants mutmut has not run

mutmut (configured in pyproject.toml, [tool.mutmut]) copies the package to
mutants/, changes one operator, constant or call at a time and runs the tests
that reach the changed function; a mutant is killed when a test fails.  This
script reads mutmut's results (mutants/**/*.meta), prints killed / total per
package and every survivor, and treats as equivalent exactly the mutants
listed in scripts/equivalent_mutants.toml, each with the reason no test can
tell it from the original.  Exit status 1 when fewer than TARGET of the
mutants are killed, when a survivor is not listed, or when a listed mutant no
longer survives (the list must stay true).  Needs Python ≥ 3.11 (tomllib).
"""

from __future__ import annotations

import argparse
from fnmatch import fnmatch
import json
import os
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


# The test folders a survivor is re-run against by --recheck: its package's mirror (a survivor still
# standing there may yet fall to another folder's tests; it is then left a survivor, never a false kill).
CPU_LIMIT = 900  # CPU seconds a mutant's run may take under --recheck: the whole suite takes about 300
RECHECK_TESTS = {"archcalc.ops": ["tests/ops"], "archcalc.cost": ["tests/cost"], "archcalc.serving": ["tests/serving"],
                 "archcalc.parallel": ["tests/parallel"], "archcalc.training": ["tests/training"]}


def recheck(single: dict[str, str], listed: dict[str, str], pattern: str | None, undecided: bool = False,
            tests: list[str] | None = None, workers: int = 2) -> None:
    """Re-run every survivor (and with `undecided`, every mutant mutmut has not run) against its
    package's whole test folders, or `tests`: not mutmut's map of which tests reach which function (a
    test written after the map was made is not on it).  The exit status goes into mutmut's .meta files,
    as mutmut records it.  Like mutmut, each mutant runs in a process forked from one that has imported
    pytest, torch and transformers once (the tests' fastest first: tests/conftest.py), so a killed mutant
    costs about a second; a run past CPU_LIMIT seconds is stopped and counted a timeout.  mutmut must not
    be running.  tests/ is copied into mutants/ first."""
    import resource
    import signal

    shutil.copytree(ROOT / "tests", MUTANTS / "tests", dirs_exist_ok=True)
    todo: list[tuple[str, Path, dict]] = []
    for meta in sorted(MUTANTS.rglob("*.meta")):
        source = ROOT / meta.relative_to(MUTANTS).with_suffix("")
        if source.stat().st_mtime > meta.with_suffix("").stat().st_mtime:  # its mutants are of older code
            print(f"{source.relative_to(ROOT)} changed since mutmut copied it: run mutmut on it again")
            continue
        data = json.loads(meta.read_text())
        todo += [(n, meta, data) for n, c in data["exit_code_by_key"].items()
                 if ((c in SURVIVED and n not in listed) or (undecided and c is None))
                 and package_of(n) != "other" and (pattern is None or fnmatch(n, pattern))]
    print(f"{len(todo)} mutants to run", flush=True)
    os.environ.update(single)
    os.chdir(MUTANTS)
    sys.path.insert(0, str(MUTANTS))  # the mutated copy, ahead of the installed package
    import pytest  # noqa: F401  (imported once here, inherited by every fork)
    import torch  # noqa: F401
    import transformers  # noqa: F401

    # the test files mutmut leaves out (pyproject.toml, [tool.mutmut]: the timing tests), left out here too
    mutmut_args = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]["pytest_add_cli_args"]
    ignored = [a for a in mutmut_args if a.startswith("--ignore")]
    running: dict[int, tuple[str, Path, dict]] = {}

    def reap() -> None:
        pid, status = os.wait()
        name, meta, data = running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        code = -24 if code == -signal.SIGXCPU else code
        data["exit_code_by_key"][name] = code
        meta.write_text(json.dumps(data, indent=4))
        print(f"{name}: {'killed' if code in KILLED else 'timeout' if code in TIMEOUT else 'survives'}", flush=True)

    for name, meta, data in todo:
        while len(running) >= workers:
            reap()
        folders = tests or RECHECK_TESTS.get(package_of(name), ["tests"])
        pid = os.fork()
        if pid == 0:
            os.environ["MUTANT_UNDER_TEST"] = name
            quiet = os.open(os.devnull, os.O_WRONLY)  # the test output of thousands of runs says nothing
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT, CPU_LIMIT + 1))
            code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "--rootdir=.", *folders, *ignored])
            os._exit(int(code))
        running[pid] = (name, meta, data)
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
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    stamp = f"Read {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC at commit {commit}:"
    PAGE.write_text(head + BEGIN + "\n" + stamp + "\n\n```\n" + "\n".join(lines) + "\n```\n" + END + tail)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", action="store_true", help="only read the last run's results")
    ap.add_argument("--run", metavar="GLOB", help="mutate only mutants whose name matches (mutmut's syntax)")
    ap.add_argument("--recheck", action="store_true",
                    help="re-run the last run's survivors against their packages' whole test folders")
    ap.add_argument("--undecided", action="store_true",
                    help="with --recheck: also run the mutants mutmut has not run yet")
    ap.add_argument("--tests", nargs="+", metavar="PATH",
                    help="with --recheck: run these test paths instead of the packages' folders")
    ap.add_argument("--write", action="store_true",
                    help="also write the report into docs/mutation.md (between its markers)")
    args = ap.parse_args()
    # One thread per BLAS/OpenMP pool: mutmut forks a process per mutant, and a fork of a parent
    # holding thread pools can deadlock on a futex (a hung mutant, not a killed one).
    single = {k: "1" for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    if args.recheck:
        recheck(single, equivalent(), args.run, args.undecided, args.tests)
    elif not args.report:
        cmd = [sys.executable, "-m", "mutmut", "run", *([args.run] if args.run else [])]
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
    print("\n".join(lines))
    if args.write:
        write_page(lines)
    return 0 if raw >= TARGET and not survivors and not stale else 1


if __name__ == "__main__":
    sys.exit(main())
