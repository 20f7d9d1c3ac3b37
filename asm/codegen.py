"""Functions made from generated source, compiled once per distinct source.

The fast paths generate one small function per opcode. Opcodes of one shape (same format, same operand places)
generate the same text and differ only in the tables and constants they read, so the text is compiled once, as a
factory taking those as arguments, and each opcode's function is a closure over its own.
"""
from __future__ import annotations
from typing import Any, Callable

_FACTORIES: dict[str, Callable] = {}


def make_function(lines: list[str], env: dict[str, Any], name: str) -> Callable:
  """The function `name` defined by `lines` (a def at column 0), reading the names in `env` as free variables."""
  names = sorted(env)
  source = "\n".join([f"def _factory({', '.join(names)}):"] + ["  " + line for line in lines] + [f"  return {name}"])
  factory = _FACTORIES.get(source)
  if factory is None:
    ns: dict[str, Any] = {}
    exec(source, ns)  # noqa: S102 - callers generate the lines from their tables: names and numbers only
    factory = _FACTORIES[source] = ns["_factory"]
  return factory(**env)
