"""Read-only view of one model source file: classes, methods, statements in order, with lines.

A leaf shared by mapping/ (stage 4: where is the attribute called, which statement holds the
window op) and rewrite/ (stage 7a: where do the lines go), so both agree on statements without
mapping importing the rewriter. libcst parses the file once; everything the rewriter decides is
computed from this view, and the edits themselves are whole lines inserted at statement
boundaries (see rewrite/engine.py), so the bytes of every line the tool did not write stay
exactly as they were.

Modules: nodes (libcst node helpers), view (the records), statements (a class's statements in
order), positions (statement lines from the stdlib ast), parse (`parse_view`).
"""

from .nodes import call_name, code_of, dotted, names_and_calls, source_lines
from .parse import parse_view
from .statements import assigned_targets
from .view import ClassInfo, Method, SourceView, Stmt

__all__ = ["ClassInfo", "Method", "SourceView", "Stmt", "assigned_targets", "call_name", "code_of",
           "dotted", "names_and_calls", "parse_view", "source_lines"]
