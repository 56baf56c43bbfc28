"""What a run measures and keeps, below everything that judges or reports it: the typed
request record and the files of a run (``records``), and the server's counters (``counters``)."""
