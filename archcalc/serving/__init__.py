"""Serving a model: does it fit.  The deployment (deployment.py), serving
engines' memory rules as a registry (engines/), the per-GPU memory plan and
its solvers (planner.py)."""
