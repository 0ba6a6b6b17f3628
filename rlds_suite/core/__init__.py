"""The core: field names, nested arrays, the episode model, the validator, safe unpickling and the
typed errors. Pure numpy: nothing here imports TensorFlow."""
