"""The one way the tool reads YAML (plans, hardware profiles, the shipped configs) and writes it.

A YAML file may come from someone else (a plan from a colleague, a hardware file a plan names),
so reading it is bounded before any value is built (issue 33):
- the tree a document stands for, aliases (`*name`) expanded, has at most MAX_NODES nodes,
  MAX_TEXT bytes of scalar text and MAX_DEPTH levels: an alias bomb turns a small file into
  billions of nodes, or one 1 MiB string into gigabytes once the plan is saved again (a deeper
  tree is no plan; deep trees also overflow the recursive constructor);
- no duplicate keys in a mapping: YAML says last-wins, so a reviewer would read one value and
  the tool use another.
Every refusal is an InputError (or the caller's subclass) naming the file, the line and the key.
Writing never emits aliases (`dump`): a saved plan reads the same to a person and to the tool.
"""

from __future__ import annotations

from typing import Any

import yaml

from .errors import InputError
from .inputfile import read_regular

MAX_NODES = 1_000_000   # a plan with hundreds of sites has ~10^4 nodes; the shipped configs ~10^3
MAX_DEPTH = 64          # the deepest shipped format (a plan's created_from) nests < 10 levels
MAX_TEXT = 64 << 20     # scalar text, aliases expanded: 4 x the largest plan file (store.py)

_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml's parser when PyYAML has it


class _Loader(_BASE):  # type: ignore[misc, valid-type]
    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                continue            # the base constructor says what is wrong with it
            if key in seen:
                raise _Refused(f"key {str(key)[:80]!r} appears twice in one mapping (lines "
                               f"{seen[key] + 1} and {key_node.start_mark.line + 1}): YAML "
                               f"keeps the last silently; remove one")
            seen[key] = key_node.start_mark.line
        try:
            return super().construct_mapping(node, deep=deep)
        except _Refused as exc:
            if exc.key is not None:
                raise
            key = next((k.value for k, v in node.value if v is exc.node), None)
            raise _Refused(str(exc), key=key, node=exc.node) from None

    def construct_yaml_int(self, node):
        try:
            return super().construct_yaml_int(node)
        except ValueError:   # more digits than int() takes from text (sys.get_int_max_str_digits)
            raise _Refused(f"a number of {len(node.value)} characters (line "
                           f"{node.start_mark.line + 1}) is more than any value here can be",
                           node=node) from None


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


class _Refused(Exception):
    def __init__(self, message: str, key: Any = None, node: Any = None):
        super().__init__(f"key {str(key)[:80]!r}: {message}" if key is not None else message)
        self.key, self.node = key, node


def _children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [n for kv in node.value for n in kv]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_tree(root) -> None:
    """Bound the tree the document stands for, aliases expanded: nodes, scalar bytes, depth
    (each shared node measured once, memoized; a node that holds itself is refused). Iterative:
    no recursion on hostile depth."""
    memo: dict[int, tuple[int, int, int]] = {}    # id -> (nodes, scalar bytes, depth)
    todo = [(root, False)]
    open_: set[int] = set()
    while todo:
        node, done = todo.pop()
        key = id(node)
        if done:
            open_.discard(key)
            kids = [memo[id(k)] for k in _children(node)]
            nodes = 1 + sum(k[0] for k in kids)
            size = (len(node.value) if isinstance(node, yaml.ScalarNode) else 0) \
                + sum(k[1] for k in kids)
            depth = 1 + max((k[2] for k in kids), default=0)
            line = node.start_mark.line + 1
            if nodes > MAX_NODES:
                raise _Refused(f"stands for more than {MAX_NODES} values (YAML aliases, up to "
                               f"line {line}?): not a file this tool reads")
            if size > MAX_TEXT:
                raise _Refused(f"stands for more than {MAX_TEXT >> 20} MiB of text (YAML "
                               f"aliases, up to line {line}?): not a file this tool reads")
            if depth > MAX_DEPTH:
                raise _Refused(f"nests more than {MAX_DEPTH} levels deep (line {line})")
            memo[key] = (nodes, size, depth)
            continue
        if key in memo:
            continue
        if key in open_:
            raise _Refused(f"holds itself through a YAML alias (line {node.start_mark.line + 1})")
        open_.add(key)
        todo.append((node, True))
        todo.extend((k, False) for k in _children(node) if id(k) not in memo)


def load(text: str | bytes, path: str, error: type[InputError] = InputError) -> Any:
    """One YAML document, bounded and checked as the module docstring says; `error(path=path)`
    when it is not valid or breaks a bound."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_tree(node)
        return loader.construct_document(node)
    except _Refused as exc:
        raise error(str(exc), path=path) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise error(f"not valid YAML{where}", path=path) from None
    except RecursionError:
        raise error(f"nests too deeply to be read (more than {MAX_DEPTH} levels)",
                    path=path) from None
    except UnicodeDecodeError as exc:
        raise error(f"is not UTF-8 text (byte {exc.start})", path=path) from None
    finally:
        loader.dispose()


def load_file(path, what: str, limit: int, error: type[InputError] = InputError) -> Any:
    """`load` of a file read by `read_regular`."""
    return load(read_regular(path, what, limit, error), str(path), error)


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def dump(data: Any, **kw: Any) -> str:
    """yaml.safe_dump without anchors/aliases (what `load` accepts)."""
    return yaml.dump(data, Dumper=_Dumper, **kw)
