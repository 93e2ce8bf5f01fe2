"""One module per CLI verb: each parses nothing and orchestrates one thing."""
