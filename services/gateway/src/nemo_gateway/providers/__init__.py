"""The only place in the project that talks to a model endpoint or reads a model key.

``base`` holds the provider-neutral request and answer types, ``http`` the transport (timeouts,
retries, deadlines, streams), ``openai`` and ``anthropic`` the two wire formats, and ``factory``
builds the configured provider from the settings. A test fails when any other module of the
tree makes model calls or references a model key setting.
"""
