"""The MCP edge over HTTP: the server with its ``/health`` (:mod:`.edge`), the browser checks
(:mod:`.origins`), the JSON-RPC shape (:mod:`.jsonrpc`) and ``/mcp`` itself (:mod:`.endpoint`)."""
