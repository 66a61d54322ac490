"""Steps and the step time: the step windows (``windows``), the per-step busy/idle breakdown from the device's
idle gaps (``gaps``), the ``steps`` topic's statistics (``stats``), the ``idle`` topic and what holds outlier steps'
extra time (``outliers``)."""
