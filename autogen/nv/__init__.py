"""hcq.autogen.nv: NVIDIA RM/UVM ABI, class, control, method and QMD bindings generated from NVIDIA's headers
(open-gpu-kernel-modules at a 580.x tag, open-gpu-doc); see hcq.autogen.generator.nv."""
