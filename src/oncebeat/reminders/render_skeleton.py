"""Render a reminder template once per shape, then substitute only the values (issue 27, round 3f).

A reminder part (subject, text, HTML) costs ~100 µs of Jinja per render, yet almost all of its output is the same
for every invoice: only the invoice number, the customer's name, the amount, the dates and a few words change.
This module renders a template once per *shape* with a sentinel in place of each value and keeps the output as a
skeleton (literal text, value slots, wrapped paragraphs); later renders of that shape fill the slots and re-wrap
the paragraphs, byte for byte what Jinja would produce.

Why it is exact
---------------
:func:`analyse` reads the template's syntax tree (and its parents') and sorts every context variable it names:

* **slot**: the value is only ever written out, as ``{{ name }}`` in an output statement or as a ``%(key)s``
  value of a ``{% trans %}`` block translated at compile time. Jinja then writes ``escape(value)`` (HTML) or
  ``str(value)`` (subject, text), nothing else depends on it, so a sentinel there marks exactly where that
  string goes. Only ``str``, ``int``, ``bool`` and ``date`` values are substituted (for those
  ``escape(v) == escape(str(v))`` and ``"%s" % v == str(v)``); a value of any other type is keyed like a value
  variable.
* **truth**: the variable is also (or only) tested for truth — ``{% if name %}``, ``not name``, ``a and b``,
  ``x if name else y``. The shape records ``bool(value)``, and a falsy value (``""``, ``0``) its exact value.
* **value**: any other use — a comparison (``days_past_due > 0``), a filter or call argument (``ngettext`` by
  count), a loop, an assignment. The shape records the exact value, and the sentinel render gets the real one.

Output that Jinja captures instead of writing (``{% set %}`` blocks, macros, call blocks, filter blocks other
than ``wrap``) turns its slots into values. A ``{% filter wrap %}`` block is rendered with a marking filter; its
paragraph is rebuilt from the filled slots and wrapped with the same :func:`~oncebeat.reminders.render._wrap`,
because the line breaks depend on the values' lengths. Anything the analysis does not understand — includes,
imports, ``self``/``super``/``caller``, ``autoescape`` blocks, ``wrap`` used as an expression filter, a nested
``wrap``, an unknown node type — makes the template *slow*: it is always rendered by Jinja.

Two checks guard the rest at run time, once per shape: the sentinel render must parse (balanced markers, known
slots) and the skeleton filled with the first context must equal that context's real render; otherwise the shape
is marked slow. ``tests/unit/test_render_skeleton.py`` compares thousands of generated contexts with a fresh
renderer's real render.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from jinja2 import Environment, nodes
from markupsafe import escape

__all__ = ["LEARN_LIMIT", "MAX_SHAPES", "Plan", "Skeleton", "analyse", "probe_wrap"]

#: Shapes kept per template and language (the built-in templates use a few hundred: days past due × four flags);
#: beyond it a new shape renders through Jinja without being kept.
MAX_SHAPES = 4096
#: New shapes learnt before a template whose shapes rarely repeat (fewer hits than misses) stops learning.
LEARN_LIMIT = 64

_VALUE, _SLOT, _TRUTH, _SLOT_TRUTH = 0, 1, 2, 3
#: Types whose written form is ``str(value)`` both escaped and unescaped (``escape(7) == "7"``); ``date`` too.
_SUBSTITUTABLE = frozenset({str, int, bool, date})
#: Private-use characters: a sentinel is ``\ue000`` + chr(0xe100 + slot) + ``\ue001``; a wrapped paragraph is
#: ``\ue002`` width ``\ue003`` text ``\ue004``. No escaping or formatting touches them.
_MARKS = re.compile("\ue000(.)\ue001|\ue002([0-9]+)\ue003|\ue004", re.DOTALL)
_ANY_MARK = re.compile("[\ue000-\ue004\ue100-\ue1ff]")
_MAX_SLOTS = 256
#: A ``{% trans %}`` string is a slot position only when its only ``%`` uses are ``%%`` and ``%(key)s``.
_TRANS_FORMAT = re.compile(r"%(?:%|\((\w+)\)s)")
#: Names that reach output or context without an analysable expression.
_OPAQUE_NAMES = frozenset({"self", "super", "caller", "varargs", "kwargs"})
_CAPTURES = (nodes.Macro, nodes.CallBlock, nodes.AssignBlock)
#: Node types the analysis understands; any other makes the template slow.
_KNOWN = (nodes.Template, nodes.Output, nodes.TemplateData, nodes.Extends, nodes.Block, nodes.If, nodes.For,
          nodes.Assign, nodes.AssignBlock, nodes.FilterBlock, nodes.Macro, nodes.CallBlock, nodes.With, nodes.Name,
          nodes.Const, nodes.Mod, nodes.MarkSafeIfAutoescape, nodes.MarkSafe, nodes.Dict, nodes.Pair, nodes.List,
          nodes.Tuple, nodes.Call, nodes.Keyword, nodes.Filter, nodes.Test, nodes.Getattr, nodes.Getitem,
          nodes.Slice, nodes.Concat, nodes.Compare, nodes.Operand, nodes.CondExpr, nodes.And, nodes.Or, nodes.Not,
          nodes.Neg, nodes.Pos, nodes.Add, nodes.Sub, nodes.Mul, nodes.Div, nodes.FloorDiv, nodes.Pow, nodes.NSRef)


class _Opaque(Exception):
    """The template uses something the analysis does not model: always render it with Jinja."""


def probe_wrap(value: Any, width: int = 72) -> str:
    """The ``wrap`` filter of the sentinel render: marks the paragraph and its width instead of wrapping it."""
    if type(width) is not int:
        raise TypeError("wrap width must be an int")
    return f"\ue002{width}\ue003{value}\ue004"


@dataclass(slots=True)
class _Uses:
    slot: set[str] = field(default_factory=set)
    truth: set[str] = field(default_factory=set)
    value: set[str] = field(default_factory=set)


def _trans_pairs(node: nodes.Expr) -> list[nodes.Pair] | None:
    """The pairs of a compile-time ``{% trans %}`` (``Mod(MarkSafeIfAutoescape(Const), Dict)``) whose string
    formats each value with ``%(key)s`` only; None for anything else."""
    if not isinstance(node, nodes.Mod) or not isinstance(node.right, nodes.Dict):
        return None
    left = node.left.expr if isinstance(node.left, nodes.MarkSafeIfAutoescape) else node.left
    if not isinstance(left, nodes.Const) or not isinstance(left.value, str):
        return None
    if _TRANS_FORMAT.sub("", left.value).count("%"):
        return None
    if not all(isinstance(p.key, nodes.Const) and isinstance(p.key.value, str) for p in node.right.items):
        return None
    return list(node.right.items)


class _Walker:
    def __init__(self, uses: _Uses) -> None:
        self.uses = uses

    def node(self, node: nodes.Node, *, capture: bool, wrap: bool) -> None:
        if not isinstance(node, _KNOWN) or isinstance(node, nodes.Extends):
            raise _Opaque(type(node).__name__)
        if isinstance(node, nodes.Name):
            if node.name in _OPAQUE_NAMES:
                raise _Opaque(node.name)
            self.uses.value.add(node.name)  # a load in an expression, a store or a parameter: the exact value
        elif isinstance(node, nodes.Output):
            for item in node.nodes:
                self.output(item, capture=capture, wrap=wrap)
        elif isinstance(node, nodes.If):
            self.truth(node.test, capture=capture, wrap=wrap)
            for statement in (*node.body, *node.elif_, *node.else_):
                self.node(statement, capture=capture, wrap=wrap)
        elif isinstance(node, nodes.CondExpr):
            self.truth(node.test, capture=capture, wrap=wrap)
            self.node(node.expr1, capture=capture, wrap=wrap)
            if node.expr2 is not None:
                self.node(node.expr2, capture=capture, wrap=wrap)
        elif isinstance(node, nodes.For) and node.recursive:
            raise _Opaque("recursive loop")
        elif isinstance(node, nodes.FilterBlock):
            self.filter_block(node, capture=capture, wrap=wrap)
        elif isinstance(node, nodes.Filter) and node.name == "wrap":
            raise _Opaque("wrap as an expression filter")
        else:
            inner = capture or isinstance(node, _CAPTURES)
            for child in node.iter_child_nodes():
                self.node(child, capture=inner, wrap=wrap)

    def filter_block(self, node: nodes.FilterBlock, *, capture: bool, wrap: bool) -> None:
        flt = node.filter
        is_wrap = flt.name == "wrap" and flt.node is None and flt.dyn_args is None and flt.dyn_kwargs is None
        if flt.name == "wrap" and (not is_wrap or capture or wrap):
            raise _Opaque("wrap inside a capture or another wrap")
        for child in (*flt.args, *flt.kwargs):
            self.node(child, capture=capture, wrap=wrap)
        for child in node.body:
            self.node(child, capture=capture or not is_wrap, wrap=wrap or is_wrap)

    def output(self, child: nodes.Node, *, capture: bool, wrap: bool) -> None:
        if isinstance(child, nodes.Name) and child.ctx == "load" and child.name not in _OPAQUE_NAMES:
            (self.uses.value if capture else self.uses.slot).add(child.name)
            return
        pairs = _trans_pairs(child) if isinstance(child, nodes.Expr) else None
        if pairs is None:
            self.node(child, capture=capture, wrap=wrap)
            return
        for pair in pairs:
            value = pair.value
            if isinstance(value, nodes.Name) and value.ctx == "load" and value.name not in _OPAQUE_NAMES:
                (self.uses.value if capture else self.uses.slot).add(value.name)
            else:
                self.node(value, capture=capture, wrap=wrap)

    def truth(self, test: nodes.Node, *, capture: bool, wrap: bool) -> None:
        if isinstance(test, nodes.Name) and test.ctx == "load" and test.name not in _OPAQUE_NAMES:
            self.uses.truth.add(test.name)
        elif isinstance(test, nodes.Not):
            self.truth(test.node, capture=capture, wrap=wrap)
        elif isinstance(test, (nodes.And, nodes.Or)):  # the truth of `a and b` is that of a and of b
            self.truth(test.left, capture=capture, wrap=wrap)
            self.truth(test.right, capture=capture, wrap=wrap)
        else:
            self.node(test, capture=capture, wrap=wrap)


Skeleton = list[Any]  # str (literal), int (slot number) or (width, [str | int, ...]) (a wrapped paragraph)
_SLOW = object()
_MISSING = object()


class Plan:
    """How the contexts of one template (in one language, one part) map to shapes, and the skeleton per shape.

    ``variables``: (name, kind) per context variable the template names, in a fixed order. Thread-safe enough
    for the worker's slots: a shape is computed at most a few times and stored by one dict assignment.
    """

    def __init__(self, variables: list[tuple[str, int]], escaped: bool) -> None:
        self.variables = variables
        self.escaped = escaped
        self.slots = [name for name, kind in variables if kind in (_SLOT, _SLOT_TRUTH)]
        self._slot_of = {name: number for number, name in enumerate(self.slots)}
        self.shapes: dict[tuple[Any, ...], Any] = {}
        self.hits = 0
        self.misses = 0
        self.slow = 0

    def shape(self, context: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        """(the shape of ``context``, the names to replace by sentinels with their slot numbers); None when a
        value is unhashable."""
        key: list[Any] = []
        sentinels: dict[str, Any] = {}
        for name, kind in self.variables:
            value = context.get(name, _MISSING)
            kind_of = type(value)
            if kind == _VALUE or kind_of not in _SUBSTITUTABLE:
                key.append((kind_of, value))
            elif kind == _TRUTH:
                key.append((kind_of, value) if not value else (kind_of,))
            elif kind == _SLOT_TRUTH and not value:
                key.append((kind_of, value))
            else:
                key.append((kind_of,))
                sentinels[name] = self._slot_of[name]
        try:
            shape = tuple(key)
            hash(shape)
        except TypeError:
            return None
        return shape, sentinels

    def fill(self, skeleton: Skeleton, context: dict[str, Any], wrap: Callable[[str, int], str]) -> str:
        """The output of ``skeleton`` with the slots of ``context``'s values (escaped for HTML)."""
        if self.escaped:
            values = [str(escape(context[name])) for name in self.slots]
        else:
            values = [str(context[name]) for name in self.slots]
        out: list[str] = []
        for piece in skeleton:
            if type(piece) is str:
                out.append(piece)
            elif type(piece) is int:
                out.append(values[piece])
            else:
                width, inner = piece
                out.append(wrap("".join(p if type(p) is str else values[p] for p in inner), width))
        return "".join(out)

    def render(self, context: dict[str, Any], real: Callable[[dict[str, Any]], str], probe: Callable[[dict[str, Any]],
               str], wrap: Callable[[str, int], str]) -> str:
        """``real(context)``'s output, from the skeleton of ``context``'s shape when there is one.

        ``real`` renders with Jinja; ``probe`` renders the same template in an environment whose ``wrap`` is
        :func:`probe_wrap`. Errors of ``real`` propagate unchanged.
        """
        found = self.shape(context)
        if found is None:
            self.slow += 1
            return real(context)
        shape, sentinels = found
        skeleton = self.shapes.get(shape)
        if skeleton is not None and skeleton is not _SLOW:
            self.hits += 1
            return self.fill(skeleton, context, wrap)
        if skeleton is _SLOW or len(self.shapes) >= MAX_SHAPES or (self.misses >= LEARN_LIMIT and
                                                                   self.hits < self.misses):
            # A template keyed on values that rarely repeat (``customer_name|upper``) would pay a sentinel render
            # for nearly every reminder: after LEARN_LIMIT new shapes with fewer hits than misses, learn no more.
            self.slow += 1
            return real(context)
        out = real(context)
        if _ANY_MARK.search(out):  # a value holds a marker character: learn the shape from another context
            self.slow += 1
            return out
        self.misses += 1
        self.shapes[shape] = self._learn(context, sentinels, out, probe, wrap)
        return out

    def _learn(self, context: dict[str, Any], sentinels: dict[str, int], out: str,
               probe: Callable[[dict[str, Any]], str], wrap: Callable[[str, int], str]) -> Any:
        """The skeleton of ``context``'s shape, or ``_SLOW`` when the sentinel render does not prove it
        (``out``, Jinja's output for ``context``, holds no marker character)."""
        probed = dict(context)
        for name, slot in sentinels.items():
            probed[name] = f"\ue000{chr(0xe100 + slot)}\ue001"
        try:
            skeleton = _parse(probe(probed), len(self.slots))
        except Exception:  # noqa: BLE001 - any failure of the sentinel render only means "render with Jinja"
            return _SLOW
        if skeleton is None or self.fill(skeleton, context, wrap) != out:
            return _SLOW
        return _merge(skeleton, wrap)


