"""The seccomp filter every sandbox child installs on itself, written as classic BPF: no libseccomp binding needed.

Allow by default, deny (``EPERM``; opens: ``EACCES``) the system calls robot code never needs and an escape would:
new processes and programs (fork, clone, execve), other processes (ptrace, kill, pidfd_*), network (socket, connect),
namespaces and mounts, file creation/removal/renaming/permission changes/truncation, uid/capability changes, kernel
interfaces (bpf, perf_event_open, io_uring, keyctl, modules, userfaultfd). ``open``/``openat``: all of them are denied
(``files="none"``, the default -- the child has everything imported before the filter goes on), or only those with a
write/create/truncate/append flag (``files="read"``). Another architecture than the one the filter was built for, and
x86-64's x32 ABI, are killed.

Installed with ``prctl(PR_SET_NO_NEW_PRIVS)`` + ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)`` via ctypes; this works
inside unprivileged Docker containers too (their default profile allows nested filters), so it also protects the
``isolation: none`` mode. :func:`bpf_bytes` gives the same program as bytes (``bwrap --seccomp FD`` takes that form).

The syscall numbers are the kernel's ABI for x86-64 and aarch64 (stable); the aarch64 table is not exercised on the
x86-64 machines this project runs on.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

# x86-64 and aarch64 numbers (ABI-stable; resolved once with libseccomp's resolve_syscall).
DENIED_X86_64 = {
    "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322, "ptrace": 101,
    "process_vm_readv": 310, "process_vm_writev": 311, "socket": 41, "socketpair": 53, "connect": 42, "bind": 49,
    "listen": 50, "accept": 43, "accept4": 288, "sendmsg": 46, "sendmmsg": 307, "mount": 165, "umount2": 166,
    "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308, "move_mount": 429, "open_tree": 428,
    "fsopen": 430, "fsmount": 432, "fsconfig": 431, "fspick": 433, "mount_setattr": 442, "creat": 85, "mkdir": 83,
    "mkdirat": 258, "rmdir": 84, "unlink": 87, "unlinkat": 263, "rename": 82, "renameat": 264, "renameat2": 316,
    "link": 86, "linkat": 265, "symlink": 88, "symlinkat": 266, "chmod": 90, "fchmod": 91, "fchmodat": 268,
    "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260, "truncate": 76, "ftruncate": 77, "mknod": 133,
    "mknodat": 259, "utime": 132, "utimes": 235, "utimensat": 280, "futimesat": 261, "setuid": 105, "setgid": 106,
    "setreuid": 113, "setregid": 114, "setresuid": 117, "setresgid": 119, "setgroups": 116, "setfsuid": 122,
    "setfsgid": 123, "capset": 126, "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
    "rt_tgsigqueueinfo": 297, "pidfd_open": 434, "pidfd_getfd": 438, "pidfd_send_signal": 424, "personality": 135,
    "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "kexec_load": 246,
    "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176, "reboot": 169,
    "swapon": 167, "swapoff": 168, "acct": 163, "quotactl": 179, "syslog": 103, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "fanotify_init": 300, "mbind": 237, "migrate_pages": 256, "move_pages": 279,
    "set_mempolicy": 238, "process_madvise": 440, "seccomp": 317, "openat2": 437, "iopl": 172, "ioperm": 173,
    "lookup_dcookie": 212, "vhangup": 153, "sethostname": 170, "setdomainname": 171, "settimeofday": 164,
    "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "memfd_create": 319, "memfd_secret": 447,
    "landlock_create_ruleset": 444, "msgget": 68, "semget": 64, "shmget": 29, "mq_open": 240,
}
DENIED_AARCH64 = {
    "clone": 220, "clone3": 435, "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270,
    "process_vm_writev": 271, "socket": 198, "socketpair": 199, "connect": 203, "bind": 200, "listen": 201,
    "accept": 202, "accept4": 242, "sendmsg": 211, "sendmmsg": 269, "mount": 40, "umount2": 39, "pivot_root": 41,
    "chroot": 51, "unshare": 97, "setns": 268, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsmount": 432,
    "fsconfig": 431, "fspick": 433, "mount_setattr": 442, "mkdirat": 34, "unlinkat": 35, "renameat": 38,
    "renameat2": 276, "linkat": 37, "symlinkat": 36, "fchmod": 52, "fchmodat": 53, "fchown": 55, "fchownat": 54,
    "truncate": 45, "ftruncate": 46, "mknodat": 33, "utimensat": 88, "setuid": 146, "setgid": 144, "setreuid": 145,
    "setregid": 143, "setresuid": 147, "setresgid": 149, "setgroups": 159, "setfsuid": 151, "setfsgid": 152,
    "capset": 91, "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
    "pidfd_open": 434, "pidfd_getfd": 438, "pidfd_send_signal": 424, "personality": 92, "keyctl": 219,
    "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "kexec_load": 104,
    "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106, "reboot": 142,
    "swapon": 224, "swapoff": 225, "acct": 89, "quotactl": 60, "syslog": 116, "name_to_handle_at": 264,
    "open_by_handle_at": 265, "fanotify_init": 262, "mbind": 235, "migrate_pages": 238, "move_pages": 239,
    "set_mempolicy": 237, "process_madvise": 440, "seccomp": 277, "openat2": 437, "lookup_dcookie": 18,
    "vhangup": 58, "sethostname": 161, "setdomainname": 162, "settimeofday": 170, "clock_settime": 112,
    "clock_adjtime": 266, "adjtimex": 171, "memfd_create": 279, "memfd_secret": 447, "landlock_create_ruleset": 444,
    "msgget": 186, "semget": 190, "shmget": 194, "mq_open": 180,
}
ARCHES = {  # machine: (AUDIT_ARCH_*, denied table, open, openat)
    "x86_64": (0xC000003E, DENIED_X86_64, 2, 257),
    "aarch64": (0xC00000B7, DENIED_AARCH64, None, 56),
}

_LD_ABS_W, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_KILL_PROCESS, RET_ALLOW, RET_ERRNO = 0x80000000, 0x7FFF0000, 0x00050000
WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000 | 0o20000000  # O_WRONLY O_RDWR O_CREAT O_TRUNC O_APPEND __O_TMPFILE


class SeccompUnavailable(Exception):
    pass


def program(files: str = "none", machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions."""
    machine = machine or platform.machine()
    if machine not in ARCHES:
        raise SeccompUnavailable(f"no seccomp table for {machine}")
    arch, denied, nr_open, nr_openat = ARCHES[machine]
    eperm, eacces = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.EACCES
    p = [(_LD_ABS_W, 0, 0, 4), (_JEQ, 1, 0, arch), (_RET, 0, 0, RET_KILL_PROCESS), (_LD_ABS_W, 0, 0, 0)]
    if machine == "x86_64":
        p += [(_JGE, 0, 1, 0x40000000), (_RET, 0, 0, RET_KILL_PROCESS)]
    for nr in sorted(set(denied.values())):
        p += [(_JEQ, 0, 1, nr), (_RET, 0, 0, eperm)]
    for nr, flags_arg in ((nr_open, 1), (nr_openat, 2)):
        if nr is None:
            continue
        if files == "none":
            p += [(_JEQ, 0, 1, nr), (_RET, 0, 0, eacces)]
        elif files == "read":
            p += [(_JEQ, 0, 4, nr), (_LD_ABS_W, 0, 0, 16 + 8 * flags_arg), (_JSET, 0, 1, WRITE_FLAGS),
                  (_RET, 0, 0, eacces), (_RET, 0, 0, RET_ALLOW)]
        else:
            raise ValueError(f"files must be 'none' or 'read', not {files!r}")
    p.append((_RET, 0, 0, RET_ALLOW))
    return p


def bpf_bytes(files: str = "none") -> bytes:
    return b"".join(struct.pack("=HBBI", *ins) for ins in program(files))


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def install(files: str = "none") -> None:
    """Put the filter on the calling thread (and everything it starts); irreversible."""
    instructions = program(files)
    array = (_Filter * len(instructions))(*[_Filter(*ins) for ins in instructions])
    prog = _Prog(len(instructions), array)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompUnavailable(f"PR_SET_NO_NEW_PRIVS failed: errno {ctypes.get_errno()}")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        raise SeccompUnavailable(f"PR_SET_SECCOMP failed: errno {ctypes.get_errno()}")
