"""Build hook: the wheel carries the dataset releases as package data.

Everything under the checkout's ``data/releases/`` (release folders, whatever their layout)
and ``data/shards/`` (the content-addressed shard pool the release manifests list) is
copied to ``dgtraces/_data/releases/`` and ``dgtraces/_data/shards/`` in the built package,
where
``dgtraces.store.locate.packaged_root`` finds it through importlib.resources. An editable install
reads the checkout's ``data/`` directly, so nothing is copied for it. All metadata lives in
pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

RELEASES = Path("data") / "releases"
FOLDERS = ("releases", "shards")


class BuildWithReleases(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False) or not RELEASES.is_dir():
            return
        for name in FOLDERS:
            source = Path("data") / name
            target = Path(self.build_lib) / "dgtraces" / "_data" / name
            if target.exists():
                shutil.rmtree(target)
            if source.is_dir():
                shutil.copytree(source, target,
                                ignore=shutil.ignore_patterns(".tmp-*", ".lock", "__pycache__"))


setup(cmdclass={"build_py": BuildWithReleases})
