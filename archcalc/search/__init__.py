"""What `archcalc sweep` runs: millions of candidate specs under constraints, evaluated over numpy arrays (space, metrics, where, run)."""
