"""rlds_suite creator: people play environments in the browser; every step lands in RLDS.

  rlds-suite creator --port 8080 [--data_dir DIR] [--db URL] [--token DESIGNER_TOKEN]

`server` (aiohttp: HTTP/JSON and the WebSocket play loop), `sessions` (one play session per
connection, the environment in its own worker thread), `keymaps` (keys -> actions), `recorder`
(RLDSWriter, one dataset per study environment), `storage` (SQLAlchemy 2: SQLite or PostgreSQL),
`export` (download as RLDS datasets), `static/` (the page, plain JavaScript, no build step).
"""
