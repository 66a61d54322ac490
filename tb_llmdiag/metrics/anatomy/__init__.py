"""The ``anatomy`` topic: the GPU's time by part of the model (``topic``), its declared tables (``parts``), its
evidence through the host call forest (``chain``), the figures the part rules read (``causes``) and what the
model's structure costs (``structure``)."""
