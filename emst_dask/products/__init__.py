"""Layer 6, the products: what people compute from a tree (today: its
picture, ``plotting``)."""
