"""The ``capture`` topic: what the capture holds and lost (``topic``), and the profiler's own cost in the profiled
step (``overhead``)."""
