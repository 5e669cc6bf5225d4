"""The state-file layer every saved structure shares.

- ``files``: the checksummed header, the file kinds and their validation,
  atomic replacement of a file, and the pickle path through the file format;
- ``mapped``: memory-mapped state files used in place (the DIRTY flag, the
  lock, the seal on close).

docs/format.md describes the bytes.
"""
