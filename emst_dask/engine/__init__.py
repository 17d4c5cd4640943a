"""Layer 2, the engine: the Borůvka loop and the BVH written once against a
kernel set (``boruvka``), the exact scaling of the cloud (``scaling``), and
the in-memory core that the API and the workers call (``core``)."""
from .boruvka import MAX_DIM, BoruvkaResult, Timers, boruvka, construct_bvh, core_distances2
from .core import spanning_tree
from .scaling import exact_scale, scale_exactly

__all__ = ["MAX_DIM", "BoruvkaResult", "Timers", "boruvka", "construct_bvh",
           "core_distances2", "spanning_tree", "exact_scale", "scale_exactly"]
