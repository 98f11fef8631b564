"""Experiments: one module per table or figure, run as ``python -m experiments.<name>``.

Interfaces layer: every module here may import any public name of ``ffu_cvx`` and the
shared modules below; nothing in ``ffu_cvx`` imports ``experiments``. Shared modules:
:mod:`~experiments.paths` (where outputs go), :mod:`~experiments.runner` (cells -> cache
-> results -> figures), :mod:`~experiments.formatting` (text tables),
:mod:`~experiments.plotting` (curves from results rows), and the protocols several
tables share (:mod:`~experiments.ratios`, :mod:`~experiments.random_tables`,
:mod:`~experiments.marginal_figures`). A table or figure module keeps its grid, its cell
function, the paper's numbers and its layout.
"""
