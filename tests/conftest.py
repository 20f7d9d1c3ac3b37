"""Test-wide settings: the emulated GPU runs each workgroup's waves interleaved (a fixed seed, so runs repeat), so
that a missing barrier or an unsynchronised LDS access gives a wrong result in some test. HCQ_EMU_INTERLEAVE=off
in the environment runs them in lockstep. HCQ_TIMEOUT (a device's default wait, 30 s) is 120 s here: the emulated
GPUs run heavy kernels in Python next to another xdist worker, and a test that means a timeout sets its own."""
import os

os.environ.setdefault("HCQ_EMU_INTERLEAVE", "1")
os.environ.setdefault("HCQ_TIMEOUT", "120")
