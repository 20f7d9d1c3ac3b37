"""The generator behind hcq.autogen: libclang over Debian-packaged headers to ctypes modules."""
