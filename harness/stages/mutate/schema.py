"""Mutant schemata: every code mutant of one C file compiled into one program, the mutant picked at run time.

Untch, Offutt and Harrold (ISSTA 1993): instead of one build per mutant, each place that some mutant changes
holds the original and every mutant of it, behind a test of a variable the run sets. Here a place (a *site*) is
the smallest piece of a function body that is a whole statement or a whole expression the statement evaluates
and that holds no other site: an expression statement (``acc += x * w;``, with its ``;``), a declaration's
initialiser, a ``for`` loop's init, condition or step, the condition of an ``if``, ``while`` or ``switch``, a
``return``'s value. Every mutant's edit (``operators.Mutant``: one span of text replaced) lies in one site; its
*alternative* is that site's text with the one edit applied. The schema's text of a site with alternatives
``A0 .. An-1`` and original ``O`` is

- a statement: ``{ if (assay_schema_site != S) { O } else switch (assay_schema_choice) { case 0: { A0 } break;
  ... } }``;
- an expression: ``(assay_schema_site != S ? (O) : assay_schema_choice == 0 ? (A0) : ... : (An-1))``.

Only one branch is evaluated, and a site's alternatives are copies of the very tokens the mutant's own file
has there, so the run with ``ASSAY_MUTANT="S i"`` in its environment computes what the file with that one
mutant applied computes; with no such variable (or another site) it computes the original. The original keeps
its place and its line breaks, the alternatives go on its last line (newlines of the copied tokens become
spaces; comments are blanked first), and the selection's variables are declared on the first function's first
line and defined, with the code that sets them, in a file of their own (``SELECT_SOURCE``): every line stays
where the manifest says (``layers[*].lines``), so the arena-region check (``harness.runners.arenacheck``)
instruments the schema exactly as it does each mutant's file, and the file's data are the mutant's own.

A mutant is left out of the schema, and built alone as before (the checked fallback), when its edit lies in
no site (pycparser found no statement or expression around it here: a construct this module does not place),
changes the number of lines (the arena check would then not apply to the mutant's own file), or would carry a
comment or a line break into an alternative. ``tests/harness/stages/mutate/test_schema.py`` compiles each
mutant both ways and compares the outputs bit for bit.

Why sites rather than the smallest expression around each edit: sites never nest (an expression statement
holds no statement, a loop's condition no loop body), so each mutant is one alternative of one site and the
original runs through one test per site; and an alternative of a whole statement or initialiser has the type
and the evaluation of the mutant's own code, with no conversion a nested conditional could add.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

from pycparser import c_ast

from harness.errors import AssayError
from harness.stages.mutate import operators

VARIABLE = "ASSAY_MUTANT"  # the environment variable that selects the mutant: "<site> <choice>"
SITE, CHOICE = "assay_schema_site", "assay_schema_choice"
STATEMENT, EXPRESSION = "statement", "expression"


@dataclass(frozen=True)
class Site:
    """A place in a C file that mutants change: characters ``[start, end)``, a statement or an expression."""

    start: int
    end: int
    kind: str
    function: int  # where the function that holds it starts (its first token's offset)


@dataclass(frozen=True)
class Schema:
    """The schema's C text of one file, the selection of each mutant it holds (its index in the list given to
    ``build`` -> the value of ``VARIABLE``), and the mutants left out with the reason."""

    file: str
    text: str
    selection: dict[int, str]
    left_out: dict[int, str]


class _Unplaced(Exception):
    """An expression whose tokens this module cannot delimit: its site is not made."""


def build(path: Path, mutants: list[operators.Mutant]) -> Schema:
    """The schema of the C file ``path`` holding every mutant of ``mutants`` that a site holds (the others are in
    ``left_out``, built alone)."""
    path = Path(path)
    text = path.read_text()
    source, tree = operators.load(path)
    plain = operators.blank(text)
    found = _Sites(source)
    for definition in tree.ext:
        if isinstance(definition, c_ast.FuncDef):
            found.function(definition)
    sites: list[Site] = []
    for site in sorted(found.sites, key=lambda s: s.start):  # none overlap; one that did would be left out
        if not sites or site.start >= sites[-1].end:
            sites.append(site)
    starts = [site.start for site in sites]
    members: dict[int, list[str]] = {}  # site number -> its alternatives
    selection, left_out = {}, {}
    for index, mutant in enumerate(mutants):
        if mutant.file != path.name:
            raise AssayError(f"mutant of {mutant.file} given for the schema of {path.name}")
        number = _site_of(sites, starts, mutant)
        if number is None:
            left_out[index] = "no statement or expression of this module's kinds holds the edit"
            continue
        if mutant.original.count("\n") != mutant.replacement.count("\n"):
            left_out[index] = "the edit changes the number of lines"
            continue
        site = sites[number]
        alternative = plain[site.start:mutant.start] + mutant.replacement + plain[mutant.end:site.end]
        if "//" in mutant.replacement or "/*" in mutant.replacement:
            left_out[index] = "the edit carries a comment"
            continue
        choices = members.setdefault(number, [])
        selection[index] = f"{number + 1} {len(choices)}"
        choices.append(re.sub(r"\s*\n\s*", " ", alternative))
    return Schema(path.name, _assemble(text, sites, members), selection, left_out)


def _site_of(sites: list[Site], starts: list[int], mutant: operators.Mutant) -> int | None:
    """The number of the site that holds the whole edit of ``mutant``, or None."""
    number = bisect.bisect_right(starts, mutant.start) - 1
    if number >= 0 and mutant.end <= sites[number].end:
        return number
    return None


def _assemble(text: str, sites: list[Site], members: dict[int, list[str]]) -> str:
    """``text`` with each site that has mutants replaced by its schema, the selection's variables declared before
    the first function that uses them."""
    if not members:
        return text
    first_function = min(sites[number].function for number in members)
    pieces, at = [], 0
    for number in sorted(members):
        site = sites[number]
        original, choices = text[site.start:site.end], members[number]
        pieces.append(text[at:site.start])
        if site.kind == STATEMENT:
            cases = " ".join(f"case {i}: {{ {a} }} break;" for i, a in enumerate(choices))
            pieces.append(f"{{ if ({SITE} != {number + 1}) {{ {original} }} else switch ({CHOICE}) {{ {cases} "
                          f"default: break; }} }}")
        else:
            tests = "".join(f"{CHOICE} == {i} ? ({a}) : " for i, a in enumerate(choices[:-1]))
            pieces.append(f"({SITE} != {number + 1} ? ({original}) : {tests}({choices[-1]}))")
        at = site.end
    pieces.append(text[at:])
    body = "".join(pieces)  # unchanged before ``first_function``: every site with mutants is after it
    return body[:first_function] + f"extern int {SITE}, {CHOICE}; " + body[first_function:]


SELECT_FILE = "assay_schema_select.c"
SELECT_SOURCE = f"""/* Written by Assay (harness/stages/mutate/schema.py): what a schema build computes, read from its
   environment: the mutant, {VARIABLE}="<site> <choice>" (none, site 0: the original code); the layer a run starts
   at and the one it stops after, ASSAY_RESUME and ASSAY_STOP, and the floats of the state file it reads per input
   before the layer, ASSAY_STATE_FLOATS (harness/stages/mutate/split.py). Linked after every other object, so that
   its variables move no data of the code under test: an access out of bounds reads and writes the same
   neighbours as in the mutant's own build. */
