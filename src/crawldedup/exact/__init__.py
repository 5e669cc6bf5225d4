"""Exact fingerprint sets: an answer of "new" or "seen" that is never wrong.

- ``fpset``: :class:`FingerprintSet`, an in-memory set of digests, saved and
  loaded in the shared file format;
- ``stores``: persistent stores with one interface (SQLite, SQL databases
  through SQLAlchemy, and Redis through :mod:`crawldedup.redis`).
"""
