"""`rlds-suite browse`: a read-only web page over any prepared RLDS/TFDS dataset.

index.py streams the dataset once for the episode list and its statistics; episodes.py opens one
episode at a time (an LRU of a few) and turns it into what the page plays and plots; server.py
serves both and the static page (static/), and nothing else.
"""
