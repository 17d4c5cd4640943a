"""The CUDA backend: kernels in ``boruvka.cu`` (compiled by NVRTC at first
use), bound to the engine's phases by ``kernel_set.CudaKernels``."""
