"""Packaged charts for the tests, byte for byte reproducible: `<chart>/...` files in a gzipped tar, as `helm
package` lays them out, with every time stamp, owner and mode fixed (helm's own archives carry the time they
were made). The fixture fleet local-charts commits one (its README); the tests make others in tmp_path.

`python -m tests.chart_archives SOURCE ARCHIVE` writes the archive of a chart folder.
"""

from __future__ import annotations

import gzip
import io
import sys
import tarfile
from pathlib import Path

LOCAL_CHARTS = Path(__file__).parent / "fixtures" / "fleets" / "local-charts"
STAND_IN_SOURCE = LOCAL_CHARTS / "chart-source" / "gpu-operator"
STAND_IN_ARCHIVE = LOCAL_CHARTS / "charts" / "gpu-operator-v26.3.3.tgz"


def pack(files: dict[str, bytes]) -> bytes:
    """A gzipped tar of `files` (path in the archive -> bytes), in path order, with no time stamp or owner."""
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.USTAR_FORMAT) as archive,
    ):
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            archive.addfile(info, io.BytesIO(files[name]))
    return raw.getvalue()


def pack_folder(source: Path) -> bytes:
    """The archive of the chart folder `source`, its files under `<folder name>/`."""
    files = sorted(p for p in source.rglob("*") if p.is_file())
    return pack({f"{source.name}/{p.relative_to(source).as_posix()}": p.read_bytes() for p in files})


def chart(name: str, version: str, **templates: str) -> bytes:
    """A minimal chart's archive: its Chart.yaml and the templates given (file name -> text)."""
    files = {f"{name}/Chart.yaml": f"apiVersion: v2\nname: {name}\nversion: {version}\n".encode()}
    files.update({f"{name}/templates/{file}": text.encode() for file, text in templates.items()})
    return pack(files)


if __name__ == "__main__":
    Path(sys.argv[2]).write_bytes(pack_folder(Path(sys.argv[1])))
