"""Receiving GitHub webhooks: signature verification now; the FastAPI routes and
the (event, action) routing table build on it."""
