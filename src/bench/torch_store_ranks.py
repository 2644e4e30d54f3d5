#!/usr/bin/env python3
"""Serves a torch.distributed.TCPStore, as torchrun's agent does, and starts N ranks of a command as its workers.

Used by the GPU bundle's bin/launchers (docs/DEPLOYMENT.md, "Launchers") to show that dcp4j ranks meet in torch's own
store: the store is torch's (TCPStore, is_master=True), the ranks are JVMs (e.g. bin/dcp4j ping), each started with
the environment torchrun gives a worker whose agent shares its store: RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE=True,
TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT=0, and DCP4J_JOB_SECRET (taken from this environment, else a fresh
one). DCP4J_JOB_ID, DCP4J_MASTER_PORT, DCP4J_RENDEZVOUS_DIR and DCP4J_LAUNCHER_PID are removed from the ranks'
environment, so that nothing but torch's store can carry their rendezvous.

After every rank has exited (or been stopped at --timeout), the script reads back from the store the keys dcp4j
writes (io.github.dcp4j.rendezvous.TorchStoreRendezvous): under dcp4j/<job>/<run>/attempt_0/, where the job is
TORCHELASTIC_RUN_ID and the run 16 hex digits of SHA-256("dcp4j run id\\0" + secret), each rank's claim rank/<r>
(torch keeps an ADD counter as its decimal text: "1"), and for each --expect-exchange NAME each rank's message
NAME/<r> (the exchange's number and name: "1-ping" is ping's one exchange), decoded and its HMAC-SHA256 tag verified
under the secret; it must name the job, the run, the world size, rank r and the key, and its pid is compared with the
process started as rank r.

Exit code 0 when every rank exited with --expect-exit (default 0) and the store holds what that implies (with 0:
every claim and every expected message; otherwise: no claim, nothing written); 1 otherwise; 2 for a usage error.

  python3 torch_store_ranks.py --nproc 2 -- bin/dcp4j ping
  python3 torch_store_ranks.py --nproc 2 --expect-exchange 1-ping -- bin/dcp4j ping
  python3 torch_store_ranks.py --nproc 2 --drop DCP4J_JOB_SECRET --expect-exit 2 -- bin/dcp4j ping
"""
import argparse
import hashlib
import hmac
import os
import secrets
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

# Participant.MAGIC: "dcp4jRDV" as a big-endian u64 (Java's DataOutputStream).
MAGIC = 0x6463703452445631
# The variables that would take the ranks' rendezvous elsewhere than torch's store, or tie them to a dcp4j launch.
DROPPED = ("DCP4J_JOB_ID", "DCP4J_MASTER_PORT", "DCP4J_RENDEZVOUS_DIR", "DCP4J_LAUNCHER_PID")


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Serves a torch.distributed.TCPStore as torchrun's agent does, starts N ranks of COMMAND with"
                    " torchrun's worker variables, then reads back the keys dcp4j wrote to the store.",
        epilog="Everything after -- is the command each rank runs, e.g. -- bin/dcp4j ping.")
    p.add_argument("--nproc", type=int, required=True, help="ranks to start (WORLD_SIZE)")
    p.add_argument("--host", default="127.0.0.1", help="MASTER_ADDR, the address the store is reached at"
                   " (default %(default)s)")
    p.add_argument("--port", type=int, default=0, help="MASTER_PORT; 0 (default): a free port")
    p.add_argument("--run-id", default=None, help="TORCHELASTIC_RUN_ID, dcp4j's job id (default: a fresh one)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds the ranks may run before they are stopped, a failure (default %(default)s)")
    p.add_argument("--grace", type=float, default=15.0,
                   help="seconds the other ranks may go on after one exits with an unexpected code before they are"
                        " stopped, as torchrun stops a group (default %(default)s)")
    p.add_argument("--expect-exit", type=int, default=0, help="the exit code every rank must end with (default 0)")
    p.add_argument("--expect-exchange", action="append", default=[], metavar="NAME",
                   help="an exchange whose last messages stay in the store, as '<number>-<name>' (ping: 1-ping);"
                        " each rank's is read back and verified; repeatable")
    p.add_argument("--drop", action="append", default=[], metavar="VAR",
                   help="a variable to leave out of the ranks' environment (e.g. DCP4J_JOB_SECRET); repeatable")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    a = p.parse_args(argv)
    if a.command and a.command[0] == "--":
        a.command = a.command[1:]
    if not a.command:
        p.error("give the ranks' command after --, e.g. -- bin/dcp4j ping")
    if a.nproc < 1:
        p.error(f"--nproc must be >= 1; got {a.nproc}")
    if a.timeout <= 0 or a.grace < 0:
        p.error("--timeout must be positive and --grace not negative")
    if not 0 <= a.port <= 65535:
        p.error(f"--port must be in [0, 65535]; got {a.port}")
    return a


