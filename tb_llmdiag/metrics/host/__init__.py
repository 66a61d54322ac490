"""The host: its call forest (``tree``), named ranges (``ranges``), user annotations (``annotations``), the user's
source lines (``source_lines``), synchronisation (``sync``, ``sync_storm``), its own time per step (``floor``),
kernel launches (``launch``) and the data loader (``dataloader``)."""
