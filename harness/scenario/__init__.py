"""What to run: the scenario model and its loader, seeded distributions, the workload
drawn from a scenario, and the inputs of a run computed once from it."""
