"""Campaigns: experiments that start engines and run workloads, then compare and report
(the version matrix, router policies)."""
