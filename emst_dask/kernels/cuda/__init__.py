"""The CUDA backend: kernels in ``lbvh.cuh``, ``construction.cu``,
``search.cu`` and ``core_distances.cu`` (one program, compiled by NVRTC at first
use), bound to the engine's phases by ``kernel_set.CudaKernels``."""