#include <stdio.h>
#include <stdlib.h>

int {SITE}, {CHOICE}, assay_schema_resume, assay_schema_stop = -1;
static long assay_schema_floats;
static float *assay_schema_buffer;
static FILE *assay_schema_states;

static long assay_schema_number(const char *name, long otherwise)
{{
    const char *text = getenv(name);
    return text != NULL ? strtol(text, NULL, 10) : otherwise;
}}

__attribute__((constructor)) static void assay_schema_select(void)
{{
    const char *selected = getenv("{VARIABLE}");
    char *rest = NULL;
    if (selected != NULL) {{
        {SITE} = (int)strtol(selected, &rest, 10);
        {CHOICE} = (int)strtol(rest, NULL, 10);
    }}
    assay_schema_resume = (int)assay_schema_number("ASSAY_RESUME", 0);
    assay_schema_stop = (int)assay_schema_number("ASSAY_STOP", -1);
    assay_schema_floats = assay_schema_number("ASSAY_STATE_FLOATS", 0);
    if (assay_schema_floats > 0) {{
        assay_schema_buffer = malloc((size_t)assay_schema_floats * sizeof(float));
        assay_schema_states = fopen("assay_state.f32", "rb");
        if (assay_schema_buffer == NULL || assay_schema_states == NULL) {{
            fprintf(stderr, "assay: no state for a run resumed at a layer\\n");
            exit(78);
        }}
    }}
}}

const float *assay_schema_state(void)
{{
    if (fread(assay_schema_buffer, sizeof(float), (size_t)assay_schema_floats, assay_schema_states) !=
        (size_t)assay_schema_floats) {{
        fprintf(stderr, "assay: the state file ended\\n");
        exit(78);
    }}
    return assay_schema_buffer;
}}
"""


def first_token(source: operators._Source, definition: c_ast.FuncDef) -> int:
    """The index of a function definition's first token (its return type, storage class...)."""
    index = source.token(definition.decl)
    while index > 0 and source.tokens[index - 1].value not in (";", "}"):
        index -= 1
    return index