def _merge(skeleton: Skeleton, wrap: Callable[[str, int], str]) -> Skeleton:
    """``skeleton`` with its paragraphs that hold no slot wrapped now (the same ``wrap``, the same text: the
    same lines) and adjacent literals joined, so a fill only wraps what depends on the values."""
    out: Skeleton = []
    for piece in skeleton:
        if type(piece) is tuple and all(type(p) is str for p in piece[1]):
            piece = wrap("".join(piece[1]), piece[0])
        if type(piece) is str and out and type(out[-1]) is str:
            out[-1] += piece
        else:
            out.append(piece)
    return out


def _parse(text: str, slots: int) -> Skeleton | None:
    """The skeleton of a sentinel render; None when its markers are unbalanced or name an unknown slot."""
    top: Skeleton = []
    current = top
    width = 0
    at = 0
    for match in _MARKS.finditer(text):
        if match.start() > at:
            current.append(text[at:match.start()])
        at = match.end()
        slot, opened = match.group(1), match.group(2)
        if slot is not None:
            number = ord(slot) - 0xe100
            if not 0 <= number < slots:
                return None
            current.append(number)
        elif opened is not None:
            if current is not top:
                return None
            current, width = [], int(opened)
        else:
            if current is top:
                return None
            top.append((width, current))
            current = top
    if current is not top:
        return None
    if at < len(text):
        top.append(text[at:])
    return top


