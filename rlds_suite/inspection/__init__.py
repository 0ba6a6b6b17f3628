"""Looking at datasets: episode frames as GIF/MP4/PNG, plots, and streaming statistics."""
