"""What is measured: the queue seam a repetition drives, and its implementations."""
