"""Jobs: the ranks of one run together.

Pipeline, one module per stage (dependencies point down the list):
- ``collectives``: which device events are collectives (a declared name table), their kind, bytes,
  process group and sequence number when the trace carries them.
- ``comm``: per rank, communication separated from compute: time by kind, bus bandwidth, exposed
  communication (collective time no compute kernel overlaps) and the overlap share, per step.
- ``summary``: ``RankSummary``, the compact per-rank record the job level reads (JSON-safe, ~KB per rank).
- ``analysis``: a ``Job`` from RankSummaries: ranks stated (duplicates, missing), collectives matched across
  ranks, each rank's collective time split into waiting and transfer, the straggler and its cause.
- ``attribution``: why the straggler is late (its steps against the other ranks') and the what-if.
- ``report``: the job section: the job's metrics (``job_metrics``), handed to the findings engine with the job
  rules (``findings/job.py``: ``straggler``, ``exposed_communication``), notes, what the job view draws.
  Definitions: docs/jobs.md.
"""
