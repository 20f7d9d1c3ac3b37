"""hcq.autogen: ctypes bindings generated from real C headers (see `python -m hcq.autogen --help`).

Every module here except `support` and the `generator` package is written by the generator;
its first line names the Debian package, version and header it came from. Never edit them by hand.
"""
