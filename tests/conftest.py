"""Test-wide settings: the emulated GPU runs each workgroup's waves interleaved (a fixed seed, so runs repeat), so
that a missing barrier or an unsynchronised LDS access gives a wrong result in some test. HCQ_EMU_INTERLEAVE=off
in the environment runs them in lockstep."""
import os

os.environ.setdefault("HCQ_EMU_INTERLEAVE", "1")
