"""The ``attribution`` topic: what the host does while the GPU waits and which host code the GPU's work comes
from (``topic``), and its dict (``view``)."""
