"""The emulation lab: the machines, links and file systems the benchmarks' scenarios run on.

    service.py       Service: the start / roll back / stop / wait lifecycle of every emulated service
    system_tools.py  finding, running and installing system tools; processes, mounts, namespaces
    machine.py       the load recorder (LoadRecorder), facts about the machine, the results epilogue (publish)
    netfs.py         netfs, the project's own network file system (netfs/netfs.cc): a server and a mount
    pfs.py           EmulatedPFS: a folder served over a shaped link (netfs or sshfs; delay_proxy.py)
    cluster/         EmulatedCluster: nodes as network namespaces, mpirun or Slurm across them

The scenarios (benchmarks/*.py, benchmarks/cluster/) stand on it; nothing here imports a scenario.
See docs/cluster.md and benchmarks/README.md.
"""