def analyse(env: Environment, name: str, names: Iterable[str]) -> Plan | None:
    """The plan of template ``name`` (its parents included) in ``env`` for a context with ``names``; None when
    the template is slow (see the module's docstring)."""
    uses = _Uses()
    walker = _Walker(uses)
    seen: set[str] = set()
    current: str | None = name
    try:
        while current is not None:
            if current in seen:
                raise _Opaque("extends loop")
            seen.add(current)
            source, _, _ = env.loader.get_source(env, current)  # type: ignore[union-attr]
            if _ANY_MARK.search(source):
                raise _Opaque("marker character in the template")
            tree = env.parse(source, current)
            parent: str | None = None
            for node in tree.body:
                if isinstance(node, nodes.Extends):
                    if parent is not None or not isinstance(node.template, nodes.Const) or not isinstance(
                            node.template.value, str):
                        raise _Opaque("dynamic or repeated extends")
                    parent = node.template.value
                else:
                    walker.node(node, capture=False, wrap=False)
            for extends in tree.find_all(nodes.Extends):
                if extends not in tree.body:
                    raise _Opaque("extends below the top level")
            current = parent
    except _Opaque:
        return None
    variables: list[tuple[str, int]] = []
    for var in sorted(set(names)):
        if var in uses.value:
            variables.append((var, _VALUE))
        elif var in uses.slot:
            variables.append((var, _SLOT_TRUTH if var in uses.truth else _SLOT))
        elif var in uses.truth:
            variables.append((var, _TRUTH))
    if sum(kind in (_SLOT, _SLOT_TRUTH) for _, kind in variables) > _MAX_SLOTS:
        return None
    return Plan(variables, escaped=bool(env.autoescape))
