"""MkDocs hook: drop Sphinx roles (``:class:``, ``:func:``...) left in rendered docstrings.

smartarray's docstrings are numpy-style with Sphinx cross-reference roles; mkdocstrings renders
``:class:`numpy.ndarray``` as the literal text ``:class:`` followed by the code span. This keeps
the code span and removes the role.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj|ref):(?=<code>)")


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub("", html)
