"""Debian's Slurm on the emulated cluster: the job's ranks started by ``srun`` (or by ``mpirun``
inside a Slurm allocation) instead of by mpirun's own launch agent.

On an :class:`~benchmarks.lab.cluster.emulation.EmulatedCluster` started with ``launcher="slurm"``::

    network namespace hc<pid>head    host name ``head``, 10.77.X.253 on the compute bridge:
        munged                       one munge key for the cluster (a file in its work folder),
                                     its socket under /run/hdmlp-cluster-<pid>/munge
        slurmctld                    the controller (SlurmctldHost=head)
        srun / salloc / sbatch       the users' commands, as on a login node
    network namespace hc<pid>n<K>    (each node, in its private mount namespace with the PFS and
        slurmd -N node<K>            the node-local folder at the common paths, as mpirun's agent
                                     sets up): its job steps run there

slurm.conf (in the cluster's work folder, ``SLURM_CONF``) declares node<K> at 10.77.X.K with
``ranks_per_node`` CPUs (``SlurmdParameters=config_overrides``: the nodes share this machine's
cores), no cgroups (proctrack/linuxproc, task/none) and no accounting. Every daemon runs as root
inside the namespaces, so the cluster's teardown (killing every process in them) stops them all.

How ranks start (``mode``):

- ``pmix``: ``srun --mpi=pmix`` (Slurm's PMIx v4 plugin, Debian's libpmix2), the MPI library's own
  PMIx client connects to slurmstepd's PMIx server;
- ``pmi2``: ``srun --mpi=pmi2`` (Slurm's PMI-2 server in slurmstepd);
- ``mpirun``: ``salloc`` an allocation, and Open MPI's ``mpirun`` inside it, which starts its daemons
  with ``srun`` (its plm/slurm component) on the allocated nodes.

``docs/cluster.md`` ("Slurm") records which MPI works with which mode here, and why.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import time

from benchmarks.lab import system_tools

TOOLS = {"slurmctld": "slurmctld", "slurmd": "slurmd", "srun": "slurm-client", "sbatch": "slurm-client",
         "salloc": "slurm-client", "munged": "munge"}
MODES = ("pmix", "pmi2", "mpirun")
HEAD_HOST = 253  # the head's address on the compute network: 10.77.X.253


class SlurmUnavailable(RuntimeError):
    """Slurm cannot run on this machine's emulated cluster; the message says why."""


def ensure_tools(install: bool = True, log=print) -> None:
    """Debian's Slurm and munge, installed with apt-get when missing (their services are not started:
    the emulation runs its own daemons). Raises SlurmUnavailable when they cannot be had."""
    missing = sorted({pkg for tool, pkg in TOOLS.items() if system_tools.which(tool) is None})
    if not missing:
        return
    if not install:
        raise SlurmUnavailable(f"missing Debian packages: {' '.join(missing)}")
    # policy-rc.d: installing slurmctld, slurmd and munge must not start Debian's own services.
    policy = "/usr/sbin/policy-rc.d"
    made_policy = False
    if not os.path.exists(policy) and os.geteuid() == 0:
        with open(policy, "w") as f:
            f.write("#!/bin/sh\n# written by benchmarks/lab/cluster/slurm.py while it installs Slurm\nexit 101\n")
        os.chmod(policy, 0o755)
        made_policy = True
    try:
        system_tools.install_packages(TOOLS, SlurmUnavailable, "cluster", install=True, log=log)
    finally:
        if made_policy:
            os.remove(policy)


