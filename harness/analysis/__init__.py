"""Pure analysis over frames read from a run folder: waits, fairness, the ideal schedule,
plans, properties, faults, bloat, comparisons and statistics. No database, no files."""