def free_port(host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def run_id(secret):
    """JobSecret.run(): 16 hex digits of SHA-256 over "dcp4j run id\\0" and the secret's UTF-8 bytes."""
    return hashlib.sha256(b"dcp4j run id\0" + secret.encode("utf-8")).hexdigest()[:16]


class Reader:
    """Java's DataInputStream over bytes: big-endian integers, writeUTF strings (u16 length, then the bytes)."""

    def __init__(self, raw):
        self.raw, self.at = raw, 0

    def take(self, n):
        if n < 0 or self.at + n > len(self.raw):
            raise ValueError(f"cut short at byte {self.at} of {len(self.raw)} (wanted {n} more)")
        b = self.raw[self.at:self.at + n]
        self.at += n
        return b

    def unpack(self, fmt):
        return struct.unpack(">" + fmt, self.take(struct.calcsize(">" + fmt)))[0]

    def utf(self):
        # modified UTF-8 differs from UTF-8 only for NUL and characters outside the BMP, which dcp4j's keys,
        # job ids and run ids do not hold
        return self.take(self.unpack("H")).decode("utf-8")


def open_message(raw, secret):
    """Participant.open: a sealed message as a dict (job, run, world, rank, pid, key, part, tag_ok)."""
    r = Reader(raw)
    if r.unpack("Q") != MAGIC:
        raise ValueError("not a dcp4j rendezvous message (no magic)")
    m = {"job": r.utf(), "run": r.utf(), "world": r.unpack("i"), "rank": r.unpack("i"), "pid": r.unpack("q"),
         "key": r.utf()}
    m["part"] = r.take(r.unpack("i"))
    body = r.at
    tag = r.take(r.unpack("i"))
    if r.at != len(raw):
        raise ValueError(f"{len(raw) - r.at} bytes after the end of the message")
    want = hmac.new(secret.encode("utf-8"), raw[:body], hashlib.sha256).digest()
    m["tag_ok"] = hmac.compare_digest(want, tag)
    return m


def rank_env(base, a, rank, port, job, secret):
    env = dict(base)
    for name in DROPPED:
        env.pop(name, None)
    env.update({
        "RANK": str(rank), "WORLD_SIZE": str(a.nproc), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(a.nproc),
        "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_NAME": "default", "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(a.nproc), "MASTER_ADDR": a.host, "MASTER_PORT": str(port),
        "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RUN_ID": job, "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0", "DCP4J_JOB_SECRET": secret,
    })
    for name in a.drop:
        env.pop(name, None)
    return env


def signal_running(procs, sig):
    """Sends sig to the process group of each rank still running."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass


def stop(procs):
    """SIGTERM to each rank's process group still running, SIGKILL 5 s later."""
    signal_running(procs, signal.SIGTERM)
    end = time.monotonic() + 5
    while time.monotonic() < end and any(p.poll() is None for p in procs):
        time.sleep(0.1)
    signal_running(procs, signal.SIGKILL)
    for p in procs:
        p.wait()


def run_ranks(a, port, job, secret, logs):
    """Starts the ranks, waits (bounded); each rank's (exit code, seconds, pid); codes of stopped ranks are None."""
    procs, started = [], time.monotonic()
    for rank in range(a.nproc):
        log = open(os.path.join(logs, f"rank-{rank}.log"), "wb")
        procs.append(subprocess.Popen(a.command, env=rank_env(os.environ, a, rank, port, job, secret),
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))
        log.close()
    ended = [None] * a.nproc
    deadline, stopped = started + a.timeout, []
    while any(e is None for e in ended):
        now = time.monotonic()
        for i, p in enumerate(procs):
            if ended[i] is None and p.poll() is not None:
                ended[i] = now - started
                if p.returncode != a.expect_exit:
                    deadline = min(deadline, now + a.grace)
        if any(e is None for e in ended) and now > deadline:
            stopped = [i for i, e in enumerate(ended) if e is None]
            why = "--timeout" if now >= started + a.timeout else "--grace after a rank's unexpected exit"
            print(f"stopping rank(s) {stopped} after {now - started:.1f} s ({why})", flush=True)
            stop(procs)
            for i in stopped:
                ended[i] = time.monotonic() - started
            break
        time.sleep(0.05)
    return [(None if i in stopped else p.returncode, ended[i], p.pid) for i, p in enumerate(procs)]


def main(argv):
    a = parse_args(argv)
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"torch_store_ranks: needs torch (python3 -c 'import torch.distributed'): {e}", file=sys.stderr)
        return 1
    from datetime import timedelta

    secret = os.environ.get("DCP4J_JOB_SECRET") or secrets.token_hex(32)
    made = "" if os.environ.get("DCP4J_JOB_SECRET") else " (a fresh DCP4J_JOB_SECRET: none was set)"
    job = a.run_id or "store-" + secrets.token_hex(4)
    port = a.port or free_port(a.host)
    store = dist.TCPStore(a.host, port, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=a.timeout))
    prefix = f"dcp4j/{job}/{run_id(secret)}/attempt_0/"
    backend = getattr(store, "libuvBackend", "?")
    print(f"torch_store_ranks: torch {torch.__version__}, torch.distributed.TCPStore (master) at {a.host}:{port},"
          f" libuv backend {backend}; job (TORCHELASTIC_RUN_ID) {job}, keys under {prefix}{made}", flush=True)
    print(f"torch_store_ranks: {a.nproc} rank(s) of: {' '.join(a.command)}"
          + (f" (without {', '.join(a.drop)})" if a.drop else ""), flush=True)

    with tempfile.TemporaryDirectory(prefix="torch-store-ranks-") as logs:
        results = run_ranks(a, port, job, secret, logs)
        for rank in range(a.nproc):
            with open(os.path.join(logs, f"rank-{rank}.log"), "rb") as f:
                for line in f.read().decode("utf-8", "replace").splitlines():
                    print(f"[rank {rank}] {line}")
    problems = []
    for rank, (code, seconds, pid) in enumerate(results):
        said = "stopped (did not end in time)" if code is None else f"exit code {code}"
        print(f"rank {rank} (pid {pid}): {said} after {seconds:.1f} s")
        if code != a.expect_exit:
            problems.append(f"rank {rank} {said}, expected exit code {a.expect_exit}")

    print(f"store: {store.num_keys()} key(s) in torch's store after the ranks ended")
    claims = [prefix + f"rank/{r}" for r in range(a.nproc)]
    if a.expect_exit != 0:
        written = [k for k in claims if store.check([k])]
        print(f"store: rank claims present: {len(written)} of {a.nproc}"
              + (f" ({', '.join(written)})" if written else " (nothing written, as expected)"))
        if written:
            problems.append(f"ranks that exited with {a.expect_exit} wrote {len(written)} claim(s) to the store")
    else:
        for r, key in enumerate(claims):
            if not store.check([key]):
                print(f"store: {key} MISSING")
                problems.append(f"rank {r}'s claim {key} is not in torch's store")
                continue
            value = store.get(key)
            print(f"store: {key} = {value.decode('ascii', 'replace')} (rank {r}'s claim, an ADD counter)")
            if value.strip() != b"1":
                problems.append(f"rank {r}'s claim {key} is {value!r}, not b'1'")
        for name in a.expect_exchange:
            for r in range(a.nproc):
                key = f"{prefix}{name}/{r}"
                if not store.check([key]):
                    print(f"store: {key} MISSING")
                    problems.append(f"rank {r}'s message {key} is not in torch's store")
                    continue
                raw = store.get(key)
                try:
                    m = open_message(raw, secret)
                except (ValueError, UnicodeDecodeError, struct.error) as e:
                    print(f"store: {key}: {len(raw)} bytes, unreadable: {e}")
                    problems.append(f"rank {r}'s message {key} is unreadable: {e}")
                    continue
                started_pid = results[r][2]
                part = m["part"].decode("utf-8", "replace")
                who = (f"the process started as rank {r}" if m["pid"] == started_pid
                       else f"not the started process {started_pid}: a wrapper that does not exec")
                print(f"store: {key}: {len(raw)} bytes, rank {m['rank']} of {m['world']}, job {m['job']},"
                      f" run {m['run']}, written for {'this key' if m['key'] == key else repr(m['key'])},"
                      f" tag {'verified' if m['tag_ok'] else 'NOT VERIFIED'} under DCP4J_JOB_SECRET,"
                      f" pid {m['pid']} ({who}), part {part!r}")
                expected = {"job": job, "run": run_id(secret), "world": a.nproc, "rank": r, "tag_ok": True}
                for field, want in expected.items():
                    if m[field] != want:
                        problems.append(f"rank {r}'s message {key}: {field} is {m[field]!r}, not {want!r}")
                if m["key"] != key:
                    problems.append(f"rank {r}'s message {key} was written for {m['key']!r}")
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print(f"PASS: {a.nproc} rank(s) exited with {a.expect_exit}; "
          + ("every claim" + (" and message " + ", ".join(a.expect_exchange) if a.expect_exchange else "")
             + " read back from torch's store" if a.expect_exit == 0 else "nothing written to torch's store"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
