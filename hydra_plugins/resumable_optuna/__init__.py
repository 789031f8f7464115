"""Hydra plugins of this project: the resumable Optuna sweeper (sweeper.py)."""
