"""The busy-CPU note: timings taken beside other work run long, and calibrate and --measure say so."""

from __future__ import annotations

import torch

from archcalc.measure.timing import busy_note

CPU = torch.device("cpu")


def test_an_idle_cpu_gets_no_note():
    assert busy_note(CPU, load=0.0, cores=2) is None
    assert busy_note(CPU, load=0.99, cores=2) is None  # below half the cores


def test_a_busy_cpu_is_named_with_its_load():
    note = busy_note(CPU, load=1.0, cores=2)
    assert note is not None and "load average 1.0 on 2 cores" in note and "time on an idle machine" in note
    assert busy_note(CPU, load=3.0, cores=16) is None and busy_note(CPU, load=8.0, cores=16) is not None


def test_accelerators_are_not_judged_by_the_host_load():
    assert busy_note(torch.device("meta"), load=100.0, cores=1) is None
