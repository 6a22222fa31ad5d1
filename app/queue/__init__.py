"""Redis-backed work queue shared by every `serve` and `worker` process."""
