"""Findings: declared rule tables evaluated on a run's metrics, ranked, with a what-if. Each name is imported from
its module:

- ``engine``: ``Rule`` (parts ``Floor``, ``Fix``, ``Flavour``, ``Locate``, ``ProfilerCost``), ``lookup``,
  ``run_platform``, ``fires``, ``verdict``, ``finding``, ``evaluate``, ``rule_of``, ``rank``: one engine for runs and
  jobs;
- ``gpu``: ``GPU_RULES`` (Kineto runs), ``INFERENCE_RULES``; ``comm``: ``COMM_RULES``; ``xla``: ``XLA_RULES`` (XPlane runs);
  ``table``: ``RULES``, all of them; ``job``: ``JOB_RULES`` (a job's metrics) and ``held_back``;
- ``diagnosis``: ``diagnose`` (evaluate, then the savings sequence: severity and rank) and ``what_if``.
"""
