"""Build hook: the wheel carries the dataset releases as package data.

Everything under the checkout's ``data/releases/`` (release folders, whatever their layout)
and ``data/shards/`` (the content-addressed shard pool the release manifests list) is
copied to ``dgtraces/_data/releases/`` and ``dgtraces/_data/shards/`` in the built package,
where ``dgtraces.store.locate.packaged_root`` finds it through importlib.resources; the dataset
card's fragments (``cards/fragments/``: Published rows, Reconstruction error, their figures)
go to ``dgtraces/_data/fragments/``, where ``dgtraces.publish.card.fragments_folder`` finds
them. An editable install reads the checkout's ``data/`` directly, so nothing is copied for
it. All metadata lives in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

RELEASES = Path("data") / "releases"
# checkout folder -> folder under dgtraces/_data in the built package
COPIES = ((Path("data") / "releases", "releases"), (Path("data") / "shards", "shards"),
          (Path("cards") / "fragments", "fragments"))


class BuildWithReleases(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False) or not RELEASES.is_dir():
            return
        for source, name in COPIES:
            target = Path(self.build_lib) / "dgtraces" / "_data" / name
            if target.exists():
                shutil.rmtree(target)
            if source.is_dir():
                shutil.copytree(source, target,
                                ignore=shutil.ignore_patterns(".tmp-*", ".lock", "__pycache__"))


setup(cmdclass={"build_py": BuildWithReleases})
