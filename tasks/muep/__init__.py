"""MuEP dataset construction: metadata collection, task generation, task filtering (paper section 3.1)."""
