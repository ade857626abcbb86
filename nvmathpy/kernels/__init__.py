"""Generated device code: expression IR for epilogues and callbacks, CUDA C emission,
NVRTC/nvJitLink compilation and the on-disk kernel cache."""
