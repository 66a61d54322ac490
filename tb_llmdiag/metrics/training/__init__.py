"""The training loop's own causes: torch.compile in the window (``compile``), the optimizer step
(``optimizer``) and activation checkpointing's recompute (``checkpointing``)."""
