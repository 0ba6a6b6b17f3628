"""Native-format readers: pure numpy/h5py/pickle code that turns files into Trajectories."""
