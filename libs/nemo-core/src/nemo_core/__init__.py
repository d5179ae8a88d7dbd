"""Shared runtime of the Nemo services.

Modules: ``settings`` (common server settings), ``errors`` (status + ErrorInfo error model),
``callers`` (caller identity and ACL), ``deadlines`` (required and propagated deadlines),
``interceptor`` (the server interceptor enforcing those), ``server`` (bootstrap and graceful stop),
``client`` (channels to other services), ``telemetry`` (OpenTelemetry), ``logs`` (JSON logs) and
``db`` (database helpers).
"""
