"""Drop-in replacements for other libraries' APIs, computed by crawldedup.

``crawldedup.compat.simhash``: ``Simhash`` and ``SimhashIndex`` of the
`simhash` package 2.1.x (1e0ng/leonsim), same values, switch by changing the
import.
"""
