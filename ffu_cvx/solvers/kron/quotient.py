"""Attributes read only through class sums, solved on their classes.

Solver layer (``ffu_cvx.solvers.kron``): imports the standard library, numpy, ``workloads`` (``domain``, ``products``) and the
package's ``terms``.

**The quotient.** When no block row on attribute ``i`` tells two values of one
exchangeable class apart (every row is constant on every class: its residual norms are
zero), the workload reads the attribute only through the class sums
``x_C = sum_{v in C} x_v``. The *quotient* replaces the attribute by one value per class
and each block ``A`` by ``A_q`` (its columns at one member per class), so ``A x = A_q x_q``.
The two problems have the same optimum: a record in any value of class ``C`` moves
``x_C`` by one, so a mechanism on the quotient, read through ``x -> x_q``, has the same
profile on every value of ``C`` and the same variances (:func:`lift`); conversely the
optimum commutes with the class permutations and, no residual being read, lives on the
class averages (:mod:`ffu_cvx.solvers.kron.reduce`), which the quotient spans. On the
quotient the exchangeable classes are found again and may be far fewer: the 51 states
of unequal sizes, read through state totals, are 51 classes of counties but one class of
states.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...workloads.domain import Domain
from ...workloads.products import Block, ProductGroup, ProductProblem, ProductWorkload
from .terms import Factor, Term

__all__ = ["class_sum_attributes", "quotient", "lift"]


def class_sum_attributes(grids, classes) -> tuple:
    """The attributes whose classes merge values (fewer classes than values) and that every
    group reads through class sums only (no residual norm on any reduced row)."""
    return tuple(i for i, c in enumerate(classes)
                 if c.r < c.n and all(not np.any(g.orbits[i].res) for g in grids))


def _block(b: Block, reps: np.ndarray) -> Block:
    return Block("total" if b.is_total else "matrix", np.ascontiguousarray(b.matrix[:, reps]), b.labels, b.attribute)


def quotient(problem: ProductProblem, classes, attrs) -> ProductProblem:
    """The :class:`ProductProblem` with each attribute of ``attrs`` replaced by its classes
    (value ``k`` the class ``k`` of ``classes[i]``), every block taken at one member per class."""
    reps = {i: np.array([int(classes[i].members(k)[0]) for k in range(classes[i].r)]) for i in attrs}
    dom = problem.domain
    spec = {a.name: (classes[i].r if i in reps else a.size if a.sized else list(a.values))
            for i, a in enumerate(dom.attributes)}
    qdom = Domain(spec, ordered=[a.name for i, a in enumerate(dom.attributes) if a.ordered and i not in reps])
    groups = [ProductGroup(tuple(_block(b, reps[i]) if i in reps else b for i, b in enumerate(g.blocks)),
                           g.target, g.name, g.accuracy) for g in problem.groups]
    return ProductProblem(ProductWorkload(qdom, groups, name=f"{problem.name} (on the classes of "
                                                            f"{', '.join(dom.names[i] for i in attrs)})"))


def lift(terms, classes, attrs) -> tuple | None:
    """The terms of a mechanism on the :func:`quotient`, over the original values: a factor on a
    quotient attribute reads value ``v`` through its class (basis column and profile of the
    class); the reconstructions are unchanged (``A = A_q E``). None when a factor on a quotient
    attribute is joint with others or implicit (not lifted: the caller solves otherwise)."""
    out = []
    for t in terms:
        factors = []
        for f in t.factors:
            hit = [i for i in f.attrs if i in attrs]
            if not hit:
                factors.append(f)
                continue
            if not isinstance(f, Factor) or len(f.attrs) != 1 or f.classes is not None:
                return None
            of = classes[hit[0]].of
            B, known = f.B[:, of], None if f.known_profile is None else f.known_profile[of]
            for a in (B, known):
                if a is not None:
                    a.setflags(write=False)
            factors.append(dataclasses.replace(f, B=B, known_profile=known))   # the same sigma and Cholesky factor
        out.append(Term(tuple(factors), t.recon))
    return tuple(out)
