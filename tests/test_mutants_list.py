"""The mutation list of tools/mutants.py stays applicable: each planted bug still matches the code exactly once and
its covering tests exist. No mutant runs here (that is the tool's job, outside CI)."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("hcq_tools_mutants", ROOT / "tools" / "mutants.py")
mutants = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # dataclasses look their module up
_spec.loader.exec_module(mutants)


@pytest.mark.parametrize("m", mutants.MUTATIONS, ids=lambda m: m.id)
def test_mutation_applies_and_names_real_tests(m):
  assert mutants.stale_reason(m) is None, f"{m.id} is stale: {mutants.stale_reason(m)}"
  text = (ROOT / m.file).read_text()
  original, replacement = mutants.edit(m, text)
  assert replacement != original and text.replace(original, replacement) != text
  compile(text.replace(original, replacement), m.file, "exec")  # a mutant is a bug, not a syntax error the import catches
  if isinstance(m.original, tuple): assert isinstance(m.replacement, tuple) and len(m.original) == len(m.replacement)
  assert m.area in mutants.AREAS and m.bug
  paths = mutants.covering_files(m)
  assert paths, f"{m.id} names no test file"
  for p in paths: assert (ROOT / p).is_file(), f"{m.id}: covering test {p} does not exist"
  for node in (a for a in m.tests if "::" in a):   # a node id names a test function its file defines
    file, name = node.split("::")[0], node.split("::")[-1].split("[")[0]
    assert f"def {name}(" in (ROOT / file).read_text(), f"{m.id}: {node} names no test in {file}"
  for a, b in zip(m.tests, m.tests[1:]):
    if a == "-k": assert b and not b.startswith("-"), f"{m.id}: -k without an expression"


def test_list_is_large_unique_and_spans_every_area():
  ids = [m.id for m in mutants.MUTATIONS]
  assert len(ids) == len(set(ids)) and len(ids) >= 45
  assert {m.area for m in mutants.MUTATIONS} == set(mutants.AREAS)
  assert all(sum(m.area == a for m in mutants.MUTATIONS) >= 5 for a in mutants.AREAS)


def test_list_option_reports_every_mutation(capsys):
  assert mutants.main(["--list"]) == 0
  out = capsys.readouterr().out
  assert all(m.id in out for m in mutants.MUTATIONS) and "STALE" not in out
  assert mutants.main(["--only", "no-such-mutant"]) == 2
