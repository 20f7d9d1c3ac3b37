"""hcq.autogen.nv.gcc: gcc's layout, constant and field facts for each hcq.autogen.nv module, measured when it was
generated (CI has no NVIDIA headers; the tests compare the modules with these tables)."""
