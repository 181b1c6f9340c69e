"""An in-tree PEP 517 (and PEP 660) build backend for agentpen-client.

The standard library only: pip builds the package in a fresh venv with no
network (requires = [] in pyproject.toml). It builds a pure-Python wheel of
the agentpen_client package (and its console script, agentpen-client), an
editable wheel (a .pth naming this tree), and an sdist. Archives are
reproducible: entries sorted, times fixed.
"""

import base64
import csv
import hashlib
import io
import os
import re
import tarfile
import zipfile

NAME = "agentpen-client"
DIST = "agentpen_client"  # the distribution's name in file names
PACKAGE = "agentpen_client"
SUMMARY = "The Python client of agentpen serve's launcher API and of its workspaces' episode servers (standard library only)"
REQUIRES_PYTHON = ">=3.9"
SCRIPTS = {"agentpen-client": "agentpen_client.cli:main"}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry holds


def _version():
    with open(os.path.join(ROOT, PACKAGE, "__init__.py"), encoding="utf-8") as fh:
        m = re.search(r'^__version__ = "([^"]+)"$', fh.read(), re.M)
    if not m:
        raise RuntimeError("agentpen_client/__init__.py has no __version__")
    return m.group(1)


def _dist_info():
    return "%s-%s.dist-info" % (DIST, _version())


def _metadata():
    readme = ""
    with open(os.path.join(ROOT, PACKAGE, "__init__.py"), encoding="utf-8") as fh:
        m = re.match(r'\s*"""(.*?)"""', fh.read(), re.S)
        if m:
            readme = m.group(1).strip() + "\n"
    return (
        "Metadata-Version: 2.1\n"
        "Name: %s\n"
        "Version: %s\n"
        "Summary: %s\n"
        "Requires-Python: %s\n"
        "Description-Content-Type: text/plain\n"
        "\n%s" % (NAME, _version(), SUMMARY, REQUIRES_PYTHON, readme)
    )


def _wheel_file():
    return "Wheel-Version: 1.0\nGenerator: agentpen-client in-tree backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _entry_points():
    lines = ["[console_scripts]"] + ["%s = %s" % kv for kv in sorted(SCRIPTS.items())]
    return "\n".join(lines) + "\n"


def _package_files():
    """The package's files: (path in the archive, path on disk), sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if f.endswith(".py") or f == "py.typed":
                full = os.path.join(dirpath, f)
                out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    return out


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, "sha256=" + digest, str(len(data))]


def _write_wheel(wheel_directory, files):
    """Writes a wheel of files ((name, bytes), without the dist-info) and
    returns its file name."""
    info = _dist_info()
    files = list(files) + [
        (info + "/METADATA", _metadata().encode()),
        (info + "/WHEEL", _wheel_file().encode()),
        (info + "/entry_points.txt", _entry_points().encode()),
    ]
    record = io.StringIO()
    w = csv.writer(record, lineterminator="\n")
    for name, data in files:
        w.writerow(_record_line(name, data))
    w.writerow([info + "/RECORD", "", ""])
    files.append((info + "/RECORD", record.getvalue().encode()))
    filename = "%s-%s-py3-none-any.whl" % (DIST, _version())
    path = os.path.join(wheel_directory, filename)
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            zi = zipfile.ZipInfo(name, EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data)
    os.replace(tmp, path)
    return filename


def _read(path):
    with open(path, "rb") as fh:
        return fh.read()


# -- PEP 517 -------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = _dist_info()
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for name, text in (("METADATA", _metadata()), ("WHEEL", _wheel_file()), ("entry_points.txt", _entry_points())):
        with open(os.path.join(metadata_directory, info, name), "w", encoding="utf-8") as fh:
            fh.write(text)
    return info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(name, _read(path)) for name, path in _package_files()])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (DIST, _version())
    filename = base + ".tar.gz"
    members = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")), ("_build/backend.py", os.path.abspath(__file__))]
    members += _package_files()
    path = os.path.join(sdist_directory, filename)
    with tarfile.open(path + ".tmp", "w:gz", format=tarfile.PAX_FORMAT) as tf:
        pkg_info = _metadata().encode()
        for name, data in [("PKG-INFO", pkg_info)] + [(n, _read(p)) for n, p in members]:
            ti = tarfile.TarInfo(base + "/" + name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            tf.addfile(ti, io.BytesIO(data))
    os.replace(path + ".tmp", path)
    return filename


# -- PEP 660: pip install -e ---------------------------------------------


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(DIST + ".pth", (ROOT + "\n").encode())])