class _Sites:
    """The sites of function bodies, found on pycparser's tree and delimited with its tokens."""

    def __init__(self, source: operators._Source):
        self.source = source
        self.sites: list[Site] = []
        self.start = 0

    def function(self, definition: c_ast.FuncDef) -> None:
        self.start = self._function_start(definition)
        self.statement(definition.body)

    def _function_start(self, definition: c_ast.FuncDef) -> int:
        return self.source.offsets[first_token(self.source, definition)]

    def statement(self, node: c_ast.Node | None) -> None:
        if node is None:
            return
        if isinstance(node, c_ast.Compound):
            for item in node.block_items or []:
                self.statement(item)
        elif isinstance(node, c_ast.Decl):
            if node.init is not None and not isinstance(node.init, c_ast.InitList):
                self.expression(node.init)
        elif isinstance(node, c_ast.DeclList):
            for decl in node.decls:
                self.statement(decl)
        elif isinstance(node, c_ast.For):
            if isinstance(node.init, c_ast.DeclList):
                self.statement(node.init)
            else:
                self.expression(node.init)
            self.expression(node.cond)
            self.expression(node.next)
            self.statement(node.stmt)
        elif isinstance(node, (c_ast.While, c_ast.DoWhile, c_ast.Switch)):
            self.expression(node.cond)
            self.statement(node.stmt)
        elif isinstance(node, c_ast.If):
            self.expression(node.cond)
            self.statement(node.iftrue)
            self.statement(node.iffalse)
        elif isinstance(node, (c_ast.Case, c_ast.Default)):
            for item in node.stmts or []:
                self.statement(item)
        elif isinstance(node, c_ast.Label):
            self.statement(node.stmt)
        elif isinstance(node, c_ast.Return):
            self.expression(node.expr)
        elif isinstance(node, (c_ast.Assignment, c_ast.FuncCall, c_ast.UnaryOp, c_ast.BinaryOp, c_ast.TernaryOp,
                               c_ast.ExprList, c_ast.Cast)):
            self._expression_statement(node)

    def expression(self, node: c_ast.Node | None) -> None:
        if node is None:
            return
        try:
            first, last = self._extent(node)
        except _Unplaced:
            return
        s = self.source
        self.sites.append(Site(s.offsets[first], s.end(last), EXPRESSION, self.start))

    def _expression_statement(self, node: c_ast.Node) -> None:
        s = self.source
        try:
            first, last = self._with_parentheses(node)
        except _Unplaced:
            return
        if last + 1 < len(s.tokens) and s.tokens[last + 1].value == ";":
            self.sites.append(Site(s.offsets[first], s.end(last + 1), STATEMENT, self.start))

    def _extent(self, node: c_ast.Node) -> tuple[int, int]:
        """The first and last token of expression ``node``, the parentheses around it excluded."""
        s = self.source
        if isinstance(node, (c_ast.ID, c_ast.Constant)):
            index = s.token(node)
            return index, index
        if isinstance(node, (c_ast.ArrayRef, c_ast.FuncCall)):
            first, last = self._with_parentheses(node.name)
            opening = last + 1
            if s.tokens[opening].value not in "([":
                raise _Unplaced(node)
            return first, s.match[opening]
        if isinstance(node, c_ast.BinaryOp):
            return self._with_parentheses(node.left)[0], self._with_parentheses(node.right)[1]
        if isinstance(node, c_ast.Assignment):
            return self._with_parentheses(node.lvalue)[0], self._with_parentheses(node.rvalue)[1]
        if isinstance(node, c_ast.TernaryOp):
            return self._with_parentheses(node.cond)[0], self._with_parentheses(node.iffalse)[1]
        if isinstance(node, c_ast.ExprList):
            return self._with_parentheses(node.exprs[0])[0], self._with_parentheses(node.exprs[-1])[1]
        if isinstance(node, c_ast.Cast):
            return s.token(node), self._with_parentheses(node.expr)[1]
        if isinstance(node, c_ast.UnaryOp) and isinstance(node.expr, c_ast.Node) and \
                not isinstance(node.expr, c_ast.Typename):
            first, last = self._with_parentheses(node.expr)
            if node.op in ("p++", "p--"):
                if s.tokens[last + 1].value != node.op[1:]:
                    raise _Unplaced(node)
                return first, last + 1
            if first > 0 and s.tokens[first - 1].value == node.op:
                return first - 1, last
        raise _Unplaced(node)

    def _with_parentheses(self, node: c_ast.Node) -> tuple[int, int]:
        """``_extent`` with the parentheses that enclose exactly ``node``."""
        s = self.source
        first, last = self._extent(node)
        while first > 0 and last + 1 < len(s.tokens) and s.tokens[first - 1].value == "(" and \
                s.match.get(first - 1) == last + 1:
            first, last = first - 1, last + 1
        return first, last
