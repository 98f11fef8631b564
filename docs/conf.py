"""Sphinx configuration of the ffu-cvx documentation.

Build: ``sphinx-build -W -b html docs docs/_build/html``; the examples of the user guide run with
``sphinx-build -W -b doctest docs docs/_build/doctest``. Both need ``pip install -e '.[docs]'``.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small examples: one BLAS thread is the fastest

from ffu_cvx import __version__  # noqa: E402

project = "ffu-cvx"
author = "the ffu-cvx authors"
copyright = "the ffu-cvx authors, MIT licence"
version = release = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    # MathJax served from the site's own _static/mathjax, not a CDN: formulas render offline.
    "sphinx-mathjax-offline",
    "numpydoc",
]

exclude_patterns = ["_build", "generated"]  # generated/: tables included by other pages
root_doc = "index"
language = "en"

# Docstrings write the size of a component set as |D| and of a class of values as |C|: shown as written,
# not as rST substitutions.
rst_prolog = r"""
.. |D| replace:: \|D\|
.. |C| replace:: \|C\|
"""

# API reference: members in source order, numpydoc sections, no member tables (autodoc lists them).
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# Doctests: the user guide's ``.. doctest::`` blocks (the docstrings' examples run under pytest).
doctest_test_doctest_blocks = ""
doctest_global_setup = """
import numpy as np
import ffu_cvx as ffu
"""

html_theme = "pydata_sphinx_theme"
html_title = f"ffu-cvx {release}"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False
