"""The tool server and its client (DESIGN §5's HTTP API).

`app.py` is the FastAPI app, `sessions.py` the state behind it, `toolsets.py` how toolset specs become tools,
`admission.py` the bound on concurrent calls, `config.py` its limits, `metrics.py` its Prometheus metrics,
`client.py` the async HTTP client, and `replicas.py` several server processes on consecutive ports.
"""
