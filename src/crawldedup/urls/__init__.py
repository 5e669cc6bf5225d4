"""URLs and request fingerprints, one module per job.

- ``params``: the opt-in extras on a canonical URL (tracking parameters,
  default ports);
- ``form``: w3lib's canonical form, through the compiled fast path;
- ``canonical``: :func:`canonicalize_url`, :func:`canonicalize_urls` and the
  per-site rules (``UrlRule``, ``UrlRules``);
- ``url_fingerprints``: the MD5 of the canonical URL;
- ``request_fingerprints``: Scrapy's request fingerprint, without Scrapy.

:mod:`crawldedup.fingerprint` (and :mod:`crawldedup`) export the public names.
"""
