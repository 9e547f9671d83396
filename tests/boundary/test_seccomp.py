"""Tests for the worker's seccomp filter (attnscore.boundary.seccomp) and the kernel objects a
worker uid leaves (attnscore.boundary.kernel_objects)."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnscore.boundary import kernel_objects
from attnscore.sandbox.launch import Limits, protections

ROOT = Path(__file__).resolve().parents[2]
UID = 64450  # outside the default worker range: no grader running meanwhile uses it

_PROBE = """
import ctypes, errno, json, os, platform, resource, sys
sys.path.insert(0, sys.argv[1])
limit = json.loads(sys.argv[2])
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from attnscore.boundary import seccomp
installed = seccomp.confine()
import torch
q, k = torch.randn(2, 4, 8, dtype=torch.float64), torch.randn(2, 4, 8, dtype=torch.float64)
s = q @ k.transpose(-1, -2)
ok = bool(torch.allclose(s, torch.einsum("bqd,bkd->bqk", q, k)))
ok &= tuple(torch.nn.functional.scaled_dot_product_attention(q, k, k).shape) == (2, 4, 8)
add_key, keyctl = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
calls = {
    "shmget": lambda: libc.shmget(0, 4096, 0o1600),
    "msgget": lambda: libc.msgget(0, 0o1600),
    "semget": lambda: libc.semget(0, 1, 0o1600),
    "mq_open": lambda: libc.mq_open(b"/attnscore-probe", os.O_RDWR | os.O_CREAT, 0o600, None),
    "add_key": lambda: libc.syscall(add_key, b"user", b"attnscore:probe", b"x", 1, -4),
    "keyctl": lambda: libc.syscall(keyctl, 0, -4, 0),
}
refused = {}
for name, call in calls.items():
    ctypes.set_errno(0)
    refused[name] = errno.errorcode.get(ctypes.get_errno(), "") if call() < 0 else "allowed"
try:
    os.close(os.memfd_create("probe"))
    refused["memfd_create"] = "allowed"
except OSError as exc:
    refused["memfd_create"] = errno.errorcode[exc.errno]
import socket
socket.socketpair()
try:
    socket.socket()
    refused["inet"] = "allowed"
except OSError as exc:
    refused["inet"] = errno.errorcode[exc.errno]
