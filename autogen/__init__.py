"""hcq.autogen: ctypes bindings generated from real C headers (see `python -m hcq.autogen --help`).

Every module here except `support`, `nvrm_version`, the packages' __init__ files and the `generator` package is
written by the generator; its first line names the source (Debian package or NVIDIA tag), version and headers it
came from. Never edit them by hand.
"""