class Slurm:
    """Slurm's daemons on an emulated cluster, and the commands that start ranks through them."""

    def __init__(self, cluster, mode: str = "pmix") -> None:
        if mode not in MODES:
            raise ValueError(f"Slurm mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.cluster = cluster
        self.mode = mode
        self.dir = os.path.join(cluster.work, "slurm")
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.munge_dir = os.path.join(cluster.run_dir, "munge")
        self.socket = os.path.join(self.munge_dir, "munge.socket.2")
        self.procs: list[subprocess.Popen] = []

    # -- names ------------------------------------------------------------------
    @property
    def netns(self) -> str:
        return f"{self.cluster.tag}head"

    @property
    def address(self) -> str:
        return f"10.77.{self.cluster.subnet}.{HEAD_HOST}"

    def in_head(self, command: list[str]) -> list[str]:
        """``command`` run on the head node (its network and UTS namespaces), as a user on a login node."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", f"--uts={self.cluster.uts_dir}/head", *command]

    def env(self) -> dict[str, str]:
        """The environment of Slurm's commands and the ranks they start."""
        c = self.cluster
        net = f"10.77.{c.subnet}.0/24"
        env = dict(os.environ, SLURM_CONF=self.conf, TMPDIR=os.path.join(c.local_path, "tmp"),
                   HDMLP_CACHE_DIR=os.path.join(c.local_path, "hdmlp-cache"),
                   # Open MPI: TCP between nodes on the compute network, shared memory within one, samples
                   # sent eagerly (docs/cluster.md, "Found with it"): mpirun's arguments as variables.
                   OMPI_MCA_pml="ob1", OMPI_MCA_btl="tcp,vader,self", OMPI_MCA_btl_tcp_if_include=net,
                   OMPI_MCA_oob_tcp_if_include=net, OMPI_MCA_btl_tcp_eager_limit="4194304",
                   OMPI_MCA_btl_tcp_rndv_eager_limit="4194304", OMPI_MCA_btl_tcp_max_send_size="4194304",
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   # MPICH over UCX (the PyPI wheel's first netmod): TCP on the compute network's interface
                   # only; UCX's shared-memory transports would see one machine and copy between the
                   # emulated nodes' processes in memory (cross-memory attach), never over their links.
                   MPIR_CVAR_CH4_NETMOD="ofi", FI_PROVIDER="tcp", FI_TCP_IFACE="mpi0")
        for key in ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID", "SLURM_NTASKS", "PMI_RANK", "PMIX_RANK",
                    "OMPI_COMM_WORLD_SIZE"):
            env.pop(key, None)
        return env

    # -- lifetime ---------------------------------------------------------------
    def start(self) -> None:
        c = self.cluster
        t0 = time.perf_counter()
        ensure_tools(log=c.log)
        os.makedirs(self.dir)
        for sub in ["state"] + [f"spool/node{k}" for k in range(1, c.nodes + 1)]:
            os.makedirs(os.path.join(self.dir, sub))
        os.makedirs(self.munge_dir, mode=0o755)
        self._make_head()
        self._start_munge()
        self._write_conf()
        self._start_controller()
        for k in range(1, c.nodes + 1):
            self._start_slurmd(k)
        self._wait_until_idle(60)
        c.log(f"[cluster] Slurm ready in {time.perf_counter() - t0:.1f} s: slurmctld and munged on head "
              f"({self.address}), slurmd on node1..node{c.nodes}; ranks start with "
              + {"pmix": "srun --mpi=pmix", "pmi2": "srun --mpi=pmi2", "mpirun": "mpirun inside salloc"}[self.mode])

    def _make_head(self) -> None:
        c = self.cluster
        run = system_tools.run
        run(["ip", "netns", "add", self.netns])
        uts = os.path.join(c.uts_dir, "head")
        open(uts, "w").close()
        run(["unshare", f"--uts={uts}", "hostname", "head"])
        host_end, ns_end = f"{c.tag}m0", f"{c.tag}M0"
        run(["ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end])
        run(["ip", "link", "set", ns_end, "netns", self.netns])
        run(["ip", "link", "set", host_end, "master", f"{c.tag}bm"])
        run(["ip", "link", "set", host_end, "up"])
        nsx = ["ip", "netns", "exec", self.netns]
        run(nsx + ["ip", "link", "set", ns_end, "name", "mpi0"])
        run(nsx + ["ip", "addr", "add", f"{self.address}/24", "dev", "mpi0"])
        run(nsx + ["ip", "link", "set", "mpi0", "up"])
        run(nsx + ["ip", "link", "set", "lo", "up"])

    def _daemon(self, command: list[str], log_name: str) -> subprocess.Popen:
        log = open(os.path.join(self.dir, log_name), "ab")
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=self.env())
        log.close()
        self.procs.append(proc)
        return proc

    def _start_munge(self) -> None:
        key = os.path.join(self.dir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self._daemon(self.in_head(["munged", "--foreground", "--force", f"--socket={self.socket}",
                                   f"--key-file={key}", f"--pid-file={self.dir}/munged.pid",
                                   f"--log-file={self.dir}/munged.log", f"--seed-file={self.dir}/munged.seed"]),
                     "munged.out")
        deadline = time.monotonic() + 20
        while not os.path.exists(self.socket):
            if time.monotonic() > deadline:
                raise SlurmUnavailable(f"munged did not start: {self._tail('munged.log')}{self._tail('munged.out')}")
            time.sleep(0.05)

    def _write_conf(self) -> None:
        c = self.cluster
        cpus = max(1, c.ranks_per_node)
        nodes = "\n".join(f"NodeName=node{k} NodeAddr={c.address(k)} CPUs={cpus} State=UNKNOWN"
                          for k in range(1, c.nodes + 1))
        text = f"""# Emulated cluster {c.tag} (benchmarks/lab/cluster/slurm.py)
ClusterName=hdmlp{c.pid}
SlurmctldHost=head({self.address})
AuthType=auth/munge
AuthInfo=socket={self.socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={self.dir}/state
SlurmdSpoolDir={self.dir}/spool/%n
SlurmctldPidFile={self.dir}/slurmctld.pid
SlurmdPidFile={self.dir}/slurmd-%n.pid
SlurmctldLogFile={self.dir}/slurmctld.log
SlurmdLogFile={self.dir}/slurmd-%n.log
# Node-local: the PMIx plugin makes its server's folder there, under the same name on every node.
TmpFS={c.local_path}/tmp
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
InactiveLimit=0
KillWait=5
MinJobAge=10
Waittime=0
MessageTimeout=30
{nodes}
PartitionName=emu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.conf, "w") as f:
            f.write(text)

    def _start_controller(self) -> None:
        self._daemon(self.in_head(["slurmctld", "-D", "-i", "-f", self.conf]), "slurmctld.out")

    def _start_slurmd(self, k: int) -> None:
        """slurmd on node k, in the node's network and UTS namespaces and a private mount namespace with
        the node's PFS and local folders at the common paths (the launch agent's inner script). Entered
        with nsenter, not `ip netns exec`, which mounts a sysfs of its own: slurmd needs the machine's
        /sys/fs/cgroup (its cgroup plugin starts even with proctrack/linuxproc) and hwloc its /sys."""
        c = self.cluster
        inner = os.path.join(c.work, "agent-inner.sh")
        command = " ".join(shlex.quote(a) for a in ["slurmd", "-D", "-N", f"node{k}", "-f", self.conf])
        self._daemon(["nsenter", f"--net=/run/netns/{c.netns(k)}", f"--uts={c.uts_dir}/n{k}",
                      "unshare", "-m", "--propagation", "private", "/bin/sh", inner, str(k), f"exec {command}"],
                     f"slurmd-node{k}.out")

    def _wait_until_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise SlurmUnavailable(f"a Slurm daemon exited ({p.args[-1] if p.args else p}): "
                                           f"{self._tail('slurmctld.log')}{self._logs_of_nodes()}")
            proc = subprocess.run(self.in_head(["sinfo", "-h", "-N", "-o", "%N %t"]), capture_output=True,
                                  text=True, env=self.env(), timeout=30)
            last = (proc.stdout + proc.stderr).strip()
            states = dict(line.split() for line in proc.stdout.splitlines() if len(line.split()) == 2)
            if len(states) == self.cluster.nodes and all(s == "idle" for s in states.values()):
                return
            time.sleep(0.3)
        raise SlurmUnavailable(f"Slurm's nodes did not become idle within {timeout:.0f} s (sinfo: {last}); "
                               f"{self._tail('slurmctld.log')}{self._logs_of_nodes()}")

    def _tail(self, name: str, lines: int = 8) -> str:
        path = os.path.join(self.dir, name)
        if not os.path.exists(path):
            return ""
        with open(path, errors="replace") as f:
            return f"\n--- {name}:\n" + "".join(f.readlines()[-lines:])

    def _logs_of_nodes(self) -> str:
        return "".join(self._tail(f"slurmd-node{k}.log") + self._tail(f"slurmd-node{k}.out")
                       for k in range(1, self.cluster.nodes + 1))

    def stop(self) -> None:
        """Cancels every job, stops the daemons (the cluster's teardown kills what is left in the namespaces)."""
        if self.procs:
            subprocess.run(self.in_head(["scancel", "--full", "--quiet", "-p", "emu"]), capture_output=True,
                           env=self.env(), timeout=30)
        for proc in reversed(self.procs):
            system_tools.stop_group(proc, grace=3)
        self.procs = []

    # -- running ----------------------------------------------------------------
    def command(self, command: list[str], env: dict[str, str] | None = None, launcher_args: list[str] = (),
                mode: str | None = None) -> list[str]:
        """The command line (run on the head) that starts ``command`` as ranks_per_node ranks on every node,
        ranked round-robin over the nodes (as mpirun's --map-by node): srun with the mode's PMI, or mpirun
        inside salloc. ``env``: extra variables for the ranks."""
        c = self.cluster
        mode = mode or self.mode
        n = c.nodes * c.ranks_per_node
        exports = [f"{k}={v}" for k, v in (env or {}).items()]
        shape = [f"--nodes={c.nodes}", f"--ntasks={n}", f"--ntasks-per-node={c.ranks_per_node}"]
        if mode == "mpirun":
            mpirun = ["mpirun", "--allow-run-as-root", "-np", str(n), "--map-by", "node", "--bind-to", "none",
                      *[a for e in exports for a in ("-x", e)], *launcher_args]
            return self.in_head(["env", *exports, "salloc", "--quiet", *shape, *mpirun, *command])
        return self.in_head(["env", *exports, "srun", "--quiet", f"--mpi={mode}", *shape,
                             "--distribution=cyclic", *launcher_args, *command])

    def keep_going_args(self, mode: str | None = None) -> list[str]:
        """Launcher arguments that keep the other ranks running when one dies, so that hdmlp itself must
        end them (mpirun inside salloc: Open MPI's; srun: its default, said explicitly)."""
        mode = mode or self.mode
        if mode == "mpirun":
            return ["--mca", "orte_abort_on_non_zero_status", "0"]
        return ["--kill-on-bad-exit=0"]

    def abort_args(self, mode: str | None = None) -> list[str]:
        """Launcher arguments that end the job when a rank dies (srun: --kill-on-bad-exit)."""
        return [] if (mode or self.mode) == "mpirun" else ["--kill-on-bad-exit=1"]

    def sbatch(self, script: str, script_args: list[str] = (), env: dict[str, str] | None = None,
               timeout: float = 300, cwd: str | None = None) -> dict:
        """Submits the batch script file ``script`` as it is, from the head and the folder ``cwd`` (the job's
        working folder), with ``sbatch --wait``; returns ``{"returncode", "job_id", "output", "stderr",
        "seconds"}`` (``output``: the job's output file). Extra ``env`` goes to the job (sbatch's default
        --export=ALL)."""
        out = os.path.join(self.dir, f"sbatch-{time.time_ns()}.out")
        t = time.perf_counter()
        proc = subprocess.run(self.in_head(["env", *[f"{k}={v}" for k, v in (env or {}).items()], "sbatch",
                                            "--wait", f"--output={out}", script, *script_args]),
                              capture_output=True, text=True, env=self.env(), timeout=timeout, cwd=cwd)
        m = re.search(r"Submitted batch job (\d+)", proc.stdout)
        output = open(out, errors="replace").read() if os.path.exists(out) else ""
        return {"returncode": proc.returncode, "job_id": int(m.group(1)) if m else None, "output": output,
                "stderr": proc.stderr, "seconds": time.perf_counter() - t}
