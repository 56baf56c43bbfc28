"""Comparing runs: samples, t intervals over server starts, thresholds, comparability,
verdicts."""
