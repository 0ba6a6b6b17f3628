"""The TensorFlow Datasets edge: feature declarations, the builder base, the one writer of
in-memory episodes, and finding, building, reading and validating datasets."""
