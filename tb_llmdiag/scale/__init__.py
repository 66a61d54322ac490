"""Scale: where the per-rank analyses run, and the job reduce that gathers them.

- ``runner``: the ``Runner`` protocol (``map_unordered(fn, items, keys)`` yields each item's outcome as it
  completes) and the local runners: ``InlineRunner`` (this process, the default: nothing changes without
  ``--dask``) and ``ExecutorRunner`` over any ``concurrent.futures.Executor`` (a process pool).
- ``dask``: ``DaskRunner`` over a ``dask.distributed`` Client (one task per trace file, keyed by its path,
  ``pure=False``; workers read the file themselves, only the rank's report and RankSummary come back), and ``dask_client``
  (an existing scheduler ``tcp://host:8786`` or ``local[:N]``, a LocalCluster on loopback), and the tab's
  ``ClusterExecutor`` (its tasks' progress phases come back as Dask events). Imported only
  through ``extras.require`` when Dask is asked for.
The job reduce (``jobs.build``) runs on the client. The front door is ``api.report(path, dask=..., workers=...)``; docs/scale.md has the figures and the 1,000-rank sizing.
"""