print(json.dumps({"installed": installed, "torch": ok, "refused": refused}))
"""


def _probe(address_limit: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(ROOT), json.dumps(address_limit)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_filter_refuses_kernel_objects_and_memfds_and_torch_still_works():
    """With an address-space limit: SysV IPC, POSIX queues, keys and memfds are EPERM, inet EACCES;
    torch imports after the filter and computes scores."""
    found = _probe(4 * 1024**3)
    assert found["installed"] is True and found["torch"] is True
    assert found["refused"] == {
        "shmget": "EPERM",
        "msgget": "EPERM",
        "semget": "EPERM",
        "mq_open": "EPERM",
        "add_key": "EPERM",
        "keyctl": "EPERM",
        "memfd_create": "EPERM",
        "inet": "EACCES",
    }


@pytest.mark.slow
def test_memfds_stay_allowed_without_an_address_limit():
    """A GPU worker has no RLIMIT_AS for a memfd to escape: memfd_create is allowed, IPC is not."""
    found = _probe(0)
    assert found["refused"]["memfd_create"] == "allowed"
    assert found["refused"]["shmget"] == "EPERM" and found["refused"]["keyctl"] == "EPERM"


_INT80 = """
import ctypes, json, mmap, sys
sys.path.insert(0, sys.argv[1])
code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])  # mov eax, 20 (i386 getpid); int 0x80; ret
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
call = ctypes.CFUNCTYPE(ctypes.c_int)(address)
before = call()
from attnscore.boundary import seccomp
seccomp.confine()
print(json.dumps([before, call(), __import__("os").getpid()]))
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the i386 ABI is reached with int 0x80 on x86_64")
def test_filter_refuses_the_i386_abi():
    """int 0x80 from a 64-bit worker (the i386 system calls, which the rules by number do not match) is refused."""
    done = subprocess.run([sys.executable, "-c", _INT80, str(ROOT)], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.skip(f"this kernel runs no i386 system calls: {done.stderr[-200:]}")
    before, after, pid = json.loads(done.stdout)
    if before != pid:
        pytest.skip("this kernel runs no i386 system calls")
    assert after == -1  # -EPERM


def _as_uid(uid: int, function) -> None:
    subprocess.run(["/bin/true"], user=uid, group=uid, extra_groups=[], preexec_fn=function, check=True)


def _make_objects() -> None:  # runs as the uid, between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    add_key = {"x86_64": 248, "aarch64": 217}[platform.machine()]
    made = [libc.shmget(0x61740001, 4096, 0o1600), libc.msgget(0x61740002, 0o1600), libc.semget(0x61740003, 1, 0o1600)]
    made.append(libc.syscall(add_key, b"user", b"attnscore:test", b"secret", 6, -4))
    if min(made) < 0:
        os._exit(9)


def _no_keys(uid: int) -> bool:
    for _ in range(600):  # keys go a moment after their keyrings are invalidated; no deadline load could beat
        if not kernel_objects.has_keys(uid):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(os.geteuid() != 0, reason="removing another uid's objects needs root")
def test_objects_and_keys_a_uid_left_are_removed():
    """SysV segments, queues, semaphore sets and user keys of a uid all go; another uid's stay."""
    libc = ctypes.CDLL(None, use_errno=True)
    mine = libc.shmget(0x61740009, 4096, 0o1600)  # root's own: never touched
    try:
        _as_uid(UID, _make_objects)
        assert sorted(k for k, _ in kernel_objects.sysv_objects_of(UID)) == ["msg", "sem", "shm"]
        assert kernel_objects.has_keys(UID)
        assert kernel_objects.remove_objects_of(UID) == 3
        assert kernel_objects.sysv_objects_of(UID) == []
        assert _no_keys(UID)
        assert ("shm", mine) in kernel_objects.sysv_objects_of(0)
    finally:
        libc.shmctl(mine, 0, None)


@pytest.mark.skipif(os.geteuid() != 0, reason="removing another uid's objects needs root")
def test_an_object_handed_to_another_uid_is_removed_by_its_creator():
    """A segment whose owner was changed with IPC_SET is still found by its creator's uid."""

    def make_and_hand_over() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        ident = libc.shmget(0x6174000A, 4096, 0o1666)
        buffer = (ctypes.c_char * 512)()  # struct shmid_ds: ipc_perm first (key, uid, gid, ...)
        libc.shmctl(ident, 2, buffer)  # IPC_STAT
        ctypes.c_uint.from_buffer(buffer, 4).value = UID + 1  # shm_perm.uid
        if libc.shmctl(ident, 1, buffer) != 0:  # IPC_SET
            os._exit(9)

    _as_uid(UID, make_and_hand_over)
    assert [k for k, _ in kernel_objects.sysv_objects_of(UID + 1)] == ["shm"]
    assert kernel_objects.remove_objects_of(UID) == 1
    assert kernel_objects.sysv_objects_of(UID) == kernel_objects.sysv_objects_of(UID + 1) == []


def test_nothing_is_removed_for_uid_0_or_when_not_root():
    """uid 0 is never swept (and a grader that is not root removes nothing)."""
    assert kernel_objects.remove_objects_of(0) == 0


@pytest.mark.skipif(
    os.geteuid() != 0 or not kernel_objects.ipc_namespaces_available(), reason="a new IPC namespace needs root"
)
def test_isolate_gives_a_worker_its_own_ipc_namespace_and_session_keyring():
    """After isolate() a child's segment is not in the grader's namespace, and it dies with the child."""
    before = os.readlink("/proc/self/ns/ipc")

    def child() -> None:
        own_ipc, own_keys = kernel_objects.isolate()
        libc = ctypes.CDLL(None, use_errno=True)
        if not (own_ipc and own_keys) or os.readlink("/proc/self/ns/ipc") == before:
            os._exit(8)
        if libc.shmget(0x6174000B, 4096, 0o1600) < 0:
            os._exit(9)

    subprocess.run(["/bin/true"], preexec_fn=child, check=True)
    assert not [i for k, i in kernel_objects.sysv_objects_of(0) if k == "shm" and _key_of(i) == 0x6174000B]


def _key_of(ident: int) -> int:
    with open("/proc/sysvipc/shm") as f:
        for row in f.read().splitlines()[1:]:
            fields = row.split()
            if int(fields[1]) == ident:
                return int(fields[0])
    return -1


def test_protections_line_names_the_kernel_object_layers():
    """The protections line says what seccomp refuses, and (as root) the namespace and the sweep."""
    line = protections(Limits())
    assert "seccomp: no network sockets, SysV/POSIX IPC, keyrings, memfds" in line
    assert "memory (address space; memfds refused)" in line
    assert "memfds refused" not in protections(Limits(seccomp=False))
    if os.geteuid() == 0:
        assert "its IPC objects and keys removed with its uid's processes" in line
