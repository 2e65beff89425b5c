"""The cluster scenarios: ``python -m benchmarks cluster ...`` (cli.py) on the emulated cluster of
benchmarks/lab/cluster/: the run of one job, the goals (goals.py) and the simulator's check
(validate_sim.py), with what they share in commands.py. See docs/cluster.md.
"""
