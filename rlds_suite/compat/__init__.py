"""The places that make `rlds` and `envlogger` work on today's stack (TF 2.21, numpy 2)."""
