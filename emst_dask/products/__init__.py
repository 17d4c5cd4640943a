"""Layer 5, the products: what people compute from a tree (today: its
picture, ``plotting``)."""
