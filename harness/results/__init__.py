"""The run folder's formats: the typed run document (run.json), jobs.csv, write-once
files, and the contract of which files are raw and which are derived."""
