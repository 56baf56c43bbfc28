"""Comparing runs: samples, bootstrap intervals, thresholds, comparability, verdicts."""
