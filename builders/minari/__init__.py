"""Minari datasets (HDF5 and Arrow storage) as RLDS."""
