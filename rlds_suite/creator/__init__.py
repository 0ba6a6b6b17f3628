"""rlds_suite creator: people play environments in the browser; every step lands in RLDS.

  rlds-suite creator --port 8080 [--data_dir DIR] [--db URL] [--token DESIGNER_TOKEN]

`server` (aiohttp: HTTP/JSON and the WebSocket play loop), `schemas` (what every request body and
message may hold), `sessions` (one play session per player, the environment in its own worker
thread), `keymaps` (keys, gamepad buttons and sticks -> actions), `spool` (the steps of episodes in
flight, on disk), `recorder` (RLDSWriter, one dataset per study environment), `storage`
(SQLAlchemy 2: SQLite or PostgreSQL), `export` (download as RLDS datasets), `catalog` (what
envs.make offers, for the study form), `static/` (the page, plain JavaScript, no build step).
"""
