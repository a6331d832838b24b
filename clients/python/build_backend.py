"""The package's PEP 517 build backend, standard library only.

Why not setuptools: setuptools before 70.1 builds wheels with the separate `wheel` package, which a
fresh virtual environment lacks (Python 3.11's venv has pip and setuptools 65.5, nothing else), so
`pip install --no-index --no-build-isolation clients/python` failed offline with "invalid command
'bdist_wheel'". A pure-Python package needs no compiler or build step: this writes the wheel (a zip
file with the package and its metadata), the sdist, and an editable wheel (a .pth file) itself,
on any Python >= 3.9, with nothing to download.

The package's metadata is here (NAME, ...; the version is src/baton/version.py's), not in a [project] table that this backend
would have to parse (tomllib is Python 3.11+)."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent
NAME = "baton-client"
VERSION = re.search(r'__version__ = "([^"]+)"', (ROOT / "src" / "baton" / "version.py").read_text()).group(1)  # type: ignore[union-attr]
SUMMARY = "Baton's Python client and worker runtime: enqueue and await jobs, and run a worker by writing only its handler."
REQUIRES_PYTHON = ">=3.9"
LICENSE = "MIT"
CLASSIFIERS = ["Programming Language :: Python :: 3", "Programming Language :: Python :: 3 :: Only", "Typing :: Typed"]
SCRIPTS = {"baton": "baton.__main__:main"}
PACKAGE = "baton"
SDIST_FILES = ["pyproject.toml", "build_backend.py", "README.md", "generate_schema.py"]

DIST = NAME.replace("-", "_")
DIST_INFO = f"{DIST}-{VERSION}.dist-info"
TAG = "py3-none-any"


def _metadata() -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {VERSION}",
        f"Summary: {SUMMARY}",
        f"License: {LICENSE}",
        f"Requires-Python: {REQUIRES_PYTHON}",
        *[f"Classifier: {c}" for c in CLASSIFIERS],
        "Description-Content-Type: text/markdown",
    ]
    return "\n".join(lines) + "\n\n" + (ROOT / "README.md").read_text(encoding="utf-8")


def _dist_info_files() -> Dict[str, bytes]:
    scripts = "".join(f"{name} = {target}\n" for name, target in SCRIPTS.items())
    return {
        f"{DIST_INFO}/METADATA": _metadata().encode(),
        f"{DIST_INFO}/WHEEL": f"Wheel-Version: 1.0\nGenerator: baton build_backend\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode(),
        f"{DIST_INFO}/entry_points.txt": f"[console_scripts]\n{scripts}".encode(),
        f"{DIST_INFO}/top_level.txt": f"{PACKAGE}\n".encode(),
    }


def _package_files() -> List[Tuple[str, Path]]:
    """(path in the wheel, file) for the package's sources and data (py.typed), no caches."""
    base = ROOT / "src"
    files = []
    for path in sorted((base / PACKAGE).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files.append((path.relative_to(base).as_posix(), path))
    return files


def _write_wheel(directory: str, contents: Dict[str, bytes]) -> str:
    name = f"{DIST}-{VERSION}-{TAG}.whl"
    contents = {**contents, **_dist_info_files()}
    record = []
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for arcname, data in contents.items():
            wheel.writestr(zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0)), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{arcname},sha256={digest},{len(data)}")
        record.append(f"{DIST_INFO}/RECORD,,")
        wheel.writestr(zipfile.ZipInfo(f"{DIST_INFO}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return name


# --- PEP 517 / PEP 660 hooks ---------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[dict] = None) -> str:
    for arcname, data in _dist_info_files().items():
        target = Path(metadata_directory) / arcname
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return DIST_INFO


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, {arcname: path.read_bytes() for arcname, path in _package_files()})


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    """An editable install: a .pth file putting this checkout's src/ on sys.path."""
    return _write_wheel(wheel_directory, {f"__editable__.{DIST}.pth": f"{ROOT / 'src'}\n".encode()})


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    base = f"{DIST}-{VERSION}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as sdist:
        for relative in SDIST_FILES:
            sdist.add(ROOT / relative, f"{base}/{relative}")
        for arcname, path in _package_files():
            sdist.add(path, f"{base}/src/{arcname}")
        info = _metadata().encode()
        entry = tarfile.TarInfo(f"{base}/PKG-INFO")
        entry.size = len(info)
        sdist.addfile(entry, io.BytesIO(info))
    return name
