"""The agent layer: ``llmdiag mcp``, a Model Context Protocol server over one logdir (docs/agents.md).

Beside ``cli`` and ``tab`` above the front door: it uses the library through ``tb_llmdiag.api`` (and the renderers'
JSON helpers) only, and nothing imports it but the CLI's ``mcp`` subcommand. ``workspace`` (run names to files,
reports cached, nothing outside the logdir), ``answers`` / ``comparison`` (each tool's answer as JSON within a size
bound, ``fit``), ``server`` (the MCP wiring; the only module that imports the ``mcp`` SDK).
"""
