"""GitHub's REST API, behind one module: ``app.github.client``."""
