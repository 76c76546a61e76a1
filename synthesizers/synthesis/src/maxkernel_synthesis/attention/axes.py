"""Axis variables: a union-find over array axes, where a variable may be split into sub-variables."""

from __future__ import annotations

import math

from ..ir import Declined


class Vars:
    """Union-find over axis variables; a variable may be split into sub-variables (major to minor)."""

    def __init__(self) -> None:
        self.parent: list[int] = []
        self.extent: list[int] = []
        self.children: dict[int, list[int]] = {}

    def new(self, extent: int) -> int:
        self.parent.append(len(self.parent))
        self.extent.append(int(extent))
        return len(self.parent) - 1

    def find(self, v: int) -> int:
        while self.parent[v] != v:
            self.parent[v] = self.parent[self.parent[v]]
            v = self.parent[v]
        return v

    def unify(self, a: int, b: int) -> int:
        a, b = self.find(a), self.find(b)
        if a == b:
            return a
        if self.extent[a] != self.extent[b]:
            raise Declined(f"axes of extents {self.extent[a]} and {self.extent[b]} are lined up")
        ca, cb = self.children.get(a), self.children.get(b)
        if ca is not None and cb is not None:
            la, lb = self.leaves(a), self.leaves(b)
            if [self.extent[x] for x in la] != [self.extent[x] for x in lb]:
                pieces = self._common([self.extent[x] for x in la], [self.extent[x] for x in lb])
                la = [y for x in self._refine(la, pieces) for y in x]
                lb = [y for x in self._refine(lb, pieces) for y in x]
            self.parent[b] = a
            for x, y in zip(la, lb, strict=False):
                self.unify(x, y)
            return self.find(a)
        if cb is not None:
            a, b = b, a
        self.parent[b] = a
        return a

    def leaves(self, v: int) -> tuple[int, ...]:
        v = self.find(v)
        kids = self.children.get(v)
        if kids is None:
            return (v,)
        return tuple(leaf for k in kids for leaf in self.leaves(k))

    def _split_leaf(self, v: int, extents: list[int]) -> list[int]:
        v = self.find(v)
        kids = [self.new(e) for e in extents]
        self.children[v] = kids
        return kids

    @staticmethod
    def _common(a: list[int], b: list[int]) -> list[int]:
        """The common refinement of two factorisations of one extent (major to minor), when one exists."""
        bounds_a, bounds_b, acc = set(), set(), 1
        for e in reversed(a):
            acc *= e
            bounds_a.add(acc)
        acc = 1
        for e in reversed(b):
            acc *= e
            bounds_b.add(acc)
        bounds = sorted(bounds_a | bounds_b)
        out, prev = [], 1
        for bound in bounds:
            if bound % prev:
                raise Declined("a reshape regroups an axis in a way that is not a refinement")
            out.append(bound // prev)
            prev = bound
        return list(reversed(out))

    def _refine(self, leaves: list[int], pieces: list[int]) -> list[list[int]]:
        """Split ``leaves`` so that their extents become ``pieces`` (a refinement)."""
        out, i = [], 0
        for leaf in leaves:
            e, group, prod = self.extent[leaf], [], 1
            while prod < e:
                group.append(pieces[i])
                prod *= pieces[i]
                i += 1
            out.append(self._split_leaf(leaf, group) if len(group) > 1 else [leaf])
        return out

    def split(self, v: int, extents: list[int]) -> list[int]:
        """Sub-variables of ``v`` with these extents (major to minor)."""
        v = self.find(v)
        if v not in self.children:
            return self._split_leaf(v, extents)
        leaves = list(self.leaves(v))
        pieces = self._common([self.extent[x] for x in leaves], extents)
        fine = [y for x in self._refine(leaves, pieces) for y in x]
        out, i = [], 0
        for e in extents:
            group, prod = [], 1
            while prod < e:
                group.append(fine[i])
                prod *= self.extent[fine[i]]
                i += 1
            out.append(group[0] if len(group) == 1 else self.merge(group))
        return out

    def merge(self, vs: list[int]) -> int:
        v = self.new(math.prod(self.extent[self.find(x)] for x in vs))
        self.children[v] = [self.find(x) for x in vs]
        return v
