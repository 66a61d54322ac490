"""XLA runs (XPlane traces): the ``xla`` topic (``topic``), its host events (``events``) and its steps charged to
causes (``split``)."""
