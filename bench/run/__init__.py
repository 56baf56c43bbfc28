"""The middle stage: requests sent through paths become records (passes, exchange,
server counters), run end to end by :mod:`bench.run.session`."""
