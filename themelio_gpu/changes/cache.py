"""`changed`'s cache of synthesized stacks, so that a stack is synthesized once per set of inputs.

- `stacks/<digest>.tf.json`: a stack file, named by the digest of its inputs (outputs/stack_inputs.py: its
  cluster's plan, the tool's code, the installed packages, the engine). Equal digests synthesize the same
  bytes (what incremental synthesis relies on too), so a file serves every commit and either side.
- `checked/<fleet key>.json`: the cluster files checked and planned with a catalog and tool (the fleet key,
  stack_inputs.fleet_key), by file name and SHA-256, with their stacks' digests where computed: a file with
  those bytes need not be read and checked again (sides.py).
- `commits/<key>.json`: the stacks of a commit synthesized by its own code (a commit whose tool differs from
  this checkout's, which cannot be planned here): stack name -> digest, as its own synthesis recorded them.
  The key is the commit with everything else its synthesis depends on: where its catalog, cluster files and
  code are, the engine, the installed packages and Python.

Where: $THEMELIO_CHANGED_CACHE, else `.cache/changed/` in this checkout (gitignored). Bounded: after a run that
added files, the least recently used ones go until the cache holds at most $THEMELIO_CHANGED_CACHE_MIB MiB
(default 512). Files are written under a temporary name and renamed, so a reader never sees half a file, and
taken out by hard link (or copy) into the run's temporary folder, so that another run trimming the cache
cannot take them away meanwhile. The cache only saves time: what cannot be read or written there is
synthesized instead, with a warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path

from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path

CACHE_ENV = "THEMELIO_CHANGED_CACHE"
SIZE_ENV = "THEMELIO_CHANGED_CACHE_MIB"
DEFAULT_SIZE_MIB = 512
PROJECT = Path(__file__).resolve().parents[2]
DEFAULT_FOLDER = PROJECT / ".cache" / "changed"
FORMAT = 1
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_TEMPORARY = ".tmp-"
_STALE_TEMPORARY_S = 3600
"""A temporary file this old was left by a run that was killed: trimming removes it."""
MIB = 1024 * 1024


class StackCache:
    def __init__(self, folder: Path, limit_bytes: int) -> None:
        self.folder = folder
        self.limit = limit_bytes
        self._added = False
        self._warned = False

    @classmethod
    def configured(cls, problems: Problems) -> StackCache | None:
        """The cache the environment names (a problem for a size that is not a number of MiB)."""
        folder = Path(os.environ.get(CACHE_ENV) or DEFAULT_FOLDER)
        size = os.environ.get(SIZE_ENV, "").strip() or str(DEFAULT_SIZE_MIB)
        if not size.isdigit():
            problems.add("environment", SIZE_ENV, f"{size!r} is not a size in MiB (a whole number, 0: no cache)")
            return None
        return cls(folder, int(size) * MIB) if int(size) > 0 else None

    def _stack(self, digest: str) -> Path:
        return self.folder / "stacks" / f"{digest}.tf.json"

    def fetch(self, digest: str | None, into: Path) -> bool:
        """The stack file of `digest` put at `into`; False when the cache has none."""
        if digest is None or not _DIGEST.match(digest):
            return False
        source = self._stack(digest)
        try:
            _take(source, into)
            os.utime(source)  # recently used: trimmed last
        except OSError:
            return False
        return True

    def store(self, digest: str | None, stack_file: Path) -> None:
        if digest is not None and _DIGEST.match(digest) and not self._stack(digest).is_file():
            self._write(self._stack(digest), stack_file.read_bytes())

    def commit(self, key: str) -> dict[str, str] | None:
        """The stacks recorded for a commit's key (name -> digest), or None."""
        try:
            data = json.loads((self.folder / "commits" / f"{key}.json").read_text(encoding="utf-8"))
            if data.get("format") != FORMAT or not isinstance(data.get("stacks"), dict):
                return None
            stacks = {str(name): str(digest) for name, digest in data["stacks"].items()}
        except (OSError, ValueError, AttributeError):
            return None
        return stacks if all(_DIGEST.match(d) for d in stacks.values()) else None

    def store_commit(self, key: str, commit: str, stacks: dict[str, str]) -> None:
        data = {"format": FORMAT, "commit": commit, "stacks": dict(sorted(stacks.items()))}
        self._write(self.folder / "commits" / f"{key}.json", (json.dumps(data, indent=2) + "\n").encode())

    def checked_files(self, fleet_key: str) -> dict[str, str]:
        """The cluster files `changed` checked and planned before with this catalog and tool (the fleet key,
        stack_inputs.fleet_key): `<file name> <SHA-256>` -> the digest of the stack's inputs, or ""."""
        try:
            data = json.loads(self._checked(fleet_key).read_text(encoding="utf-8"))
            if data.get("format") != FORMAT or not isinstance(data.get("files"), dict):
                return {}
            os.utime(self._checked(fleet_key))
            return {str(k): str(v) for k, v in data["files"].items() if not v or _DIGEST.match(str(v))}
        except (OSError, ValueError, AttributeError):
            return {}

    def store_checked(self, fleet_key: str | None, files: dict[str, str]) -> None:
        if fleet_key is None or not _DIGEST.match(fleet_key) or not files:
            return
        known = self.checked_files(fleet_key)
        merged = {**known, **{k: v or known.get(k, "") for k, v in files.items()}}
        if merged != known:
            data = {"format": FORMAT, "files": dict(sorted(merged.items()))}
            self._write(self._checked(fleet_key), (json.dumps(data, indent=0) + "\n").encode())

    def _checked(self, fleet_key: str) -> Path:
        return self.folder / "checked" / f"{fleet_key}.json"

    def _write(self, path: Path, content: bytes) -> None:
        temporary: Path | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(prefix=_TEMPORARY, dir=path.parent)
            temporary = Path(name)
            with os.fdopen(handle, "wb") as file:
                file.write(content)
            temporary.replace(path)
            temporary = None
            self._added = True
        except OSError as error:
            self._warn(error)
        finally:  # whatever ends the write (an interrupt too), no half-written file stays
            if temporary is not None:
                with suppress(OSError):
                    temporary.unlink()

    def trim(self) -> None:
        """Remove the least recently used files beyond the size limit (and temporary files left by kills)."""
        if not self._added:
            return
        files: list[tuple[float, int, Path]] = []
        now = time.time()
        for folder in (self.folder / "stacks", self.folder / "commits", self.folder / "checked"):
            for path in folder.glob("*") if folder.is_dir() else ():
                try:
                    status = path.stat()
                except OSError:
                    continue
                if path.name.startswith(_TEMPORARY):
                    if now - status.st_mtime > _STALE_TEMPORARY_S:
                        with suppress(OSError):
                            path.unlink()
                    continue
                files.append((status.st_mtime, status.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.limit:
                break
            with suppress(OSError):
                path.unlink()
            total -= size

    def _warn(self, error: OSError) -> None:
        if not self._warned:
            self._warned = True
            where = display_path(Path(error.filename)) if error.filename else display_path(self.folder)
            print(
                f"warning: changed cannot write its cache ({where}: {error.strerror or error}); "
                f"nothing is reused from it next time (set {CACHE_ENV} to another folder)",
                file=sys.stderr,
            )


def _take(source: Path, into: Path) -> None:
    into.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, into)
    except OSError:
        if not source.is_file():
            raise
        shutil.copyfile(source, into)


def commit_key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()
