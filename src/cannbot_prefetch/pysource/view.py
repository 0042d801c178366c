"""The records of a parsed file: `SourceView` (the whole file), `ClassInfo`, `Method` and `Stmt`
(statements in program order, with the names they define, use and call), `ModuleList`."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import libcst as cst



@dataclass
class Stmt:
    """One statement of a method in program order (compound statements: their header)."""

    node: cst.CSTNode            # the statement (SimpleStatementLine or compound statement)
    start: int                   # first line, 1-based
    end: int                     # last line (for compound statements: of the whole block)
    indent: str                  # leading whitespace of the first line
    defs: set[str] = field(default_factory=set)
    uses: set[str] = field(default_factory=set)
    calls: list[cst.Call] = field(default_factory=list)
    is_return: bool = False
    in_block: bool = True        # directly inside an indented block (a place lines can go)
    header: bool = False         # the header of a compound statement


@dataclass
class Method:
    name: str
    node: cst.FunctionDef
    params: list[str]
    stmts: list[Stmt]
    start: int
    end: int
    body_indent: str


@dataclass
class ClassInfo:
    name: str
    node: cst.ClassDef
    bases: list[str]
    methods: dict[str, Method]
    attrs: dict[str, list[Stmt]]     # self.<attr> assignments (any method) -> statements
    conditional_attrs: set[str]      # attrs assigned under if/else in __init__, or set to None
    start: int


@dataclass
class ImportAlias:
    name: str        # the local name
    source: str      # module it comes from
    original: str    # the imported name


@dataclass
class SourceView:
    code: str
    module: ast.Module                # the whole file (stdlib ast); libcst holds the classes
    lines: list[str]                  # keepends=True
    newline: str
    classes: dict[str, ClassInfo]
    imports_end: int                  # last line of the leading import block (0: none)
    import_indent: str
    aliases: dict[str, ImportAlias]
    layers_assignments: list[tuple[str, Stmt]]   # (class, `self.layers = ...` statement)
    prefetch_calls: list[tuple[int, str, str]]   # (line, class.method, code) of npu_prefetch calls
    module_lists: list["ModuleList"] = field(default_factory=list)
    module_attrs: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #                 class -> self.<attr> in __init__ -> constructor names it is built with
    class_bases: dict[str, list[str]] = field(default_factory=dict)   # every class in the file
    # classes defined only inside a module-level block (`if is_xlstm_available(): ... else:
    # class xLSTMLayer`): name -> (line, the block's keyword); not mapped (top-level only)
    nested_classes: dict[str, tuple[int, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class ModuleList:
    """`self.<attr> = nn.ModuleList([...])` (or Sequential / ModuleDict) in a class's __init__,
    with the last top-level __init__ statement that fills it (`.append` loops included)."""

    cls: str
    attr: str
    elements: tuple[str, ...]     # constructor names of the elements
    is_dict: bool                 # a ModuleDict: its modules are .values()
    last_line: int                # last line of the last statement that mentions self.<attr>
    indent: str

