"""Serving a loaded run: the local server, its model loop (batcher), its limits and its guard."""
