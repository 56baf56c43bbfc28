"""Judging cache_salt isolation: verdicts per path x modality, uuid probe, side channels."""
