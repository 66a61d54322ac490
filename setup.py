from setuptools import Extension, setup

# The reader's one-pass scanner in C (tb_llmdiag/ingest/kineto/_scan.c): ~3x faster reading of big traces.
# Optional: without a C compiler the install still succeeds and the reader uses its Python path.
SCAN = Extension(
    "tb_llmdiag.ingest.kineto._scan",
    ["tb_llmdiag/ingest/kineto/_scan.c", "tb_llmdiag/ingest/kineto/_rows.c", "tb_llmdiag/ingest/kineto/_readahead.c"],
    depends=["tb_llmdiag/ingest/kineto/_scan.h"],
    optional=True,
)

setup(
    name="tb-llmdiag",
    version="0.1.0",
    description="LLM Diag: why your LLM fine-tuning step is slow and what to change, from profiler traces (CLI + TensorBoard tab)",
    python_requires=">=3.10",
    packages=["tb_llmdiag", "tb_llmdiag.cli", "tb_llmdiag.ingest", "tb_llmdiag.ingest.kineto", "tb_llmdiag.ingest.xplane", "tb_llmdiag.ingest.discover",
              "tb_llmdiag.metrics", "tb_llmdiag.metrics.anatomy", "tb_llmdiag.metrics.attribution", "tb_llmdiag.metrics.capture",
              "tb_llmdiag.metrics.comm", "tb_llmdiag.metrics.gpu", "tb_llmdiag.metrics.host", "tb_llmdiag.metrics.steps",
              "tb_llmdiag.metrics.throughput", "tb_llmdiag.metrics.training", "tb_llmdiag.metrics.xla", "tb_llmdiag.findings",
              "tb_llmdiag.render", "tb_llmdiag.tab", "tb_llmdiag.jobs", "tb_llmdiag.compare", "tb_llmdiag.scale",
              "tb_llmdiag.traceview", "tb_llmdiag.agent", "tb_llmdiag.frontend"],
    package_dir={"tb_llmdiag.frontend": "frontend"},
    ext_modules=[SCAN],
    package_data={"tb_llmdiag.frontend": ["*.js", "*.css", "*.html", "views/*.js", "traceview/*.js", "vendor/**/*"]},
    install_requires=[
        "numpy>=1.23",
        "msgspec>=0.18",
        "protobuf>=3.20",
        "tensorboard>=2.12",
        "werkzeug>=2.0",
        # fast gzip (threaded decompression); the reader falls back to zlib without it
        "isal>=1.0; platform_machine == 'x86_64' or platform_machine == 'AMD64' or platform_machine == 'aarch64' or platform_machine == 'arm64'",
    ],
    extras_require={
        # `llmdiag report --dask ADDRESS` and LLMDIAG_DASK for the tab (docs/scale.md)
        "dask": ["dask[distributed]>=2023.1", "fsspec>=2023.1"],
        # logdirs on object storage (s3://, gs://, memory://...): fsspec plus the store's backend (s3fs, gcsfs)
        "remote": ["fsspec>=2023.1"],
        # `llmdiag mcp`: the Model Context Protocol server for coding agents (docs/agents.md); the mcp 2 SDK (MCPServer)
        "agent": ["mcp>=2.3,<3"],
        # CI runs the Dask and object-storage tests too (S3 through moto's server on loopback, read by s3fs)
        "test": ["pytest>=7", "hypothesis>=6", "playwright>=1.40", "dask[distributed]>=2023.1", "fsspec>=2023.1",
                 "moto[server]>=5", "s3fs>=2023.1",
                 # the agent's tests: the SDK's own client drives `llmdiag mcp`; the Markdown report read by markdown-it
                 "mcp>=2.3,<3", "markdown-it-py>=3",
                 "ruff==0.17.6", "mypy==2.4.1", "import-linter>=2.1"],
    },
    entry_points={
        "console_scripts": ["llmdiag = tb_llmdiag.cli:main"],
        "tensorboard_plugins": ["llm_diag = tb_llmdiag.tab:LlmDiagPlugin"],
    },
)
