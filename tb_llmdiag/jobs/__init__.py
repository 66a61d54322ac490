"""Jobs: the ranks of one run together.

Per rank, which device events are collectives and communication apart from compute are metric topics
(``metrics/comm/collectives.py``, ``metrics/comm/communication.py``). Here, one module per stage (dependencies point down
the list):
- ``rank_summary``: ``RankSummary``, the compact per-rank record the job level reads (JSON-safe, ~KB per rank).
- ``matching``: collectives matched across ranks: which rows are one collective, its transfer, who arrived last.
- ``cross_rank``: a ``Job`` from RankSummaries: ranks stated (duplicates, missing), each rank's collective time
  split into waiting and transfer, the straggler and its cause.
- ``attribution``: why the straggler is late (its steps against the other ranks') and the what-if.
- ``report``: the job section: the job's metrics (``job_metrics``), handed to the findings engine with the job
  rules (``findings/job.py``: ``straggler``, ``exposed_communication``), notes, what the job view draws.
  Definitions: docs/jobs.md.
- ``build``: which files of a logdir form a job (``job_groups``) and a report's ``jobs[]`` entry.
"""
