#!/usr/bin/python3
"""TEST SUPPORT ONLY: configfs-tsm's report interface as a FUSE file system.

Unlike enclave/configfs_fake.ts (a watcher over a plain directory, which
needs its own fs adapter in the same process), this behaves like the kernel
for any process: mkdir makes an entry whose attributes exist at once,
writing `inblob` bumps `generation` and produces `outblob`, rmdir removes
the entry with its attributes. So the gateway can be started with its real
command line and its real file I/O. Quotes have the real TDX v4 layout
(REPORTDATA at 568) or the SEV-SNP report layout (REPORT_DATA at 0x50), carry
the marker FAKE-CONFIGFS-TSM and no signature, and prove nothing.

usage: configfs_tsm_fuse.py MOUNTPOINT tdx_guest|sev_guest
Prints "ready" once mounted; unmount (umount MOUNTPOINT) to stop it.
"""
import errno
import stat
import struct
import sys
import threading
import time

from fusepy import FUSE, FuseOSError, Operations

MARKER = b"FAKE-CONFIGFS-TSM"
INTEL_QE_VENDOR_ID = bytes.fromhex("939a7233f79c4ca9940a0db3957f0607")


def tdx_quote(report_data: bytes) -> bytes:
    q = bytearray(636)
    struct.pack_into("<HHI", q, 0, 4, 2, 0x81)  # version, ECDSA P-256, TEE type TDX
    q[12:28] = INTEL_QE_VENDOR_ID
    q[28:28 + len(MARKER)] = MARKER
    q[568:632] = report_data
    struct.pack_into("<I", q, 632, 0)  # no signature data
    return bytes(q)


def snp_report(report_data: bytes) -> bytes:
    r = bytearray(1184)
    struct.pack_into("<I", r, 0, 2)
    struct.pack_into("<Q", r, 0x08, 0x30000)
    struct.pack_into("<I", r, 0x34, 1)
    r[0x50:0x90] = report_data
    r[0xC0:0xC0 + len(MARKER)] = MARKER
    return bytes(r)


class Entry:
    def __init__(self, provider: str):
        self.provider = provider
        self.generation = 0
        self.inblob = b""
        self.outblob = b""
        self.auxblob = b""


class TsmReport(Operations):
    def __init__(self, provider: str):
        self.provider = provider
        self.entries: dict[str, Entry] = {}
        self.lock = threading.Lock()
        self.now = time.time()

    def _split(self, path: str):
        parts = [p for p in path.split("/") if p]
        if len(parts) > 2:
            raise FuseOSError(errno.ENOENT)
        entry = self.entries.get(parts[0]) if parts else None
        if parts and entry is None:
            raise FuseOSError(errno.ENOENT)
        return entry, (parts[1] if len(parts) == 2 else None)

    def _attrs(self, entry: Entry) -> list[str]:
        names = ["generation", "provider", "inblob", "outblob"]
        return names + (["auxblob"] if entry.provider == "sev_guest" else [])

    def _value(self, entry: Entry, name: str) -> bytes:
        if name == "generation":
            return f"{entry.generation}\n".encode()
        if name == "provider":
            return f"{entry.provider}\n".encode()
        return getattr(entry, name)

    def getattr(self, path, fh=None):
        with self.lock:
            entry, name = self._split(path)
            base = {"st_uid": 0, "st_gid": 0, "st_atime": self.now, "st_mtime": self.now,
                    "st_ctime": self.now}
            if name is None:
                return {**base, "st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
            if name not in self._attrs(entry):
                raise FuseOSError(errno.ENOENT)
            mode = 0o200 if name == "inblob" else 0o444
            return {**base, "st_mode": stat.S_IFREG | mode, "st_nlink": 1,
                    "st_size": len(self._value(entry, name))}

    def readdir(self, path, fh):
        with self.lock:
            entry, name = self._split(path)
            if name is not None:
                raise FuseOSError(errno.ENOTDIR)
            names = list(self.entries) if entry is None else self._attrs(entry)
            return [".", ".."] + names

    def mkdir(self, path, mode):
        with self.lock:
            parts = [p for p in path.split("/") if p]
            if len(parts) != 1:
                raise FuseOSError(errno.EPERM)
            if parts[0] in self.entries:
                raise FuseOSError(errno.EEXIST)
            self.entries[parts[0]] = Entry(self.provider)

    def rmdir(self, path):
        with self.lock:
            parts = [p for p in path.split("/") if p]
            if len(parts) != 1 or parts[0] not in self.entries:
                raise FuseOSError(errno.ENOENT)
            del self.entries[parts[0]]

    def open(self, path, flags):
        with self.lock:
            entry, name = self._split(path)
            if entry is None or name not in self._attrs(entry):
                raise FuseOSError(errno.ENOENT)
            return 0

    def truncate(self, path, length, fh=None):
        return 0

    def read(self, path, size, offset, fh):
        with self.lock:
            entry, name = self._split(path)
            if name == "inblob":
                raise FuseOSError(errno.EACCES)
            return self._value(entry, name)[offset:offset + size]

    def write(self, path, data, offset, fh):
        with self.lock:
            entry, name = self._split(path)
            if name != "inblob" or offset != 0:
                raise FuseOSError(errno.EACCES)
            # Like the kernel: any write bumps the generation, even a rejected one.
            entry.generation += 1
            if len(data) > 64:
                raise FuseOSError(errno.EINVAL)
            report_data = bytes(data).ljust(64, b"\0")
            entry.inblob = bytes(data)
            if entry.provider == "sev_guest":
                entry.outblob = snp_report(report_data)
                entry.auxblob = bytes(24)  # a certificate table with only its terminator
            else:
                entry.outblob = tdx_quote(report_data)
            return len(data)


class Ready(TsmReport):
    def init(self, path):
        print("ready", flush=True)


if __name__ == "__main__":
    mountpoint, provider = sys.argv[1], sys.argv[2]
    if provider not in ("tdx_guest", "sev_guest"):
        sys.exit("provider must be tdx_guest or sev_guest")
    FUSE(Ready(provider), mountpoint, foreground=True, nothreads=True, direct_io=True,
         attr_timeout=0, entry_timeout=0)
