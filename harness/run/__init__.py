"""A scenario run: repetitions driving a queue through its seam, the crew of processes,
faults, the long transaction, the books, plan captures, and the rendering of the run
folder."""
